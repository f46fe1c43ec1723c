"""Drop-behind: a streaming load of files larger than the memory it may fill keeps its page
cache bounded.

A discard load keeps nothing, but every byte it reads through the page cache stays there
until the kernel reclaims it. Reading a 70B model that way takes all free memory first,
then evicts other programs' cached pages (and, with swap, pushes their memory out) for
pages nobody will read again: the instrument flushes the machine it measures. So when the
files do not fit in what the load may fill without that (``drop_behind_reason``), each
reader drops the pages of every range right after reading it (``POSIX_FADV_DONTNEED``),
and the parent drops what is left once the workers are done. The page cache the load
holds is then a few reads per reader (what is in flight and the kernel's readahead beyond
it), and the pages it frees are the ones it takes next.

The dropping runs in the reader between its reads, so its time is part of the load's;
the result says how much it took. Without it the kernel does comparable work once memory
runs out (reclaim, on the reader's own time when kswapd falls behind), plus scanning other
programs' pages to choose what to evict.

The page cache holds a file in folios of up to ``DROP_ALIGN`` bytes (a PMD: 2 MiB with
4 KiB pages), each aligned to its size, and DONTNEED drops no folio that reaches outside the
range it is given. So each worker keeps the ranges its readers have read merged, and drops
what lies inside them between ``DROP_ALIGN`` boundaries: the ends of a merged range, where
reading goes on, wait for the reads next to them, and what no read of this worker finishes
(the seams between workers, the file's head and tail) waits for the parent's final drop. A
page a mapping holds cannot be dropped, so strategies that keep the file mapped while they
copy out of it do not drop behind (``mmap-view`` releases each step from its mapping first).
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from modelmon.core.loading.messages import WorkerDone
from modelmon.core.options import LoadOptions
from modelmon.core.system.host_memory import PRIME_RESERVE
from modelmon.core.system.memory import MemoryFacts, memory_facts
from modelmon.core.system.residency import PAGE_SIZE
from modelmon.core.system.storage import read_int
from modelmon.core.units import gib_text

# Free memory (and memory cgroup room) the load's page cache leaves to others: the same
# margin priming keeps.
DROP_RESERVE = PRIME_RESERVE
# A one-reader load's page cache would be a second copy of what the shared copy holds.
SHARED_COPY_DROPS = "the node's shared copy holds the bytes: their page cache would be a second"


@dataclass(frozen=True, slots=True)
class DroppedBehind:
    """The page cache a streaming load dropped behind its reads, and why it did."""

    why: str
    bytes: int = 0  # of the ranges read, dropped right after their reads
    seconds: float = 0.0  # the readers' time spent dropping, summed (inside the load's time)

    def note(self) -> str:
        """The result's note: what was dropped, what it cost, and why."""
        return (
            f"drop-behind: {self.bytes / 1e9:.2f} GB of page cache dropped right after "
            f"being read, {self.seconds:.2f} s of the readers' time (counted in the load's), "
            f"and the rest once it ended (residency after says so): {self.why}"
        )


def drop_behind_reason(
    file_bytes: int,
    options: LoadOptions,
    maps_file: bool,
    releases_mappings: bool,
    memory_limit: int | None = None,
    facts: MemoryFacts | None = None,
) -> str | None:
    """Why a load of ``file_bytes`` with ``options`` drops its page cache behind its reads,
    or None when it does not: only a discard load, not one asked to start warm (its pages
    are meant to stay), not one whose strategy keeps the file mapped while it copies
    (``maps_file`` and not ``releases_mappings``), and only when the files are larger than
    free memory (and its memory cgroup's room) less ``DROP_RESERVE``, or ``memory_limit``."""
    if not options.discard or options.cache == "warm" or (maps_file and not releases_mappings):
        return None
    facts = facts or memory_facts()
    rooms = [(facts.free - DROP_RESERVE, f"{gib_text(max(0, facts.free))} free")]
    if facts.cgroup_free is not None:
        rooms.append(
            (facts.cgroup_free - DROP_RESERVE, f"{gib_text(facts.cgroup_free)} left in its cgroup")
        )
    if memory_limit is not None:
        rooms.append((memory_limit, f"a memory limit of {gib_text(memory_limit)}"))
    room, what = min(rooms)
    if file_bytes <= room:
        return None
    reserve = f", less {DROP_RESERVE >> 20} MiB" if not what.startswith("a memory limit") else ""
    return (
        f"the files ({gib_text(file_bytes)}) do not fit in the page cache it may fill without "
        f"evicting other programs' pages ({what}{reserve})"
    )


