"""The library API: load a model in this process, or measure a load in worker processes."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from modelmon.core.loading.inproc import load_in_process
from modelmon.core.loading.runner import run_load
from modelmon.core.loading.strategies.base import StopFlag
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, from_mapping
from modelmon.core.output.result import LoadResult

PathLike = str | os.PathLike[str]


def _resolve(
    strategy: str | None, config: PathLike | None, options: dict[str, Any], model: Model
) -> tuple[str, LoadOptions]:
    """Explicit arguments win over the config file, which wins over the defaults. A config
    measured on another model or storage warns (``ConfigMismatchWarning``) and still applies."""
    if config is None:
        return strategy or "sequential", from_mapping(options, base=LoadOptions())
    from modelmon.core.output.config import read_config
    from modelmon.core.output.identity import warn_if_different

    recommended = read_config(config)
    resolved = strategy or recommended.strategy, from_mapping(options, base=recommended.options)
    warn_if_different(str(config), recommended.document.get("identity"), model)
    return resolved


def load(
    path: PathLike | Model,
    strategy: str | None = None,
    *,
    config: PathLike | None = None,
    stop: StopFlag | None = None,
    **options: Any,
) -> dict[str, np.ndarray]:
    """Load every tensor into this process and return {name: array}.

    Runs the strategy's in-process form: ``workers × threads`` reader threads share one queue
    of work, each reading through its own descriptors (``mmap-shared-fd`` shares one, on
    purpose). Refuses a load that would not fit in available RAM. ``discard=True`` streams
    through bounded buffers and returns an empty dict (use it with ``verify=True`` to checksum
    a model larger than RAM).
    ``config`` applies a file written by ``modelmon recommend``; explicit options override it.
    """
    model = path if isinstance(path, Model) else open_model(path)
    name, resolved = _resolve(strategy, config, options, model)
    if "readahead" not in options:
        resolved = _config_readahead(model, resolved)
    return load_in_process(model, name, resolved, stop)


def _config_readahead(model: Model, options: LoadOptions) -> LoadOptions:
    """A config's readahead is a fact of the machine it was measured on (its apply snippet
    says how to keep it): applied where this process may set it, else the load runs with the
    device as it is, rather than fail. Asked for explicitly, a refusal is an error."""
    if options.readahead is None:
        return options
    from modelmon.core.system import readahead

    if readahead.unavailable([f.path for f in model.files]) is None:
        return options
    return options.with_(readahead=None)


def measure(
    path: PathLike | Model,
    strategy: str | None = None,
    *,
    config: PathLike | None = None,
    **options: Any,
) -> LoadResult:
    """Run one load in worker processes (nothing comes back but the measurement)."""
    model = path if isinstance(path, Model) else open_model(path)
    name, resolved = _resolve(strategy, config, options, model)
    if "readahead" not in options:  # as load() does: what is applied is what was measured
        resolved = _config_readahead(model, resolved)
    return run_load(model, name, resolved)
