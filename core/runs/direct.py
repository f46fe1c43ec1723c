"""A program that reads its model past the page cache (O_DIRECT): where the watch sees no
bytes arrive, it is timed by its tree's reads, or by the child harness's own clock."""

from __future__ import annotations

import numpy as np

from modelmon.core.system.cache import COLD_THRESHOLD
from modelmon.core.system.storage import storage_facts
from modelmon.core.watching.findings import PARTIAL_BELOW
from modelmon.core.watching.result import WatchResult

DIRECT_READS = (
    "direct I/O: the page cache never holds what it reads, so the load is timed by the "
    "tree's reads (/proc/PID/io: read_bytes on a block device, rchar on FUSE or NFS), to the "
    "sample; read_bytes counts a read as it is asked, so behind a throttle that queues many "
    "reads the rate is an upper bound"
)
DIRECT_OWN_CLOCK = (
    "direct I/O: the page cache never holds what it reads, so the load is timed by the "
    "loader's own clock (its load and its touch of every byte, imports apart); the tree's "
    "reads count a direct read when it is asked, not when its bytes arrive"
)

DIRECT_EDGE = 0.02  # of a direct-I/O run's bytes: read before it started, or after it ended


def reads_direct(watched: WatchResult, known: bool = False) -> bool:
    """Whether the program read its model with O_DIRECT: ``known`` (its settings say so) or
    seen on a descriptor of one of its files."""
    on_model = {f.index for f in watched.files}
    return known or any(d.o_direct and d.file in on_model for d in watched.descriptions)


def bypassed_cache(watched: WatchResult, own_bytes: float | None, known: bool = False) -> bool:
    """Whether a run whose own report says it touched ``own_bytes`` read them past the page
    cache: direct reads known or seen, or, from a verified cold cache, bytes it touched that
    never arrived there (a descriptor opened and closed between two looks, a mount that
    serves every read direct) and that its tree did read (the block layer's count, or its
    read calls' off a block device): a report alone loads nothing."""
    if reads_direct(watched, known):
        return True
    model = watched.model_bytes
    cold = watched.cache is not None and watched.cache.resident_before <= COLD_THRESHOLD
    touched = own_bytes is not None and own_bytes >= PARTIAL_BELOW * model
    read = watched.read_bytes if _tree_counter(watched) == "read_bytes" else watched.read_chars
    return (
        cold
        and touched
        and watched.bytes_read < PARTIAL_BELOW * model
        and read >= PARTIAL_BELOW * model
    )


def direct_reads(watched: WatchResult, known: bool = False) -> tuple[int, float] | None:
    """(bytes, seconds) of a program that read the model with O_DIRECT (``known``, or seen
    on a descriptor of it), from its tree's reads: those bytes never enter the page cache,
    where arrivals are seen. On a block device the reads are the block layer's (/proc/PID/io
    read_bytes); on storage without one (FUSE, NFS) the block layer never sees them, and they
    are the bytes its read calls returned (rchar), which also count what it read before the
    model (its imports). The span runs from the last sample before the reads passed
    ``DIRECT_EDGE`` of the model's bytes to the first after they came within it of the end,
    and the model is timed at the rate of the bytes read in it. None for any other program."""
    if not reads_direct(watched, known):
        return None
    counter = _tree_counter(watched)
    on_blocks = counter == "read_bytes"
    samples = watched.samples
    found = samples.series.get(counter) if samples else None
    if found is None:
        return None
    times, values = found
    keep = np.isfinite(values)
    times, values = times[keep], values[keep]
    if len(values) < 2 or (on_blocks and values[-1] <= watched.bytes_read):
        return None
    total = float(values[-1])
    model = min(total, float(watched.model_bytes))
    before = total - model  # read before the model (rchar: imports), or 0
    began = int(np.argmax(values > before + DIRECT_EDGE * model))
    ended = int(np.argmax(values >= total - DIRECT_EDGE * model))
    first, last = max(0, began - 1), min(len(times) - 1, max(ended, began))
    start, end = float(times[first]), float(times[last])
    # The span holds the bytes read between its two samples, not all of the model's: the
    # model is timed at the rate they came at.
    spanned = float(values[last]) - max(float(values[first]), before)
    if end <= start or spanned <= 0:
        return None
    return int(model), (end - start) * model / spanned


def _tree_counter(watched: WatchResult) -> str:
    """The tree's counter that holds its direct reads: the block layer's (read_bytes) where
    every model file is on a block device, its read calls' (rchar) elsewhere (FUSE, NFS)."""
    on_blocks = all(_on_block_device(f.path) for f in watched.files)
    return "read_bytes" if on_blocks else "read_chars"


def _on_block_device(path: str) -> bool:
    try:
        return storage_facts(path).block_device is not None
    except OSError:
        return True  # storage that cannot be told: the block layer's count
