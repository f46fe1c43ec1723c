"""Page-cache residency: how much of a file is in RAM, measured, never assumed.

Residency is read with cachestat(2) (Linux ≥ 6.5), else with mincore(2) over a read-only shared
mapping made in bounded windows. Both only see the real page cache for files the caller owns or
could open for writing (or as root): for other files mincore reports only the caller's own
mappings, which would look cold; ``modelmon.core.system.cache.prepare`` refuses to call such a
file cold.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from modelmon.core.errors import OptionsError
from modelmon.core.system.libc import LIBC, MAP_FAILED

Method = Literal["auto", "cachestat", "mincore"]
PathArg = str | os.PathLike[str]

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MINCORE_WINDOW_BYTES = 1 << 30  # 1 GiB of mapping at a time: 256 KiB of vector at 4 KiB pages

# cachestat is 451 in the unified syscall table every arch shares since 5.x, except alpha.
_CACHESTAT_NR = 451
_CACHESTAT_ARCHES = frozenset(
    {"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64"}
)


_cachestat_missing = platform.machine() not in _CACHESTAT_ARCHES  # set for good on ENOSYS


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [
        ("nr_cache", ctypes.c_uint64),
        ("nr_dirty", ctypes.c_uint64),
        ("nr_writeback", ctypes.c_uint64),
        ("nr_evicted", ctypes.c_uint64),
        ("nr_recently_evicted", ctypes.c_uint64),
    ]


@dataclass(frozen=True, slots=True)
class Residency:
    path: str
    cached_pages: int
    total_pages: int  # pages the file spans; 0 for an empty file
    method: str  # "cachestat" | "mincore"
    dirty_pages: int | None = None  # cachestat only: dirty or under writeback

    @property
    def fraction(self) -> float:
        return self.cached_pages / self.total_pages if self.total_pages else 0.0


# --- measuring ---------------------------------------------------------------------------------


def as_paths(paths: PathArg | Iterable[PathArg]) -> list[str]:
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]


def open_file(path: str) -> tuple[int, int]:
    """(fd, size) of a regular file opened read-only; the caller closes the fd."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    status = os.fstat(fd)
    if stat.S_ISREG(status.st_mode):
        return fd, status.st_size
    os.close(fd)
    if stat.S_ISDIR(status.st_mode):
        raise IsADirectoryError(errno.EISDIR, "a directory, not a model file", path)
    raise OSError(errno.EINVAL, "not a regular file", path)


def _cachestat(fd: int, offset: int, length: int) -> _Cachestat | None:
    """Page-cache counters of a byte range (length 0: to EOF); None if cachestat is unusable."""
    global _cachestat_missing
    if _cachestat_missing:
        return None
    byte_range, result = _CachestatRange(offset, length), _Cachestat()
    status = LIBC.syscall(
        ctypes.c_long(_CACHESTAT_NR),
        ctypes.c_int(fd),
        ctypes.byref(byte_range),
        ctypes.byref(result),
        ctypes.c_uint(0),
    )
    if status == 0:
        return result
    code = ctypes.get_errno()
    if code == errno.ENOSYS:
        _cachestat_missing = True
        return None
    if code in (errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL):  # seccomp, hugetlbfs, old ABI
        return None
    raise OSError(code, f"cachestat: {os.strerror(code)}")


