"""When each block of a model arrived under a watch: the watch's page-cache arrivals laid
over the model's tensors, as a load's reads are (``block_timings``), from the first byte on.

A watched program's run (``program.ProgramRun``) and a watch of the app's File ▸ Watch both
time their blocks here. Bytes that never pass the page cache (a bucket's, over sockets; reads
past it) leave no arrival, and so no block."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from modelmon.core.loading.result import BlockTiming, block_timings
from modelmon.core.model.records import Model
from modelmon.core.watching.watch import Watch


def arrival_blocks(
    model: Model, watch: Watch, first_byte_s: float | None
) -> tuple[BlockTiming, ...]:
    """``model``'s blocks as ``watch`` saw them arrive, in seconds since its first byte
    (``first_byte_s`` after the watch began); none before a first byte."""
    if first_byte_s is None:
        return ()
    columns = watch.reads.columns()
    index = {os.path.realpath(f.path): i for i, f in enumerate(model.files)}
    known = {f.index: index.get(f.path, -1) for f in watch.files.files}
    files = np.array([known.get(int(i), -1) for i in columns["file"]], dtype=np.int64)
    keep = files >= 0
    reads = {key: column[keep] for key, column in columns.items()}
    reads["file"] = files[keep]
    reads["prefetch"] = np.zeros(int(keep.sum()), dtype=bool)
    start_ns = watch.t0_ns + round(first_byte_s * 1e9)
    timings = block_timings(model, reads, start_ns)
    return tuple(replace(b, start=max(0.0, b.start), end=max(0.0, b.end)) for b in timings)
