"""Memory-mapped strategies: mmap, and the shared-descriptor anti-pattern."""

from __future__ import annotations

import mmap
import threading

import numpy as np

from modelmon.core.loading.strategies.base import (
    MADVISE,
    Strategy,
    WorkerContext,
    register,
    timed_read,
)
from modelmon.core.model.plan import file_index


class _Mappings:
    """Read-only mappings of the model files, one set per reading thread, unmapped on close.

    Each thread maps through its own descriptor (``ctx.fd``), so its page faults drive its own
    open file description's readahead; ``mmap-shared-fd`` hands every thread the one shared
    descriptor, which is the point of that strategy.
    """

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self._local = threading.local()
        self._lock = threading.Lock()
        self._maps: list[mmap.mmap] = []
        self._sources: list[dict[int, np.ndarray]] = []

    def source(self, file: int) -> np.ndarray:
        """The calling thread's mapping of ``file`` as bytes."""
        mine: dict[int, np.ndarray] | None = getattr(self._local, "sources", None)
        if mine is None:
            mine = self._local.sources = {}
            with self._lock:
                self._sources.append(mine)
        if file not in mine:
            size = self.ctx.model.files[file].size
            if size == 0:  # mmap refuses empty files; they hold no tensor bytes anyway
                return np.empty(0, dtype=np.uint8)
            mapping = mmap.mmap(self.ctx.fd(file), size, mmap.MAP_SHARED, mmap.PROT_READ)
            with self._lock:
                self._maps.append(mapping)
            if self.ctx.options.madvise != "none":
                mapping.madvise(MADVISE[self.ctx.options.madvise])
            mine[file] = np.frombuffer(mapping, dtype=np.uint8)
        return mine[file]

    def close(self) -> None:
        for sources in self._sources:
            sources.clear()  # drop the exported buffers first, or close() refuses
        for mapping in self._maps:
            mapping.close()
        self._maps.clear()
        self._sources.clear()


# Copies out of a mapping go in steps this small. One big memcpy may touch the source out of
# order (glibc's large-copy paths load the tail first, and pick the path by the relative
# alignment of source and destination): on an rclone FUSE mount that turned into 4-5 MB/s of
# single-page network reads for an 8 MiB copy, against 120-170 MB/s in 256 KiB steps
# (measured; 1 MiB steps were already slow).
COPY_STEP = 256 << 10


def copy_forward(target: np.ndarray, source: np.ndarray) -> None:
    """``target[:] = source``, reading the source strictly front to back."""
    for start in range(0, len(source), COPY_STEP):
        np.copyto(target[start : start + COPY_STEP], source[start : start + COPY_STEP])


def copy_out_of_maps(ctx: WorkerContext) -> None:
    """Copy every assigned tensor out of the mappings, chunk by chunk, touching every page.

    numpy's copy releases the GIL, so the page faults of several threads overlap.
    """
    order = file_index(ctx.model)
    chunk = ctx.options.chunk
    mappings = _Mappings(ctx)
    try:

        def copy_tensor(index: int) -> None:
            extent = ctx.model.extents[index]
            file = order[extent.file]
            start = 0
            while start < extent.length:
                ctx.check()
                source = mappings.source(file)
                length = min(chunk, extent.length - start)
                view = ctx.sink.piece(index, start, length)
                offset = extent.offset + start

                timed_read(
                    ctx.recorder,
                    file,
                    offset,
                    length,
                    copy_forward,
                    np.frombuffer(view, dtype=np.uint8),
                    source[offset : offset + length],
                )
                ctx.sink.filled_piece(index, start, view)
                start += length
            if extent.length == 0:
                ctx.sink.filled_piece(index, 0, b"")

        # One shared description: tensors go to threads in turn (the anti-pattern's scatter).
        ctx.tensors_in_threads(copy_tensor, interleaved=ctx.shared_fds is not None)
    finally:
        mappings.close()


@register
class MmapStrategy(Strategy):
    name = "mmap"
    maps_file = True
    summary = "each worker maps the file through its own descriptor and copies every tensor out"
    uses = Strategy.uses | {"chunk", "fadvise", "madvise"}
    descriptors_per_file = 2  # its own, and the mapping's duplicate

    def run(self, ctx: WorkerContext) -> None:
        copy_out_of_maps(ctx)


@register
class SharedFdMmapStrategy(Strategy):
    name = "mmap-shared-fd"
    summary = (
        "anti-pattern: every worker maps ONE descriptor opened by the parent; tensors "
        "dealt round-robin, so storage sees scattered reads with shared readahead"
    )
    uses = Strategy.uses - {"partition"} | {"chunk", "madvise"}
    shares_fd = True
    maps_file = True
    forced_partition = "round-robin"
    descriptors_per_file = 1  # the mapping's duplicate of the shared one (one per file)

    def run(self, ctx: WorkerContext) -> None:
        ctx.notes.append(
            "every worker and thread read through one shared descriptor (on purpose: the "
            "anti-pattern); every other strategy gives each reader its own"
        )
        copy_out_of_maps(ctx)