def _mincore_windows(
    fd: int, size: int, window_bytes: int, start: int = 0
) -> Iterator[tuple[int, np.ndarray]]:
    """(first page, residency 0/1 per page) for each window of at most ``window_bytes`` of
    bytes [start, size); ``start`` is a multiple of the page size."""
    window = max(PAGE_SIZE, window_bytes - window_bytes % PAGE_SIZE)
    vector = np.zeros(-(-min(window, max(0, size - start)) // PAGE_SIZE), dtype=np.uint8)
    for offset in range(start, size, window):
        length = min(window, size - offset)
        pages = -(-length // PAGE_SIZE)
        # Mapping without touching faults nothing in, so measuring does not change the cache.
        address = LIBC.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, offset)
        if address is None or address == MAP_FAILED:
            code = ctypes.get_errno()
            raise OSError(code, f"mmap for mincore: {os.strerror(code)}")
        try:
            if LIBC.mincore(address, length, vector.ctypes.data) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"mincore: {os.strerror(code)}")
        finally:
            LIBC.munmap(address, length)
        yield offset // PAGE_SIZE, vector[:pages] & 1  # bits 1..7 are reserved


def cached_in_range(fd: int, offset: int, length: int) -> tuple[int, int] | None:
    """(cached, evicted) pages of bytes [offset, offset + length) of an open file, by
    cachestat (length 0: to the end); None where cachestat is unusable. ``evicted`` counts
    the pages the kernel still remembers having dropped (its shadow entries)."""
    counters = _cachestat(fd, offset, length)
    if counters is None:
        return None
    return int(counters.nr_cache), int(counters.nr_evicted)


def resident_pages(
    fd: int, size: int, first_page: int, pages: int, window_bytes: int = MINCORE_WINDOW_BYTES
) -> np.ndarray:
    """0/1 per page (uint8) for pages [first_page, first_page + pages) of an open file of
    ``size`` bytes, by mincore over bounded windows of a mapping that faults nothing in."""
    start = first_page * PAGE_SIZE
    end = min(size, (first_page + pages) * PAGE_SIZE)
    found = np.zeros(pages, dtype=np.uint8)
    for page, resident in _mincore_windows(fd, end, window_bytes, start):
        found[page - first_page : page - first_page + len(resident)] = resident
    return found


def _resolve(method: Method) -> Method:
    if method not in ("auto", "cachestat", "mincore"):
        raise OptionsError(f"unknown residency method {method!r}")
    return method


def residency(
    path: PathArg, method: Method = "auto", *, window_bytes: int = MINCORE_WINDOW_BYTES
) -> Residency:
    """How much of one file is in the page cache. ``window_bytes`` bounds mincore mappings."""
    method, name = _resolve(method), os.fspath(path)
    fd, size = open_file(name)
    try:
        total = -(-size // PAGE_SIZE)
        if method != "mincore":
            counters = _cachestat(fd, 0, 0)
            if counters is not None:
                dirty = int(counters.nr_dirty + counters.nr_writeback)
                return Residency(
                    name, min(int(counters.nr_cache), total), total, "cachestat", dirty
                )
            if method == "cachestat":
                raise OSError(errno.ENOSYS, "cachestat is not available here", name)
        cached = sum(
            int(np.count_nonzero(resident))
            for _, resident in _mincore_windows(fd, size, window_bytes)
        )
        return Residency(name, cached, total, "mincore")
    finally:
        os.close(fd)


def measure_files(paths: list[str], method: Method) -> tuple[float, str, list[Residency]]:
    found = [residency(path, method) for path in paths]
    cached, total = sum(r.cached_pages for r in found), sum(r.total_pages for r in found)
    # One method name for the lot: the weaker one if any file had to fall back.
    fell_back = any(r.method == "mincore" for r in found)
    used = "mincore" if fell_back or method == "mincore" or _cachestat_missing else "cachestat"
    return (cached / total if total else 0.0), used, found


def residency_of(paths: PathArg | Iterable[PathArg], method: Method = "auto") -> float:
    """Page-weighted resident fraction over several files (the shards of one model)."""
    return measure_files(as_paths(paths), method)[0]


def measure(paths: PathArg | Iterable[PathArg]) -> float:
    """Resident fraction of a model's files right now."""
    return residency_of(paths)


def _cachestat_bins(fd: int, first: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """Cached pages in each page range [first, end); None if cachestat refuses any of them."""
    cached = np.zeros(len(first), dtype=np.int64)
    for index, (start, stop) in enumerate(zip(first.tolist(), end.tolist(), strict=True)):
        counters = _cachestat(fd, start * PAGE_SIZE, (stop - start) * PAGE_SIZE)
        if counters is None:
            return None
        cached[index] = counters.nr_cache
    return cached


def residency_map(
    path: PathArg,
    bins: int = 256,
    method: Method = "auto",
    *,
    window_bytes: int = MINCORE_WINDOW_BYTES,
) -> np.ndarray:
    """Resident fraction per bin (float32, ``bins`` long) over the file, first byte first.

    Bin i covers the pages overlapping bytes [i·size/bins, (i+1)·size/bins). cachestat is used
    when it works: one call per bin, and its cost follows the pages actually cached (it walks
    the page-cache tree, skipping holes), so a cold 100 GB file costs 256 fast calls. mincore
    costs a lookup per page of the file (26 M for 100 GB) plus a mapping per window, with
    memory bounded by one window's vector.
    """
    if bins < 1:
        raise OptionsError(f"residency_map needs at least one bin, not {bins}")
    method, name = _resolve(method), os.fspath(path)
    fd, size = open_file(name)
    try:
        if size == 0:
            return np.zeros(bins, dtype=np.float32)
        total = -(-size // PAGE_SIZE)
        edges = np.arange(bins + 1, dtype=np.int64) * size // bins
        first = edges[:-1] // PAGE_SIZE
        end = np.minimum(np.maximum(-(-edges[1:] // PAGE_SIZE), first + 1), total)
        cached = _cachestat_bins(fd, first, end) if method != "mincore" else None
        if cached is None and method == "cachestat":
            raise OSError(errno.ENOSYS, "cachestat is not available here", name)
        if cached is None:
            cached = np.zeros(bins, dtype=np.int64)
            for start, resident in _mincore_windows(fd, size, window_bytes):
                # Prefix sums let every bin take its slice of this window in one step.
                prefix = np.concatenate(([0], np.cumsum(resident, dtype=np.int64)))
                low = np.clip(first, start, start + len(resident)) - start
                high = np.clip(end, start, start + len(resident)) - start
                cached += prefix[high] - prefix[low]
        return np.minimum(cached / (end - first), 1.0).astype(np.float32)
    finally:
        os.close(fd)
