"""What the root API composes from the layers: a load in this process, a measured load (each
with a config file applied), a watch run to its end, and a watched load's storage references
(which ``watching`` alone cannot measure: the ceilings are ``measuring``'s, and the two layers
are independent)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from modelmon.core.configuration import StrategyConfig
from modelmon.core.errors import ConfigError, ModelFormatError
from modelmon.core.loading.config_file import apply_config
from modelmon.core.loading.inproc import load_in_process
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.runner import run_load
from modelmon.core.loading.strategies import default_strategy
from modelmon.core.loading.strategies.base import StopFlag
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, from_mapping
from modelmon.core.watching.result import Reference, WatchResult
from modelmon.core.watching.watch import Watch

PathLike = str | os.PathLike[str]
COMPARE_CEILINGS = ("sequential_read", "parallel_read", "storage", "memory_fill")


def _resolve(
    model: Model, strategy: str | None, config: PathLike | None, options: dict[str, Any]
) -> StrategyConfig:
    """Explicit arguments win over the config file, which wins over the defaults."""
    if config is None:
        chosen = strategy or default_strategy(model)
        return StrategyConfig(chosen, from_mapping(options, base=LoadOptions()))
    return apply_config(config, model, strategy, options)


def load(
    path: PathLike | Model,
    strategy: str | None = None,
    *,
    config: PathLike | None = None,
    stop: StopFlag | None = None,
    rank: tuple[int, int] = (0, 1),
    **options: Any,
) -> dict[str, np.ndarray]:
    """Load every tensor into this process and return {name: array} (numpy arrays, in file
    order; ``torch.from_numpy(array)`` makes a tensor of one without a copy).

    Runs the strategy's in-process form: ``workers × threads`` reader threads share one queue
    of work, each reading through its own descriptors (``mmap-shared-fd`` shares one, on
    purpose). Refuses a load that would not fit in available RAM. ``discard=True`` streams
    through bounded buffers and returns an empty dict (use it with ``verify=True`` to checksum
    a model larger than RAM).
    ``config`` applies a file written by ``modelmon recommend`` (``apply_config``); explicit
    options override it. A config that keeps nothing (``discard = true``) is refused: it
    measures the storage, it loads no weights.
    ``rank=(r, n)``: tensor-parallel rank r of n's part of every tensor, as engines shard a
    checkpoint (``modelmon load --ranks N --ranks-mode slice`` measures it).
    """
    model = path if isinstance(path, Model) else open_model(path)
    chosen = _resolve(model, strategy, config, options)
    if config is not None and chosen.options.discard and not options.get("discard"):
        raise ConfigError(
            f"{os.fspath(config)}: its configuration discards what it reads (discard = true): "
            "load() would return no tensor. It measures the storage's speed; to load the "
            "weights, leave discard out (or pass discard=False)"
        )
    return load_in_process(model, chosen.strategy, chosen.options, stop, rank)


def measure(
    path: PathLike | Model,
    strategy: str | None = None,
    *,
    config: PathLike | None = None,
    **options: Any,
) -> LoadResult:
    """Run one load in worker processes (nothing comes back but the measurement); ``config``
    as ``load``'s."""
    model = path if isinstance(path, Model) else open_model(path)
    chosen = _resolve(model, strategy, config, options)
    return run_load(model, chosen.strategy, chosen.options)


def model_of(paths: Sequence[str]) -> Model | None:
    """The model the watched files make up (one file, or the shards of one folder); None
    when they are not one model modelmon can read (a .bin, files from several folders)."""
    if not paths:
        return None
    folders = {os.path.dirname(path) for path in paths}
    target = paths[0] if len(paths) == 1 else folders.pop() if len(folders) == 1 else None
    if target is None:
        return None
    try:
        model = open_model(target)
    except (ModelFormatError, OSError, ValueError):
        return None
    watched = {os.path.realpath(path) for path in paths}
    if not watched <= {os.path.realpath(f.path) for f in model.files}:
        return None
    return model


def storage_references(
    paths: Sequence[str], repeats: int = 1, cancel: threading.Event | None = None
) -> tuple[Reference, ...]:
    """What this storage delivers on a watched load's model files, to hold its MB/s against:
    plain readers' sequential and parallel reads, the storage's best and the memory fill (cold,
    own descriptors), each the median of ``repeats`` runs, and last the bound of a load that
    keeps its bytes, as a program's does; () when the files are not a model modelmon reads."""
    model = model_of(paths)
    if model is None:
        return ()
    ceilings = measure_ceilings(model, COMPARE_CEILINGS, repeats=repeats, cancel=cancel)
    found = [Reference(c.name, c.mbps, c.spec) for c in ceilings.items]
    bound = ceilings.bound(keeps=True)
    if bound is not None:
        found.append(
            Reference("bound", bound.mbps, f"the lower of storage and memory_fill: {bound.name}")
        )
    return tuple(found)


def watch(command: Sequence[str] | None = None, **options: Any) -> WatchResult:
    """Run ``command`` (or attach to ``pid=``) and watch it load its model, to the end. A
    caller that plots the watch live, or may cancel it, makes the ``Watch`` itself."""
    return Watch(command, **options).run()
