"""direct: O_DIRECT reads, aligned, straight into the tensors' arrays where alignment allows.

The sink places every big tensor's array at an address congruent to its file offset modulo
the page size, so the whole aligned blocks inside a tensor are read directly into it; only
the blocks a read shares with a neighbour (a tensor boundary, the head and tail of the
aligned window, padding) and tensors too small to have their own mapping go through a
bounce buffer and are copied out.

O_DIRECT has no readahead, and needs none here: each read is one chunk-sized ``preadv``, which
the block layer splits into requests in flight together (a 16 MiB read is four 4 MiB requests
at once on this machine's disk); more depth comes from more readers (workers × threads), each
through a descriptor of its own, as for every strategy. One read split among helper threads
is slower: on the local disk 1,500 against 1,900 MB/s with 4 workers, and on a FUSE
mount 290 against 800, where the daemon serves each descriptor as one stream that reads out of
order make seek (rclone waits for the read in sequence, then starts a new request).
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.strategies.base import Strategy, WorkerContext, register, timed_read
from modelmon.core.loading.strategies.sequential import sequential_read
from modelmon.core.model.plan import IOV_MAX, Read

ALIGN = 4096  # covers 512-byte and 4 KiB logical blocks alike


def _aligned_buffer(size: int) -> mmap.mmap:
    # Anonymous mappings are page-aligned, which is what O_DIRECT wants of the memory.
    return mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _error_name(exc: OSError) -> str:
    """EINVAL rather than "Invalid argument": the name a user searches for."""
    return errno.errorcode.get(exc.errno or 0, str(exc.errno))


def probe_direct(path: str) -> str | None:
    """None when O_DIRECT works on this file, else the reason it does not."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_CLOEXEC)
    except OSError as exc:
        return f"O_DIRECT open refused ({_error_name(exc)})"
    buffer = _aligned_buffer(ALIGN)
    try:
        os.preadv(fd, [buffer], 0)
    except OSError as exc:
        return f"O_DIRECT read refused ({_error_name(exc)})"
    finally:
        buffer.close()
        os.close(fd)
    return None


def _down(value: int) -> int:
    return value // ALIGN * ALIGN


