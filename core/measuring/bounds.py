"""What the storage and the memory give, measured by plain code that is none of modelmon's
strategies: a load is judged against these, so a change to a strategy never moves the bar it
is judged by.

- The storage: threads that each own a descriptor and read one contiguous range of the files
  with ``preadv`` into one reused buffer (the bytes are discarded), buffered or ``O_DIRECT``.
- The memory fill: threads that each own a descriptor on ``/dev/zero`` and read it into fresh
  anonymous memory: the kernel faults every page in and writes it, the work a load that keeps
  its bytes pays on top of its reads. Measured alone (the bound) and while the storage's
  plain reads run beside it, as they do in a load (which bound binds).
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.options import MiB
from modelmon.core.system.memory import memory_facts

ALIGN = 4096  # O_DIRECT offsets, lengths and buffers are multiples of the block size
FILL_BYTES = 1 << 30  # fresh memory filled per run: enough to span the host's backing


@dataclass(frozen=True, slots=True)
class Reading:
    """One plain read of the files: how, and how fast."""

    readers: int
    request: int  # bytes per preadv call
    direct: bool
    mbps: float

    @property
    def setting(self) -> str:
        mode = "O_DIRECT" if self.direct else "buffered"
        return f"{self.readers} reader(s), {self.request // MiB} MiB requests, {mode}"


SETTING = re.compile(r"(\d+) reader\(s\), \d+ MiB requests, (O_DIRECT|buffered)")


def readers_of(setting: str) -> tuple[int, bool] | None:
    """The readers and whether they read O_DIRECT, of a ``Reading.setting`` (None: another's,
    a bucket's curve)."""
    found = SETTING.fullmatch(setting)
    return (int(found[1]), found[2] == "O_DIRECT") if found else None


def _ranges(sizes: Sequence[int], readers: int) -> list[list[tuple[int, int, int]]]:
    """The files' bytes, end to end, cut into ``readers`` contiguous ranges of (file, offset,
    length) pieces."""
    total = sum(sizes)
    share = max(1, -(-total // readers))
    out = []
    for reader in range(readers):
        low, high = reader * share, min((reader + 1) * share, total)
        pieces, start = [], 0
        for index, size in enumerate(sizes):
            first, last = max(low, start), min(high, start + size)
            if first < last:
                pieces.append((index, first - start, last - first))
            start += size
        out.append(pieces)
    return out


def _read_pieces(
    paths: Sequence[str],
    pieces: list[tuple[int, int, int]],
    request: int,
    direct: bool,
    failures: list[BaseException],
    kept: list[mmap.mmap] | None = None,
) -> None:
    keep = kept is not None
    # Page-aligned, as O_DIRECT needs: one reused request's worth, or (keeping) fresh memory
    # for every byte of the range, faulted in as the reads land, as a load's arrays are.
    span = sum(length for _, _, length in pieces) + (2 * len(pieces) * ALIGN if direct else 0)
    buffer = mmap.mmap(-1, max(ALIGN, span) if keep else request)
    view = memoryview(buffer)
    at = 0  # where the next bytes land, keeping
    descriptors: dict[int, int] = {}
    flags = os.O_RDONLY | (os.O_DIRECT if direct else 0)
    try:
        for index, offset, length in pieces:
            if index not in descriptors:
                descriptors[index] = os.open(paths[index], flags)
            fd, end = descriptors[index], offset + length
            if direct:  # an aligned start: the bytes before it, under a block, read twice
                offset -= offset % ALIGN
            while offset < end:
                want = min(request, end - offset)
                if direct:
                    want = -(-want // ALIGN) * ALIGN
                got = os.preadv(fd, [view[at : at + want]], offset)
                if got <= 0:
                    break
                offset += got
                if keep:
                    at += -(-got // ALIGN) * ALIGN if direct else got
    except BaseException as exc:  # the caller raises it, one line
        failures.append(exc)
    finally:
        for fd in descriptors.values():
            os.close(fd)
        view.release()
        if kept is not None:  # unmapped once timed: a load keeps its arrays
            kept.append(buffer)
        else:
            buffer.close()


def plain_read(
    paths: Sequence[str], readers: int, request: int, *, direct: bool = False, keep: bool = False
) -> Reading:
    """Read every byte of ``paths`` once with ``readers`` threads, each its own descriptors
    and one contiguous range; the bytes are discarded, or (``keep``) read into fresh memory,
    one mapping a reader, as a load keeps them. The cache state is the caller's."""
    sizes = [os.stat(path).st_size for path in paths]
    plan = _ranges(sizes, readers)
    failures: list[BaseException] = []
    kept: list[mmap.mmap] | None = [] if keep else None
    threads = [
        threading.Thread(
            target=_read_pieces,
            args=(paths, pieces, request, direct, failures, kept),
            name=f"modelmon-plain-read-{i}",
        )
        for i, pieces in enumerate(plan)
    ]
    seconds = _timed(threads)
    for buffer in kept or ():
        buffer.close()
    if failures:
        raise failures[0]
    return Reading(readers, request, direct, sum(sizes) / seconds / 1e6)


def _timed(threads: list[threading.Thread]) -> float:
    """Seconds from starting ``threads`` to the last one's end."""
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - started


def direct_supported(path: str) -> bool:
    """Whether the file system takes ``O_DIRECT`` reads of ``path`` (tmpfs and some FUSE
    mounts refuse them)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return False
        raise
    buffer = mmap.mmap(-1, ALIGN)
    try:
        os.preadv(fd, [buffer], 0)
        return True
    except OSError:
        return False
    finally:
        buffer.close()
        os.close(fd)


def _fill_part(view: memoryview, failures: list[BaseException]) -> None:
    try:
        fd = os.open("/dev/zero", os.O_RDONLY)
        try:
            done = 0
            while done < len(view):
                done += os.readv(fd, [view[done : done + 64 * MiB]])
        finally:
            os.close(fd)
    except BaseException as exc:
        failures.append(exc)


def fill_rate(size: int, threads: int) -> float:
    """MB/s at which ``threads`` fill ``size`` bytes of fresh anonymous memory (every page
    faulted in and written by the kernel), as a load's reads into new arrays do."""
    size = max(ALIGN, size // ALIGN * ALIGN)
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    whole = memoryview(memory)
    share = -(-size // threads // ALIGN) * ALIGN
    parts = [whole[i : i + share] for i in range(0, size, share)]
    failures: list[BaseException] = []
    workers = [threading.Thread(target=_fill_part, args=(part, failures)) for part in parts]
    seconds = _timed(workers)
    for part in parts:
        part.release()
    whole.release()
    memory.close()
    if failures:
        raise LoadError(f"filling fresh memory failed: {failures[0]}")
    return size / seconds / 1e6


def memcpy_mbps(size: int = 256 * MiB, repeats: int = 3) -> float:
    """Best-of-``repeats`` numpy copy bandwidth (counts bytes copied once, like a load)."""
    source = np.ones(size, dtype=np.uint8)
    target = np.empty_like(source)
    target[:] = source  # fault the pages in before timing
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(target, source)
        best = max(best, size / (time.perf_counter() - started) / 1e6)
    return best


def fill_size(file_bytes: int) -> int:
    """Fresh memory a fill run fills: the model's bytes, 64 MiB at least, ``FILL_BYTES`` and
    a quarter of usable memory at most."""
    return min(FILL_BYTES, max(file_bytes, 64 * MiB), memory_facts().usable // 4)


def fill_threads(parallel: int) -> int:
    """Threads that fill memory alone: one per CPU (filling is the CPUs' work; more threads
    than CPUs only take turns), ``parallel`` at most."""
    return max(1, min(parallel, os.cpu_count() or 1))


def fill_beside(size: int, threads: int, read: Callable[[], object]) -> float:
    """``fill_rate`` while ``read`` (a load's plain reads) runs beside it in a thread; the
    reader's failure is raised once the fill is done."""
    failed: list[BaseException] = []

    def beside() -> None:
        try:
            read()
        except BaseException as exc:  # the caller says it, one line
            failed.append(exc)

    thread = threading.Thread(target=beside, name="modelmon-plain-read-beside")
    thread.start()
    try:
        rate = fill_rate(size, threads)
    finally:
        thread.join()
    if failed:
        raise failed[0]
    return rate
