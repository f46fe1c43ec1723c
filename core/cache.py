"""Page-cache control and verification: "cold" means measured cold, never merely requested.

Residency is read with cachestat(2) (Linux ≥ 6.5), else with mincore(2) over a read-only shared
mapping made in bounded windows. Both only see the real page cache for files the caller owns or
could open for writing (or as root): for other files mincore reports only the caller's own
mappings, which would look cold. ``prepare`` refuses to call such a file cold.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from modelmon.core.errors import OptionsError
from modelmon.core.storage import RAM_FS_TYPES, memory_facts, storage_facts

Method = Literal["auto", "cachestat", "mincore"]
Mode = Literal["cold", "warm", "keep"]
PathArg = str | os.PathLike[str]

COLD_THRESHOLD = 0.01
WARM_THRESHOLD = 0.99
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MINCORE_WINDOW_BYTES = 1 << 30  # 1 GiB of mapping at a time: 256 KiB of vector at 4 KiB pages
WARM_CHUNK = 8 << 20
WARM_ADVISE_AHEAD = 64 << 20  # WILLNEED this far ahead so the disk queue stays deep
EVICT_RETRY_DELAY = 0.1

# cachestat is 451 in the unified syscall table every arch shares since 5.x, except alpha.
_CACHESTAT_NR = 451
_CACHESTAT_ARCHES = frozenset({"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x",
                               "loongarch64"})
_PROT_READ, _MAP_SHARED = 0x1, 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)  # our own handle: restype changes stay local
_libc.syscall.restype = ctypes.c_long
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_int64]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]

_cachestat_missing = platform.machine() not in _CACHESTAT_ARCHES  # set for good on ENOSYS


class _CachestatRange(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [("nr_cache", ctypes.c_uint64), ("nr_dirty", ctypes.c_uint64),
                ("nr_writeback", ctypes.c_uint64), ("nr_evicted", ctypes.c_uint64),
                ("nr_recently_evicted", ctypes.c_uint64)]


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


@dataclass(frozen=True, slots=True)
class CacheState:
    """The page-cache state of a model's files just before a load starts."""

    requested: str  # "cold" | "warm" | "keep"
    resident_before: float  # page-weighted fraction of the files in the page cache
    method: str  # "cachestat" | "mincore"
    cold: bool  # resident_before ≤ COLD_THRESHOLD, and the measurement can be trusted
    warm: bool  # resident_before ≥ WARM_THRESHOLD
    note: str = ""  # why the requested state was not reached (or cannot be verified)


# --- measuring ---------------------------------------------------------------------------------


def _as_paths(paths: PathArg | Iterable[PathArg]) -> list[str]:
    if isinstance(paths, str | os.PathLike):
        return [os.fspath(paths)]
    return [os.fspath(path) for path in paths]


def _open_file(path: str) -> tuple[int, int]:
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
    status = _libc.syscall(ctypes.c_long(_CACHESTAT_NR), ctypes.c_int(fd),
                           ctypes.byref(byte_range), ctypes.byref(result), ctypes.c_uint(0))
    if status == 0:
        return result
    code = ctypes.get_errno()
    if code == errno.ENOSYS:
        _cachestat_missing = True
        return None
    if code in (errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL):  # seccomp, hugetlbfs, old ABI
        return None
    raise OSError(code, f"cachestat: {os.strerror(code)}")


