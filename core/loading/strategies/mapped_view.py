"""mmap-view: every tensor is a view of a private mapping of its file, no copy at all.

What llama.cpp does by default, and why its warm loads are near instant: the page cache already
holds the bytes, so mapping them costs page-table entries, not a copy into fresh memory (whose
every page the kernel must first zero). Each reading thread maps each file through its own
descriptor, populates each tensor's pages with ``MADV_POPULATE_READ`` in chunk-sized steps (a
page that is gone returns EFAULT instead of raising SIGBUS), then reads every byte once. The
arrays are writable copy-on-write; the mapping lives as long as any array views it.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.strategies.base import (
    MADVISE,
    Strategy,
    WorkerContext,
    register,
    timed_read,
)
from modelmon.core.model.plan import file_index
from modelmon.core.system.libc import LIBC, MAP_FAILED

PAGE = mmap.PAGESIZE
MADV_POPULATE_READ = 22  # Linux >= 5.14: fault pages in, report a missing page as EFAULT
POPULATE_RETRIES = 100  # EINTR / EAGAIN from populate: the kernel asks to be called again


class _Unmap:
    """Unmaps one mapping when it is collected, i.e. when the buffer it hangs on is."""

    __slots__ = ("address", "munmap", "size")

    def __init__(self, address: int, size: int) -> None:
        self.address = address
        self.size = size
        self.munmap = LIBC.munmap  # held here: module globals may be gone at exit

    def __del__(self) -> None:
        self.munmap(self.address, self.size)


class FileMapping:
    """A private, writable (copy-on-write) mapping of a whole file, as bytes in ``data``.

    Mapped with libc rather than Python's ``mmap``, which keeps a duplicate of the descriptor
    open for the mapping's lifetime: kept arrays would hold one descriptor per reader and file.
    Unmapped once neither this object nor any array made from ``data`` is left.
    """

    def __init__(self, fd: int, size: int) -> None:
        prot = mmap.PROT_READ | mmap.PROT_WRITE
        address = LIBC.mmap(None, size, prot, mmap.MAP_PRIVATE, fd, 0)
        if address is None or address == MAP_FAILED:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        memory = (ctypes.c_uint8 * size).from_address(address)
        memory.unmap = _Unmap(address, size)  # type: ignore[attr-defined]
        self.address = address
        self.data = np.frombuffer(memoryview(memory), dtype=np.uint8)

    def advise(self, start: int, length: int, advice: int) -> None:
        """madvise bytes [start, start+length); ``start`` page-aligned. OSError with errno."""
        if LIBC.madvise(self.address + start, length, advice) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))


def touch_every_byte(data: np.ndarray) -> int:
    """Read every byte of ``data`` once (an XOR fold over 8-byte words: numpy releases the GIL
    and streams at memory speed); the fold, so that nothing can skip the reads."""
    lead = min(len(data), -data.ctypes.data % 8)
    words = (len(data) - lead) // 8
    body = data[lead : lead + words * 8].view(np.uint64)
    folded = int(np.bitwise_xor.reduce(body)) if words else 0
    rest = np.concatenate((data[:lead], data[lead + words * 8 :]))
    return folded ^ (int(np.bitwise_xor.reduce(rest)) if len(rest) else 0)


class _Populate:
    """Faults a page-aligned range in: MADV_POPULATE_READ, or where the kernel refuses it
    (EINVAL: Linux < 5.14), one byte per page read by numpy (said once in the notes)."""

    def __init__(self, ctx: WorkerContext) -> None:
        self.ctx = ctx
        self.refused = False
        self._lock = threading.Lock()

    def __call__(self, mapping: FileMapping, file: int, start: int, end: int) -> None:
        if not self.refused:
            for _ in range(POPULATE_RETRIES):
                try:
                    mapping.advise(start, end - start, MADV_POPULATE_READ)
                    return
                except OSError as exc:
                    if exc.errno == errno.EINVAL:
                        self._refused()
                        break
                    if exc.errno not in (errno.EINTR, errno.EAGAIN):
                        raise self._error(file, start, end, exc) from None
        int(mapping.data[start:end:PAGE].max())

    def _refused(self) -> None:
        with self._lock:
            if not self.refused:
                self.refused = True
                self.ctx.notes.append(
                    "the kernel refused MADV_POPULATE_READ (Linux < 5.14?): pages were "
                    "faulted in by reading one byte of each, and a truncated file kills by SIGBUS"
                )

    def _error(self, file: int, start: int, end: int, exc: OSError) -> LoadError:
        path = self.ctx.model.files[file].path
        if exc.errno == errno.EFAULT:  # a page past the end of the file: it shrank
            return LoadError(
                f"{path}: bytes {start}-{end} are no longer in the file (truncated during "
                "the load?)"
            )
        return LoadError(f"{path}: mapping bytes {start}-{end} failed: {exc.strerror}")


@register
class MmapViewStrategy(Strategy):
    name = "mmap-view"
    summary = (
        "zero-copy: each thread maps the file through its own descriptor, populates every "
        "tensor's pages (MADV_POPULATE_READ) and reads each byte once; the tensors are views "
        "of the mapping (copy-on-write), as llama.cpp does. A file truncated or rewritten in "
        "place while they live kills by SIGBUS: copy files that change"
    )
    uses = Strategy.uses | {"chunk", "fadvise", "madvise"}
    allocates = False
    maps_file = True
    releases_mappings = True

    def run(self, ctx: WorkerContext) -> None:
        order = file_index(ctx.model)
        step = max(PAGE, ctx.options.chunk - ctx.options.chunk % PAGE)
        populate = _Populate(ctx)
        local = threading.local()
        sink = ctx.sink

        def mapping(file: int) -> FileMapping:
            mine: dict[int, FileMapping] | None = getattr(local, "mappings", None)
            if mine is None:
                mine = local.mappings = {}
            fd = ctx.fd(file)  # every time: the read log learns which description reads
            if file not in mine:
                mine[file] = FileMapping(fd, ctx.model.files[file].size)
                if ctx.options.madvise != "none":
                    mine[file].advise(0, ctx.model.files[file].size, MADVISE[ctx.options.madvise])
            return mine[file]

        def load_tensor(index: int) -> None:
            extent = ctx.model.extents[index]
            if extent.length == 0:
                sink.filled_piece(index, 0, b"")
                return
            file = order[extent.file]
            mapped = mapping(file)
            end = extent.offset + extent.length
            sink.place(index, mapped.data[extent.offset : end])
            position = extent.offset - extent.offset % PAGE
            while position < end:
                ctx.check()
                step_end = min(position + step, end)
                first = max(position, extent.offset)
                length = step_end - first
                timed_read(
                    ctx.recorder, file, first, length, populate, mapped, file, position, step_end
                )
                piece = mapped.data[first:step_end]
                if not sink.verify:  # with verify, the sink's crc32 reads every byte
                    touch_every_byte(piece)
                sink.filled_piece(index, first - extent.offset, piece.data)
                if not sink.keep:  # discard: drop the step's pages from the mapping
                    mapped.advise(position, step_end - position, mmap.MADV_DONTNEED)
                    if ctx.drop_behind is not None:  # and from the page cache, unmapped now
                        ctx.drop_behind.dropped(file, position, step_end - position)
                position = step_end

        ctx.tensors_in_threads(load_tensor)
