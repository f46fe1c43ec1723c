"""``modelmon.core.load``'s engine: one strategy run in this process, its readers as threads.

In-process there is nothing to gain from separate "workers": a worker is only a group of
threads. So the ``workers × threads`` readers all pull work units (or tensors) from one shared
queue and fill one sink, each thread through its own descriptors (``mmap-shared-fd`` alone
shares one). The sink's fill tracking proves every byte of every tensor arrived exactly once.
"""

from __future__ import annotations

import contextlib
import os
import threading

import numpy as np

from modelmon.core.loading.drop_behind import DropBehind, strategy_drops_behind
from modelmon.core.loading.envelope import run_envelope
from modelmon.core.loading.preflight import check_memory, preflight
from modelmon.core.loading.reads import ReadRecorder, new_descriptor_id
from modelmon.core.loading.sink import TensorSink
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.loading.strategies.base import StopFlag, WorkerContext
from modelmon.core.model.plan import load_order
from modelmon.core.model.records import Model
from modelmon.core.model.tensor_parallel import KeptPart, tp_slice
from modelmon.core.options import MAX_PARALLEL, LoadOptions
from modelmon.core.system import cache, host_memory


def load_in_process(
    model: Model,
    strategy: str,
    options: LoadOptions,
    stop: StopFlag | None = None,
    rank: tuple[int, int] = (0, 1),
) -> dict[str, np.ndarray]:
    """Load every tensor of ``model`` with ``strategy``; {name: array} in file order. ``rank``
    (r, n): only tensor-parallel rank r of n's part of each tensor (``tensor_parallel``)."""
    part, kept = tp_slice(model, *rank)
    checks = preflight(get_strategy(strategy), part, options, in_process=True)
    with checks, run_envelope(local_paths(part), options.readahead):
        return _load(part, strategy, options, stop, kept)


def local_paths(model: Model) -> list[str]:
    """The model's files on this machine: none of a model in object storage."""
    return [f.path for f in model.files if f.remote is None]


def in_process(options: LoadOptions) -> LoadOptions:
    """What ``options`` run as in this process: one worker whose threads are all the readers
    (workers × threads, at most ``MAX_PARALLEL``), each with its own descriptor."""
    readers = min(MAX_PARALLEL, options.workers * options.threads)
    return options.with_(workers=1, threads=readers)


def _load(
    model: Model,
    strategy: str,
    options: LoadOptions,
    stop: StopFlag | None,
    parts: dict[str, KeptPart],
) -> dict[str, np.ndarray]:
    strategy_class = get_strategy(strategy)
    check_memory(model, options)
    paths = local_paths(model)
    if options.cache != "keep" and paths:
        host_memory.note_free()  # the caller's own frees are unknown: assume one just now
        arrays = model.total_bytes if strategy_class.fills_arrays(options) else 0
        page_cache = strategy_class.fills_page_cache(paths)
        cache.prepare(paths, options.cache, arrays=arrays, page_cache=page_cache)
    indexes = load_order(model)
    sink = TensorSink(
        model,
        indexes,
        keep=not options.discard,
        verify=options.verify,
        scratch_bytes=options.chunk,
        lazy=not strategy_class.allocates,
        parts=parts,
    )
    drops = strategy_drops_behind(
        model.file_bytes,
        options,
        reads_objects=strategy_class.reads_objects,
        maps_file=strategy_class.maps_file,
        releases_mappings=strategy_class.releases_mappings,
    )
    dropper = DropBehind(paths) if drops is not None else None
    after_read = dropper.dropped if dropper is not None and not strategy_class.maps_file else None
    shared = (
        [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in paths] if strategy_class.shares_fd else []
    )
    ctx = WorkerContext(
        worker=0,
        model=model,
        indexes=indexes,
        options=in_process(options),
        sink=sink,
        recorder=ReadRecorder(0, None, after_read=after_read),
        stop=stop or threading.Event(),
        shared_fds=dict(enumerate(shared)) if shared else None,
        shared_ids={file: new_descriptor_id() for file in range(len(shared))},
        drop_behind=dropper,
    )
    loader = strategy_class()
    try:
        loader.prepare(ctx)
        loader.run(ctx)
        sink.check_complete()
    finally:
        loader.release()
        ctx.close()
        for descriptor in shared:
            with contextlib.suppress(OSError):
                os.close(descriptor)
        if drops is not None:  # what the readers' folio-aligned drops left
            cache.evict(paths)
    return {model.extents[index].name: sink.array(index) for index in indexes if sink.keep}
