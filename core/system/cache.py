"""Page-cache control: "cold" means measured cold, never merely requested.

``prepare`` drops (or fills) the model's pages, then measures residency
(``modelmon.core.system.residency``) and says why a requested state was not reached.
"""

from __future__ import annotations

import errno
import math
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from modelmon.core.errors import OptionsError
from modelmon.core.options import CACHE_MODES, CacheMode
from modelmon.core.system import host_memory
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.residency import (
    PAGE_SIZE,
    Method,
    PathArg,
    Residency,
    as_paths,
    measure_files,
    open_file,
    residency_of,
)
from modelmon.core.system.storage import RAM_FS_TYPES, storage_facts
from modelmon.core.units import gib_text

COLD_THRESHOLD = 0.01
WARM_THRESHOLD = 0.99
WARM_CHUNK = 8 << 20
WARM_ADVISE_AHEAD = 64 << 20  # WILLNEED this far ahead so the disk queue stays deep
EVICT_RETRY_DELAY = 0.1
# The method of a load from object storage: no page cache lies between the bucket and it.
NO_LOCAL_CACHE = "object-storage"
# The method of files whose page cache the kernel hides from this user: nothing is known.
HIDDEN = "hidden"
# What was done to the files of a hidden cache, by the state asked for.
HIDDEN_DONE = {"cold": "evicted, not verified cold", "warm": "read in, not verified warm"}


@dataclass(frozen=True, slots=True)
class CacheState:
    """The page-cache state of a model's files around a load.

    ``prepare`` measures it just before the load starts; the runner adds ``resident_after``
    once the load has ended, and the result carries this one record.
    """

    requested: CacheMode
    resident_before: float  # page-weighted fraction of the files in the page cache
    resident_after: float  # the same once the load ended; NaN until then
    cold: bool  # resident_before ≤ COLD_THRESHOLD, and the measurement can be trusted
    warm: bool  # resident_before ≥ WARM_THRESHOLD
    method: str  # "cachestat" | "mincore", or "none" when not measured
    note: str = ""  # why the requested state was not reached (or cannot be verified)
    # Free memory touched just before the load, where a VM's host takes free pages back
    # (``host_memory.prime``), how much of the fresh memory the load takes, and why that much:
    # the seconds are what an unprimed load would have paid for it, at most.
    primed: host_memory.Primed = host_memory.NOT_PRIMED

    @property
    def nothing_local(self) -> bool:
        """A load from object storage: no page cache of its bytes on this machine."""
        return self.method == NO_LOCAL_CACHE

    @property
    def unseen(self) -> bool:
        """The kernel hides the files' page cache from this user: nothing is known of it
        (the fractions are NaN, neither cold nor warm), and ``note`` says so in one line."""
        return self.method == HIDDEN


def not_measured(requested: CacheMode) -> CacheState:
    """The state of a load that never reached the measurement (a worker failed first...)."""
    return CacheState(requested, 0.0, math.nan, False, False, "none", "not measured")


# --- controlling -------------------------------------------------------------------------------


def of_objects(
    requested: CacheMode,
    *,
    arrays: int = 0,
    stop: threading.Event | None = None,
    on_priming: Callable[[host_memory.Primed], None] | None = None,
) -> CacheState:
    """The state a load from object storage starts from: nothing of it is cached on this
    machine, whatever was asked (its reads go to the server, into fresh memory: its
    ``arrays`` bytes are primed as a file load's are); a cache in the server (rclone's, a
    CDN's, the storage's own) is the server's and not measured."""
    primed = _prime_for(arrays, 0, stop, on_priming)
    return CacheState(
        requested,
        0.0,
        math.nan,
        cold=True,
        warm=False,
        method=NO_LOCAL_CACHE,
        note="object storage: nothing is cached on this machine (a cache in the server is "
        "the server's)",
        primed=primed,
    )


def prime_fresh_memory(nbytes: int, stop: threading.Event | None = None) -> host_memory.Primed:
    """Prime ``nbytes`` of fresh memory as a load's arrays are (a bound that fills memory
    starts on memory the host backs, as the loads it judges do)."""
    return _prime_for(nbytes, 0, stop, None)


def _drop(path: str) -> None:
    fd, _ = open_file(path)
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
    names = as_paths(paths)
    before = residency_of(names)
    for name in names:
        _drop(name)
    fraction = residency_of(names)
    if fraction > COLD_THRESHOLD:
        time.sleep(EVICT_RETRY_DELAY)
        for name in names:
            _drop(name)
        fraction = residency_of(names)
    size = sum(os.stat(name).st_size for name in names)
    unseen = any(hidden_reason(name) is not None for name in names)  # it may have dropped all
    if unseen or (before - fraction) * size >= host_memory.FREE_WORTH_NOTING:
        host_memory.note_free()
    return fraction


def prepare_early(paths: PathArg | Iterable[PathArg], mode: CacheMode) -> None:
    """What ``prepare`` can do while the loader starts (workers spawn, a peer imports torch):
    drop a cold load's pages now, so that the report pass this free starts on a VM
    (``host_memory``) has run by the time ``prepare`` primes; ``prepare`` drops again what
    the loader's start read (headers)."""
    if mode == "cold":
        evict(paths)


