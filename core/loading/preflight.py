"""What a load must pass in the process that starts it, before any reader starts: a model with
bytes to load, a strategy that can load it at all, RAM for what it keeps, and an open-files
limit for every descriptor it will hold."""

from __future__ import annotations

from contextlib import AbstractContextManager

from modelmon.core.errors import LoadError
from modelmon.core.loading.strategies.base import Strategy
from modelmon.core.model.formats import require_tensor_bytes
from modelmon.core.model.records import Model
from modelmon.core.options import MAX_PARALLEL, LoadOptions
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.memory_limit import size_text
from modelmon.core.system.open_files import BASE_DESCRIPTORS, enough_open_files
from modelmon.core.units import gib_text


def descriptors_needed(
    strategy: type[Strategy], model: Model, options: LoadOptions, in_process: bool
) -> tuple[int, int]:
    """(descriptors a process of the load may hold at once, its reader threads): every
    reader of a worker may read from every file (a worker sharing work may be handed any)."""
    files = len(model.files)
    readers = (
        min(MAX_PARALLEL, options.workers * options.threads) if in_process else options.threads
    )
    shared = files if strategy.shares_fd else 0  # the parent's copies, and each worker's
    worker = BASE_DESCRIPTORS + shared + strategy.descriptors(files, readers)
    parent = BASE_DESCRIPTORS + shared + 4 * options.workers  # pipes to and from the workers
    return (worker if in_process else max(worker, parent)), readers


def preflight(
    strategy: type[Strategy], model: Model, options: LoadOptions, *, in_process: bool
) -> AbstractContextManager[None]:
    """Refuse (LoadError, one line) a load that cannot run; else the open-files limit to hold
    while it runs (raised to the hard limit where the soft one is too low)."""
    check_loadable(strategy, model, options)
    needed, readers = descriptors_needed(strategy, model, options, in_process)
    threads = f"{readers} reader thread{'s' if readers != 1 else ''}"
    what = f"{strategy.name} over {len(model.files)} files with {threads} per process"
    return enough_open_files(needed, what)


def check_loadable(strategy: type[Strategy], model: Model, options: LoadOptions) -> None:
    """Refuse (LoadError, one line) a strategy that cannot load ``model`` at all: a front end
    that hands the load to other machines (the fleet) says it before it asks them."""
    refusal = objects_refusal(strategy, model, options) or strategy.cannot_load(model)
    if refusal is not None:
        raise LoadError(f"the {strategy.name} strategy cannot load {model.path}: {refusal}")


def objects_refusal(strategy: type[Strategy], model: Model, options: LoadOptions) -> str | None:
    """Why ``strategy`` cannot load ``model`` for where its bytes are: a file strategy and a
    model in object storage, or the other way round; None when they match."""
    remote = any(file.remote is not None for file in model.files)
    if remote and not strategy.reads_objects:
        return (
            "it reads files, and the model is in object storage: use ranged or "
            "ranged-stream (concurrent ranged GETs)"
        )
    if remote and options.cache == "warm":
        return (
            "a model in object storage has no page cache on this machine to warm (every "
            "read goes to the server): use --cache cold"
        )
    return None


def refuse_objects(model: Model) -> None:
    """A model in object storage cannot be loaded or measured yet: one LoadError line. The
    strategies read files; the ones that read objects by ranged GETs (``storage.reader``)
    come with their own checks."""
    if any(file.remote is not None for file in model.files):
        raise LoadError(
            f"{model.path}: loading from object storage is not available yet "
            "(modelmon inspect reads its header)"
        )


def check_memory(model: Model, options: LoadOptions, limit: int | None = None) -> None:
    """Refuse a load of nothing, or a keep-everything load that cannot fit in RAM, before
    anything starts."""
    require_tensor_bytes(model)
    if options.discard:
        return
    usable = memory_facts().usable if limit is None else limit
    if model.total_bytes > usable:
        room = f"{gib_text(usable)} of RAM available"
        if limit is not None:
            room = f"memory limit of {size_text(limit)}"
        raise LoadError(
            f"loading {gib_text(model.total_bytes)} would not fit in the {room}; turn "
            "discard on to measure it streaming through bounded buffers, keeping nothing"
        )