def _up(value: int) -> int:
    return -(-value // ALIGN) * ALIGN


@dataclass(frozen=True, slots=True)
class _Placed:
    """One piece of a read: file bytes [lo, hi) of tensor ``extent`` from ``start`` on, and the
    aligned middle [direct_lo, direct_hi) read straight into its memory (empty: none)."""

    extent: int
    start: int
    lo: int
    hi: int
    view: memoryview
    direct_lo: int
    direct_hi: int


def _place(ctx: WorkerContext, read: Read) -> list[_Placed]:
    placed, position = [], read.offset
    for piece in read.pieces:
        lo, hi = position, position + piece.length
        position = hi
        view = ctx.sink.piece(piece.extent, piece.start, piece.length)
        direct_lo, direct_hi = _up(lo), _down(hi)
        own_memory = ctx.sink.keep and piece.extent >= 0 and direct_lo < direct_hi
        if own_memory:
            address = np.frombuffer(view, dtype=np.uint8).ctypes.data
            own_memory = (address - lo) % ALIGN == 0
        if not own_memory:
            direct_lo = direct_hi = hi
        placed.append(_Placed(piece.extent, piece.start, lo, hi, view, direct_lo, direct_hi))
    return placed


def _iovecs(
    placed: list[_Placed], window: tuple[int, int], bounce: memoryview
) -> tuple[list[memoryview] | None, list[tuple[int, int, int]]]:
    """The vector for one aligned window, in file order, and the bounced stretches
    (file lo, file hi, offset in ``bounce``). The vector is None when it would exceed
    IOV_MAX."""
    vector: list[memoryview] = []
    bounced: list[tuple[int, int, int]] = []
    used, position = 0, window[0]
    for part in placed:
        if part.direct_lo >= part.direct_hi:
            continue
        if part.direct_lo > position:
            size = part.direct_lo - position
            vector.append(bounce[used : used + size])
            bounced.append((position, part.direct_lo, used))
            used += size
        offset = part.direct_lo - part.lo
        vector.append(part.view[offset : offset + part.direct_hi - part.direct_lo])
        position = part.direct_hi
    if window[1] > position:
        vector.append(bounce[used : used + window[1] - position])
        bounced.append((position, window[1], used))
    return vector if len(vector) <= IOV_MAX else None, bounced


@register
class DirectStrategy(Strategy):
    name = "direct"
    summary = (
        "O_DIRECT: aligned reads that bypass the page cache, straight into the arrays where "
        "alignment allows; falls back to buffered sequential reads, saying why, where the "
        "filesystem refuses"
    )
    uses = Strategy.uses - {"readahead"} | {"chunk"}  # O_DIRECT bypasses readahead

    @classmethod
    def fills_page_cache(cls, paths: Sequence[str]) -> bool:
        return any(probe_direct(path) is not None for path in paths)  # buffered, it does

    def run(self, ctx: WorkerContext) -> None:
        probes = (probe_direct(ctx.model.files[f].path) for f in ctx.files_used())
        reasons = {reason for reason in probes if reason is not None}
        if reasons:
            ctx.notes.append(f"{sorted(reasons)[0]}: used buffered sequential reads instead")
            ctx.reads_in_threads(lambda read: sequential_read(ctx, read))
            return
        local = threading.local()
        buffers: list[mmap.mmap] = []
        lock = threading.Lock()

        def bounce() -> mmap.mmap:
            buffer = getattr(local, "buffer", None)
            if buffer is None:
                buffer = local.buffer = _aligned_buffer(_up(ctx.options.chunk) + 2 * ALIGN)
                with lock:
                    buffers.append(buffer)
            return buffer

        try:
            ctx.reads_in_threads(lambda read: self._read_one(ctx, read, bounce()))
        finally:
            for buffer in buffers:
                # A failed read's traceback may still hold a view of its bounce buffer:
                # close() would then raise BufferError over the error that says what went
                # wrong (a truncated file). The mapping is freed with its last view instead.
                with contextlib.suppress(BufferError):
                    buffer.close()

    def _read_one(
        self,
        ctx: WorkerContext,
        read: Read,
        bounce_map: mmap.mmap,
    ) -> None:
        fd = ctx.fd(read.file, os.O_DIRECT)
        window = (_down(read.offset), _up(read.offset + read.length))
        placed = _place(ctx, read)
        with memoryview(bounce_map) as bounce:
            vector, bounced = _iovecs(placed, window, bounce)
            if vector is None:  # too many stretches for one call: bounce it all
                vector = [bounce[: window[1] - window[0]]]
                bounced = [(window[0], window[1], 0)]
                placed = [
                    _Placed(p.extent, p.start, p.lo, p.hi, p.view, p.hi, p.hi) for p in placed
                ]
            length = window[1] - window[0]
            try:
                got = timed_read(
                    ctx.recorder, read.file, window[0], length, os.preadv, fd, vector, window[0]
                )
            finally:
                for view in vector:
                    view.release()
            if got < read.offset + read.length - window[0]:  # O_DIRECT stops short only at EOF
                raise LoadError(
                    f"file ended at byte {window[0] + got} during an O_DIRECT read "
                    "(truncated during the load?)"
                )
            for part in placed:
                self._copy_bounced(part, bounced, bounce)
                ctx.sink.filled_piece(part.extent, part.start, part.view)

    @staticmethod
    def _copy_bounced(
        part: _Placed, bounced: list[tuple[int, int, int]], bounce: memoryview
    ) -> None:
        """Copy the piece's bytes that were not read into it directly out of the bounce."""
        target = np.frombuffer(part.view, dtype=np.uint8)
        for lo, hi in ((part.lo, part.direct_lo), (part.direct_hi, part.hi)):
            if lo >= hi:
                continue
            for stretch_lo, stretch_hi, offset in bounced:
                if stretch_lo <= lo and hi <= stretch_hi:
                    source = np.frombuffer(bounce, dtype=np.uint8)
                    at = offset + lo - stretch_lo
                    target[lo - part.lo : hi - part.lo] = source[at : at + hi - lo]
                    break
            else:  # the plan always bounces what it does not read directly
                raise LoadError(f"direct read plan lost bytes {lo}-{hi} of a piece")