def warm(
    paths: PathArg | Iterable[PathArg], stop: threading.Event | None = None, chunk: int = WARM_CHUNK
) -> float:
    """Read every file front to back into the page cache; return the fraction resident.

    Memory stays at one ``chunk`` buffer. ``stop`` is checked between chunks.
    """
    names = as_paths(paths)
    buffer = memoryview(bytearray(max(PAGE_SIZE, chunk)))
    for name in names:
        fd, size = open_file(name)
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
    return (
        f"cannot see the page cache of {path}: the kernel shows it only for files you "
        "own or could write"
    )


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
        names = ", ".join(
            "this process" if pid == os.getpid() else f"pid {pid} ({command})"
            for pid, command in holders[:5]
        )
        reasons.append(f"pages are mapped by a process ({names}), DONTNEED skips them")
    dirty = sum(r.dirty_pages or 0 for r in found)
    if dirty:
        reasons.append(f"{dirty} pages are dirty or under writeback")
    remote = sorted({f.fs_type for f in facts if f.remote})
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
        return (
            f"the files ({gib_text(needed)}) do not fit in usable RAM "
            f"({gib_text(usable)}): {fraction:.1%} resident"
        )
    return f"only {fraction:.1%} stayed resident (memory pressure evicted pages while warming)"


def prepare(
    paths: PathArg | Iterable[PathArg],
    mode: CacheMode,
    stop: threading.Event | None = None,
    method: Method = "auto",
    *,
    arrays: int | None = None,
    page_cache: bool = True,
    prime_page_cache: bool = False,
    on_priming: Callable[[host_memory.Primed], None] | None = None,
) -> CacheState:
    """Put the files in the requested cache state and measure what was really reached.

    ``arrays``: bytes of arrays the load will hold (0 for a discard load or one whose tensors
    are views of a file mapping; None: as many as the files hold), the memory priming covers,
    and ``page_cache``: whether its reads fill the page cache (not O_DIRECT reads), primed
    too only where ``prime_page_cache`` (a storage bound's plain reads:
    ``host_memory.plan_priming``). ``on_priming`` hears the plan before priming starts (a
    progress line)."""
    if mode not in CACHE_MODES:
        raise OptionsError(f"unknown cache mode {mode!r}: use cold, warm or keep")
    names = as_paths(paths)
    if mode == "cold":
        evict(names)
    elif mode == "warm":
        warm(names, stop)
    size = sum(os.stat(name).st_size for name in names)
    # The page cache a cold load takes from free memory (a warm or kept one has its pages).
    fills = size if mode == "cold" and page_cache else 0
    primed = _prime_for(
        size if arrays is None else arrays, fills, stop, on_priming, prime_page_cache
    )
    hidden = [name for name in names if hidden_reason(name) is not None]
    if hidden:  # what mincore or cachestat would say of them is not their page cache
        return CacheState(
            requested=mode,
            resident_before=math.nan,
            resident_after=math.nan,
            cold=False,
            warm=False,
            method=HIDDEN,
            note=f"{HIDDEN_DONE.get(mode, 'not known')}: cannot verify the page cache of "
            f"{hidden[0]}: the kernel only shows it for files you own or could write",
            primed=primed,
        )
    fraction, used, found = measure_files(names, method)
    cold = fraction <= COLD_THRESHOLD
    is_warm = fraction >= WARM_THRESHOLD
    note = ""
    if mode == "cold" and not cold:
        note = _why_not_cold(found, fraction)
    elif mode == "warm" and not is_warm:
        note = _why_not_warm(found, fraction, stop is not None and stop.is_set())
    return CacheState(
        requested=mode,
        resident_before=fraction,
        resident_after=math.nan,
        cold=cold,
        warm=is_warm,
        method=used,
        note=note,
        primed=primed,
    )


def _prime_for(
    arrays: int,
    fills: int,
    stop: threading.Event | None,
    on_priming: Callable[[host_memory.Primed], None] | None,
    prime_page_cache: bool = False,
) -> host_memory.Primed:
    """Prime the load's arrays (``arrays`` bytes), and the page cache it fills (``fills``)
    where ``prime_page_cache``, as ``host_memory.plan_priming`` bounds it, where priming
    applies (``host_memory.priming_applies``); say why not where it would but is off. A load
    that primes nothing but takes ``PRIME_MIN`` or more of free memory (its page cache
    included) still waits for the report pass."""
    mode = host_memory.prime_mode()
    if not host_memory.priming_applies(mode):
        wanted = arrays + (fills if prime_page_cache else 0)
        off = mode == "off" and host_memory.reports_free_pages() and wanted > 0
        return host_memory.Primed(wanted=wanted, why="not primed: priming is off" if off else "")
    facts = memory_facts()
    plan = host_memory.plan_priming(
        arrays,
        page_cache=fills,
        prime_page_cache=prime_page_cache,
        free=facts.free,
        available=facts.usable,
        cgroup_free=facts.cgroup_free,
        pressure=host_memory.memory_pressure(),
    )
    if plan.bytes <= 0:
        if arrays + fills >= host_memory.PRIME_MIN:
            host_memory.settle(stop)
        return plan
    if on_priming is not None:
        on_priming(plan)
    return host_memory.with_seconds(plan, host_memory.prime(plan.bytes, stop, force=True))