def _mincore_windows(fd: int, size: int, window_bytes: int) -> Iterator[tuple[int, np.ndarray]]:
    """(first page, residency 0/1 per page) for each window of at most ``window_bytes``."""
    window = max(PAGE_SIZE, window_bytes - window_bytes % PAGE_SIZE)
    vector = np.zeros(-(-min(window, size) // PAGE_SIZE), dtype=np.uint8)  # reused
    for offset in range(0, size, window):
        length = min(window, size - offset)
        pages = -(-length // PAGE_SIZE)
        # Mapping without touching faults nothing in, so measuring does not change the cache.
        address = _libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
        if address is None or address == _MAP_FAILED:
            code = ctypes.get_errno()
            raise OSError(code, f"mmap for mincore: {os.strerror(code)}")
        try:
            if _libc.mincore(address, length, vector.ctypes.data) != 0:
                code = ctypes.get_errno()
                raise OSError(code, f"mincore: {os.strerror(code)}")
        finally:
            _libc.munmap(address, length)
        yield offset // PAGE_SIZE, vector[:pages] & 1  # bits 1..7 are reserved


def _resolve(method: Method) -> Method:
    if method not in ("auto", "cachestat", "mincore"):
        raise OptionsError(f"unknown residency method {method!r}")
    return method


def residency(path: PathArg, method: Method = "auto", *,
              window_bytes: int = MINCORE_WINDOW_BYTES) -> Residency:
    """How much of one file is in the page cache. ``window_bytes`` bounds mincore mappings."""
    method, name = _resolve(method), os.fspath(path)
    fd, size = _open_file(name)
    try:
        total = -(-size // PAGE_SIZE)
        if method != "mincore":
            counters = _cachestat(fd, 0, 0)
            if counters is not None:
                dirty = int(counters.nr_dirty + counters.nr_writeback)
                return Residency(name, min(int(counters.nr_cache), total), total, "cachestat",
                                 dirty)
            if method == "cachestat":
                raise OSError(errno.ENOSYS, "cachestat is not available here", name)
        cached = sum(int(np.count_nonzero(resident))
                     for _, resident in _mincore_windows(fd, size, window_bytes))
        return Residency(name, cached, total, "mincore")
    finally:
        os.close(fd)


def _measure(paths: list[str], method: Method) -> tuple[float, str, list[Residency]]:
    found = [residency(path, method) for path in paths]
    cached, total = sum(r.cached_pages for r in found), sum(r.total_pages for r in found)
    # One method name for the lot: the weaker one if any file had to fall back.
    fell_back = any(r.method == "mincore" for r in found)
    used = "mincore" if fell_back or method == "mincore" or _cachestat_missing else "cachestat"
    return (cached / total if total else 0.0), used, found


def residency_of(paths: PathArg | Iterable[PathArg], method: Method = "auto") -> float:
    """Page-weighted resident fraction over several files (the shards of one model)."""
    return _measure(_as_paths(paths), method)[0]


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


def residency_map(path: PathArg, bins: int = 256, method: Method = "auto", *,
                  window_bytes: int = MINCORE_WINDOW_BYTES) -> np.ndarray:
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
    fd, size = _open_file(name)
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


# --- controlling -------------------------------------------------------------------------------


def _drop(path: str) -> None:
    fd, _ = _open_file(path)
    try:
        try:
            os.fsync(fd)  # DONTNEED skips dirty pages, so write them back first
        except OSError as error:
            if error.errno != errno.EINVAL:  # a filesystem without fsync has nothing dirty
                raise
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def evict(paths: PathArg | Iterable[PathArg]) -> float:
    """Drop the files from the page cache; return the fraction still resident.

    DONTNEED cannot drop pages that a process maps, that are dirty or under writeback, or that
    another reader pulls back in; the one retry covers writeback and readers that just finished.
    """
    names = _as_paths(paths)
    for name in names:
        _drop(name)
    fraction = residency_of(names)
    if fraction > COLD_THRESHOLD:
        time.sleep(EVICT_RETRY_DELAY)
        for name in names:
            _drop(name)
        fraction = residency_of(names)
    return fraction


def warm(paths: PathArg | Iterable[PathArg], stop: threading.Event | None = None,
         chunk: int = WARM_CHUNK) -> float:
    """Read every file front to back into the page cache; return the fraction resident.

    Memory stays at one ``chunk`` buffer. ``stop`` is checked between chunks.
    """
    names = _as_paths(paths)
    buffer = memoryview(bytearray(max(PAGE_SIZE, chunk)))
    for name in names:
        fd, size = _open_file(name)
        try:
            position, advised = 0, 0
            while position < size:
                if stop is not None and stop.is_set():
                    return residency_of(names)
                if advised - position < WARM_ADVISE_AHEAD // 2 and advised < size:
                    os.posix_fadvise(fd, advised, WARM_ADVISE_AHEAD, os.POSIX_FADV_WILLNEED)
                    advised += WARM_ADVISE_AHEAD
                count = os.preadv(fd, [buffer], position)
                if count == 0:  # the file shrank under us
                    break
                position += count
        finally:
            os.close(fd)
    return residency_of(names)


def hidden_reason(path: str) -> str | None:
    """None, or why the kernel hides this file's page cache from us.

    cachestat and mincore only report the real page cache of files the caller owns or could
    open for writing (or as root); for others they report our own mappings, which looks cold.
    """
    if os.geteuid() == 0:
        return None
    try:
        if os.stat(path).st_uid == os.geteuid() or os.access(path, os.W_OK):
            return None
    except OSError:
        pass
    return (f"cannot see the page cache of {path}: the kernel shows it only for files you "
            "own or could write")


def mapping_processes(paths: Iterable[str]) -> list[tuple[int, str]]:
    """(pid, command) of processes that map any of the files (found in /proc/*/maps)."""
    targets = set()
    for path in paths:
        status = os.stat(path)
        targets.add((os.major(status.st_dev), os.minor(status.st_dev), status.st_ino))
    found: list[tuple[int, str]] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as maps:
                for line in maps:
                    fields = line.split(maxsplit=5)
                    if len(fields) < 5 or fields[4] == "0":
                        continue
                    major, minor = (int(part, 16) for part in fields[3].split(":"))
                    if (major, minor, int(fields[4])) in targets:
                        with open(f"/proc/{entry}/comm") as comm:
                            found.append((int(entry), comm.read().strip()))
                        break
        except (OSError, ValueError):
            continue  # gone, or not ours to read
    return found


def _why_not_cold(found: list[Residency], fraction: float) -> str:
    reasons: list[str] = []
    stuck = [r.path for r in found if r.fraction > COLD_THRESHOLD]
    facts = [storage_facts(path) for path in stuck]
    in_ram = sorted({f.fs_type for f in facts if f.fs_type in RAM_FS_TYPES})
    if in_ram:
        reasons.append(f"the file lives in RAM ({', '.join(in_ram)}), it cannot be made cold")
    holders = mapping_processes(stuck)
    if holders:
        names = ", ".join("this process" if pid == os.getpid() else f"pid {pid} ({command})"
                          for pid, command in holders[:5])
        reasons.append(f"pages are mapped by a process ({names}), DONTNEED skips them")
    dirty = sum(r.dirty_pages or 0 for r in found)
    if dirty:
        reasons.append(f"{dirty} pages are dirty or under writeback")
    remote = sorted({f.fs_type for f in facts if f.is_fuse or f.is_network})
    if remote:
        reasons.append(f"the filesystem may ignore fadvise ({', '.join(remote)})")
    if not reasons:
        reasons.append("something re-read the file, or the filesystem ignores fadvise")
    return f"{fraction:.1%} still resident after eviction: " + "; ".join(reasons)


def _why_not_warm(found: list[Residency], fraction: float, stopped: bool) -> str:
    if stopped:
        return f"warming was stopped at {fraction:.1%} resident"
    if not any(r.total_pages for r in found):
        return "the files are empty"
    needed = sum(r.total_pages for r in found) * PAGE_SIZE
    usable = memory_facts().usable
    if needed > usable:
        return (f"the files ({needed / 2**30:.1f} GiB) do not fit in usable RAM "
                f"({usable / 2**30:.1f} GiB): {fraction:.1%} resident")
    return f"only {fraction:.1%} stayed resident (memory pressure evicted pages while warming)"


def prepare(paths: PathArg | Iterable[PathArg], mode: Mode,
            stop: threading.Event | None = None, method: Method = "auto") -> CacheState:
    """Put the files in the requested cache state and measure what was really reached."""
    if mode not in ("cold", "warm", "keep"):
        raise OptionsError(f"unknown cache mode {mode!r}: use cold, warm or keep")
    names = _as_paths(paths)
    if mode == "cold":
        evict(names)
    elif mode == "warm":
        warm(names, stop)
    fraction, used, found = _measure(names, method)
    hidden = [name for name in names if hidden_reason(name) is not None]
    cold = fraction <= COLD_THRESHOLD and not hidden
    is_warm = fraction >= WARM_THRESHOLD
    note = ""
    if hidden:
        note = (f"cannot verify the page cache of {hidden[0]}: the kernel only shows it for "
                "files you own or could write")
    elif mode == "cold" and not cold:
        note = _why_not_cold(found, fraction)
    elif mode == "warm" and not is_warm:
        note = _why_not_warm(found, fraction, stop is not None and stop.is_set())
    return CacheState(requested=mode, resident_before=fraction, method=used, cold=cold,
                      warm=is_warm, note=note)
