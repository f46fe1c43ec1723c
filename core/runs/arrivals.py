"""When each block of a model arrived under a watch: the watch's page-cache arrivals laid
over the model's tensors, as a load's reads are (``block_timings``), from the first byte on.

A watched program's run (``program.ProgramRun``) and a watch of the app's File ▸ Watch both
time their blocks here, and only where the watch saw the whole model arrive from a verified
cold cache: blocks already cached, or read before an attached watch began, arrive unseen, and
the first block to arrive is then not the model's first block. Bytes that never pass the page
cache (a bucket's, over sockets; reads past it) leave no arrival, and so no block."""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from modelmon.core.loading.result import BlockTiming, block_timings
from modelmon.core.model.records import Model
from modelmon.core.watching.findings import PARTIAL_BELOW
from modelmon.core.watching.result import WatchResult
from modelmon.core.watching.watch import Watch

NO_ARRIVALS = (
    "no byte of the model was seen arriving in the page cache (reads past the cache, as "
    "O_DIRECT's, leave none)"
)


def untimed_reason(watched: WatchResult) -> str | None:
    """Why what ``watched`` saw arrive cannot time the model's blocks; None where it can:
    the whole model (all but ``PARTIAL_BELOW``) seen arriving from a verified cold cache."""
    cache = watched.cache
    if cache is not None and cache.nothing_local:
        return "a bucket's bytes come over sockets, not through the page cache, so none arrive"
    if cache is None or not cache.cold:
        before = (
            f"{cache.resident_before:.0%} of the model was"
            if cache is not None and cache.resident_before == cache.resident_before  # not NaN
            else "the model may have been"
        )
        return (
            f"{before} in the page cache before it: a block already cached never arrives, "
            "so arrivals cannot time the blocks (a cold cache times them all)"
        )
    if watched.first_byte_s is None or watched.bytes_read <= 0:
        return NO_ARRIVALS
    if watched.bytes_read < PARTIAL_BELOW * watched.model_bytes:
        share = watched.bytes_read / max(watched.model_bytes, 1)
        return f"only {share:.0%} of the model was seen arriving, so its blocks are not timed"
    return None


def arrival_blocks(model: Model, watch: Watch, watched: WatchResult) -> tuple[BlockTiming, ...]:
    """``model``'s blocks as ``watch`` saw them arrive, in seconds since its first byte; none
    where the arrivals cannot time them (``untimed_reason``)."""
    first_byte_s = watched.first_byte_s
    if first_byte_s is None or untimed_reason(watched) is not None:
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