def strategy_drops_behind(
    file_bytes: int,
    options: LoadOptions,
    *,
    reads_objects: bool,
    maps_file: bool,
    releases_mappings: bool,
    shared_copy: bool = False,
    memory_limit: int | None = None,
) -> str | None:
    """Why a load by a strategy of these traits drops its page cache behind its reads, or
    None: never when it reads objects (their bytes fill no page cache on this machine);
    always when it fills the node's shared copy (``shared_copy``) without keeping the file
    mapped; else as ``drop_behind_reason`` says."""
    if reads_objects:
        return None
    if shared_copy and not (maps_file and not releases_mappings):
        return SHARED_COPY_DROPS
    return drop_behind_reason(file_bytes, options, maps_file, releases_mappings, memory_limit)


def dropped_behind(why: str | None, done: Iterable[WorkerDone]) -> DroppedBehind | None:
    """A load's drop-behind from its workers' reports; None when it did not drop behind."""
    if why is None:
        return None
    reports = list(done)
    return DroppedBehind(
        why,
        sum(d.dropped_behind for d in reports),
        sum(d.drop_behind_ns for d in reports) / 1e9,
    )


PMD_SIZE = "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size"


def _largest_folio() -> int:
    """Bytes of the largest page-cache folio: a PMD (``hpage_pmd_size``; else one page table
    page of 8-byte entries' worth of pages)."""
    size = read_int(PMD_SIZE)
    return size if size is not None and size >= PAGE_SIZE else PAGE_SIZE * (PAGE_SIZE // 8)


DROP_ALIGN = _largest_folio()


class Spans:
    """Sorted, merged [start, end) byte ranges of one file."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def add(self, start: int, end: int) -> tuple[int, int]:
        """Add [start, end); the merged range that now holds it."""
        low = bisect.bisect_left(self.ends, start)  # the first range ending at or after start
        high = bisect.bisect_right(self.starts, end)  # past the last starting at or before end
        if low < high:
            start, end = min(start, self.starts[low]), max(end, self.ends[high - 1])
        self.starts[low:high], self.ends[low:high] = [start], [end]
        return start, end

    def gaps(self, start: int, end: int) -> list[tuple[int, int]]:
        """The parts of [start, end) that no range covers."""
        found, position = [], start
        for index in range(bisect.bisect_right(self.ends, start), len(self.starts)):
            if self.starts[index] >= end:
                break
            if self.starts[index] > position:
                found.append((position, self.starts[index]))
            position = max(position, self.ends[index])
        if position < end:
            found.append((position, end))
        return found


class DropBehind:
    """Drops the page cache of what a worker's readers have read, in whole folios. Thread-safe;
    one descriptor per file of its own, opened up front (dropping needs no offset)."""

    def __init__(self, paths: list[str], align: int = DROP_ALIGN) -> None:
        self._fds: list[int] = []
        try:
            for path in paths:
                self._fds.append(os.open(path, os.O_RDONLY | os.O_CLOEXEC))
        except OSError:
            self.close()
            raise
        self._align = align
        self._read = [Spans() for _ in paths]
        self._dropped = [Spans() for _ in paths]
        self._lock = threading.Lock()
        self.bytes = 0
        self.ns = 0

    def dropped(self, file: int, offset: int, length: int) -> None:
        """``length`` bytes at ``offset`` of file ``file`` were just read (or released from a
        mapping): drop what the merged ranges read now hold between folio boundaries and was
        not dropped yet."""
        align = self._align
        with self._lock:
            start, end = self._read[file].add(offset, offset + length)
            start, end = -(-start // align) * align, end // align * align
            if end <= start:
                return
            todo = self._dropped[file].gaps(start, end)
            self._dropped[file].add(start, end)
        began = time.perf_counter_ns()
        for low, high in todo:
            os.posix_fadvise(self._fds[file], low, high - low, os.POSIX_FADV_DONTNEED)
        took = time.perf_counter_ns() - began
        with self._lock:
            self.bytes += sum(high - low for low, high in todo)
            self.ns += took

    def close(self) -> None:
        for descriptor in self._fds:
            os.close(descriptor)
        self._fds.clear()
