"""Where in each model file pages arrived in the page cache, and when: page bitmaps diffed
between samples.

A scan asks cachestat for the whole file (microseconds); only when its cached or evicted count
moved does it ask again per bin, and only the bins that moved are looked at page by page with
mincore (whose cost is per page: 30 ms a GiB here, against 0.2 ms for a 4 MiB bin). A bin where
no page was seen and none is counted needs no mincore at all; pages leave only as mincore sees
them go. The bins' edges are 2 MiB apart (or a multiple): cachestat undercounts a range that
starts inside a large folio when it yields the CPU mid-walk (it restarts past the folio), and
the page cache's folios are at most 2 MiB and aligned to their size. cachestat counts a page as
soon as its read is asked (on a throttled disk, tens of MB ahead of the bytes); mincore counts
only pages whose read completed, so a bin cachestat counts pages in is looked at with mincore,
and again each scan while some of its pages are still being read. Without cachestat (Linux <
6.5) each scan is a whole-file mincore, and scans are spaced out by their cost.

Each page is absent, resident since before the watch, or arrived during it; a page that
arrived counts once per arrival (dropped and read again: twice), and an arrival is placed in
the interval between the scan that last saw the page absent and the one that saw it resident.
This sees every reader, buffered reads and mappings alike, but only pages that were absent:
a warm file needs the process-side evidence (``openings``).

A page can also arrive and be reclaimed between two scans: a reader in a memory cgroup
smaller than the file, or a host that pages out idle cache (``proactive_reclaim``). Reclaim
leaves a shadow entry where the page was, and cachestat counts those per range (dropping
pages with ``POSIX_FADV_DONTNEED``, as making a file cold does, leaves none). So a bin whose
shadow count grew by more than the pages the scan saw leave it had that many arrivals the
scan never saw resident: they count as arrivals of that interval (and as evicted), with no
place in the file (the count is per bin, not per page: ``Arrivals.unplaced_bytes``). Each
bin keeps the balance of shadows gained against pages seen leaving, so a page seen gone
before cachestat counted its shadow is matched a scan later, not counted twice; a refault
consumes a shadow, so the count is a lower bound.
"""

from __future__ import annotations

import os

import numpy as np

from modelmon.core.loading.reads import now_ns as clock_ns
from modelmon.core.system.residency import PAGE_SIZE, cached_in_range, resident_pages
from modelmon.core.watching.files import ModelFile
from modelmon.core.watching.page_runs import Arrivals, merge_runs, page_runs

ABSENT, BEFORE, ARRIVED = 0, 1, 2  # what a page is, in FileArrival.state
MAX_BINS = 256
# The largest folio the page cache makes here (a PMD's 2 MiB on x86-64): bins start on it.
FOLIO_PAGES = (2 << 20) // PAGE_SIZE
# A run of arrived pages continues a stream when a page within this distance before it is
# resident; otherwise the reader jumped there (random order shows as many small jumps).
STREAM_GAP_PAGES = 16
FULL_BIN_TURNS = 32  # a bin that is all resident is looked at again every this many scans


def bin_edges(pages: int, bins: int, align_pages: int) -> np.ndarray:
    """The page edges of at most ``bins`` bins over ``pages`` pages: each bin the same
    multiple of ``align_pages`` long, the last one cut at the file's end."""
    step = -(-max(1, pages) // max(1, bins))
    step = -(-step // align_pages) * align_pages
    count = max(1, -(-pages // step))
    return np.minimum(np.arange(count + 1, dtype=np.int64) * step, pages)


class FileArrival:
    """One model file's pages, scan after scan. Holds a descriptor of its own on the file
    (a description of its own: it shares nothing with the watched program)."""

    def __init__(
        self, model_file: ModelFile, bins: int = MAX_BINS, align_pages: int = FOLIO_PAGES
    ) -> None:
        self.file = model_file
        self.fd = os.open(model_file.path, os.O_RDONLY | os.O_CLOEXEC)
        self.size = model_file.size
        self.pages = -(-self.size // PAGE_SIZE)
        self.state = np.zeros(self.pages, dtype=np.uint8)
        self.ever = np.zeros(self.pages, dtype=bool)  # arrived at least once
        self.edges = bin_edges(self.pages, bins, align_pages)
        count = len(self.edges) - 1
        self._bin_counts = np.zeros(count, dtype=np.int64)
        self._bin_evicted = np.zeros(count, dtype=np.int64)
        # Per bin: shadow entries gained minus pages seen leaving, not yet matched
        self._shadow_balance = np.zeros(count, dtype=np.int64)
        # Per bin: cachestat counted pages mincore did not find read yet (reads in flight)
        self._in_flight = np.zeros(count, dtype=bool)
        self.last_scan_ns = 0
        self.resident_before = 0.0  # fraction when first scanned
        self.arrived_pages = 0  # every arrival counted
        self.arrived_bytes = 0  # the same in bytes (the file's last page counts its part)
        self.evicted_arrived_pages = 0  # pages that arrived, then were dropped while watched
        self.evicted_before_pages = 0  # pages resident before the watch, dropped while watched
        # Pages that arrived and were reclaimed between two scans (counted from shadow entries)
        self.unseen_arrived_pages = 0
        self.cachestat = True  # False once cachestat proved unusable: whole-file mincore
        self.runs = 0  # runs of arrived pages, as scans found them
        self.jumps = 0  # runs that started away from resident data (not at the file's start)
        self.scans = 0
        self.mincore_pages = 0  # pages looked at with mincore (the cost that matters)

    # --- scans ---------------------------------------------------------------------------------

    def baseline(self, now_ns: int) -> None:
        """The first scan: what is resident now was there before the watch."""
        resident = self._whole()
        self.resident_before = float(resident.mean()) if self.pages else 0.0
        self.last_scan_ns = now_ns
        self.state[resident.astype(bool)] = BEFORE

    def scan(self, everything: bool = False) -> Arrivals | None:
        """What arrived since the previous scan (None: nothing). ``everything``: look at the
        bins that were all resident too (the final scan)."""
        self.scans += 1
        found = self._scan(everything)
        if found is not None:
            self.runs += len(found.offsets)
        return found

    def _scan(self, everything: bool) -> Arrivals | None:
        # The window of what this scan finds runs from when the previous scan began reading
        # to when this one has read (the clock read after the pages are): a page read as
        # absent then and resident now came in between. A tick's own time is taken before
        # its other looks; on a busy machine the reads come tens of milliseconds later.
        start_ns, self.last_scan_ns = self.last_scan_ns, clock_ns()
        if not self.cachestat:
            return self._apply(0, self._whole(), start_ns, clock_ns())[0]
        shadows_before = self._bin_evicted.copy()
        changed = self._changed_bins(self._bins_to_look_at(everything))
        if changed is None:  # cachestat refused: whole-file mincore from now on
            self.cachestat = False
            return self._apply(0, self._whole(), start_ns, clock_ns())[0]
        offsets: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        unplaced = fresh = 0
        looked = np.union1d(changed, np.flatnonzero(self._in_flight)).astype(np.int64)
        # Adjacent bins are read as one range: one mincore, one update (per bin, Python's
        # own steps cost more than the page tables' walk).
        for run in np.split(looked, np.flatnonzero(np.diff(looked) != 1) + 1):
            if not len(run):
                continue
            low, high = int(run[0]), int(run[-1]) + 1
            first, end = int(self.edges[low]), int(self.edges[high])
            counts = self._bin_counts[low:high]
            # Pages leave only as mincore sees them go, never by a count of zero: a count can
            # be short (cachestat's walk restarts past a large folio it stopped in).
            if counts.any() or self.state[first:end].any():
                resident = resident_pages(self.fd, self.size, first, end - first)
                self.mincore_pages += end - first
            else:
                resident = np.zeros(end - first, dtype=np.uint8)
            starts = self.edges[low:high] - first
            seen = np.add.reduceat(resident.astype(np.int64), starts) if len(resident) else counts
            self._in_flight[low:high] = seen < counts
            # Only its runs are kept: the merged window ends once every bin is read.
            found, gone = self._apply(first, resident, start_ns, self.last_scan_ns)
            if found is not None:
                offsets.append(found.offsets)
                lengths.append(found.lengths)
                fresh += found.first_bytes
            gone_by_bin = np.add.reduceat(gone.astype(np.int64), starts) if len(gone) else counts
            for index, left in zip(range(low, high), gone_by_bin.tolist(), strict=True):
                unplaced += self._unseen(index, shadows_before[index], left)
        if not offsets and not unplaced:
            return None
        read_ns = clock_ns()
        if not offsets:
            empty = np.zeros(0, dtype=np.int64)
            return Arrivals(self.file.index, start_ns, read_ns, empty, empty, unplaced)
        merged_offsets, merged_lengths = merge_runs(
            np.concatenate(offsets), np.concatenate(lengths)
        )
        return Arrivals(
            self.file.index, start_ns, read_ns, merged_offsets, merged_lengths, unplaced, fresh
        )

    def _unseen(self, index: int, shadows_before: int, gone: int) -> int:
        """Bytes of bin ``index`` that arrived and were reclaimed since the previous scan,
        from the shadow entries it gained beyond the pages this scan saw leave it."""
        balance = self._shadow_balance[index] + int(self._bin_evicted[index]) - shadows_before
        balance -= gone
        first, end = int(self.edges[index]), int(self.edges[index + 1])
        pages = int(min(end - first, max(0, balance)))
        self._shadow_balance[index] = min(0, balance)  # a deficit waits for its shadows
        if not pages:
            return 0
        self.unseen_arrived_pages += pages
        self.evicted_arrived_pages += pages
        self.arrived_pages += pages
        unplaced = min(pages * PAGE_SIZE, self.size - first * PAGE_SIZE)
        self.arrived_bytes += unplaced
        return unplaced

    def _bins_to_look_at(self, everything: bool) -> np.ndarray:
        """Every bin not all resident, and a turn of the full ones (pages leave them only
        when evicted): cachestat's cost follows the pages it counts, and on FUSE, whose page
        cache holds single pages, counting a cached GB takes 10 ms."""
        count = len(self.edges) - 1
        if everything:
            return np.arange(count)
        full = self._bin_counts >= np.diff(self.edges)
        turn = np.arange(count) % FULL_BIN_TURNS == self.scans % FULL_BIN_TURNS
        return np.flatnonzero(~full | turn)

    def _changed_bins(self, bins: np.ndarray) -> np.ndarray | None:
        """Which of ``bins`` moved since they were last counted (their counts updated); None
        if cachestat refuses. A run of bins that were empty is asked as one range (an empty
        range costs 2 µs). Where something arrived in it, its bins are asked one by one
        from its start while they moved (a reader's front enters a run at its start), and
        what is left after the first that did not is asked as two halves, each split the
        same way only if it moved: behind a reading front, a call per bin the front crossed
        and a few more, not one per bin of the run."""
        changed: list[int] = []
        empty = self._bin_counts[bins] == 0
        groups: list[tuple[int, int]] = []  # [first bin, end bin) of runs of empty bins
        for index, is_empty in zip(bins.tolist(), empty.tolist(), strict=True):
            if is_empty and groups and groups[-1][1] == index and self._bin_counts[index - 1] == 0:
                groups[-1] = (groups[-1][0], index + 1)
            else:
                groups.append((index, index + 1))
        while groups:
            first_bin, end_bin = groups.pop()
            moved = self._count(first_bin, end_bin)
            if moved is None:
                return None
            if not moved:
                continue
            if end_bin - first_bin == 1:
                changed.append(first_bin)
                continue
            index = first_bin
            while index < end_bin:
                moved = self._count(index, index + 1)
                if moved is None:
                    return None
                if not moved:
                    break
                changed.append(index)
                index += 1
            low, high = index + 1, end_bin
            if high - low > 1:
                middle = (low + high) // 2
                groups += [(low, middle), (middle, high)]
            elif high > low:
                groups.append((low, high))
        return np.array(sorted(changed), dtype=np.int64)

    def _count(self, first_bin: int, end_bin: int) -> bool | None:
        """Whether bins [first_bin, end_bin) moved since last counted (a single bin's counts
        are updated); None if cachestat refuses."""
        first, end = int(self.edges[first_bin]), int(self.edges[end_bin])
        found = cached_in_range(self.fd, first * PAGE_SIZE, (end - first) * PAGE_SIZE)
        if found is None:
            return None
        before = (
            int(self._bin_counts[first_bin:end_bin].sum()),
            int(self._bin_evicted[first_bin:end_bin].sum()),
        )
        if found == before:
            return False
        if end_bin - first_bin == 1:
            self._bin_counts[first_bin], self._bin_evicted[first_bin] = found
        return True

    def _whole(self) -> np.ndarray:
        """0/1 per page of the whole file, from the bins' counts where they settle it."""
        bins = np.arange(len(self.edges) - 1)
        counts, evicted = self._bins(bins) if self.cachestat else (None, None)
        if counts is None or evicted is None:
            self.cachestat = False
            self.mincore_pages += self.pages
            return resident_pages(self.fd, self.size, 0, self.pages)
        self._bin_counts, self._bin_evicted = counts, evicted
        resident = np.zeros(self.pages, dtype=np.uint8)
        for index in range(len(counts)):
            first, end = int(self.edges[index]), int(self.edges[index + 1])
            if counts[index] >= end - first:
                resident[first:end] = 1
            elif counts[index] > 0 or evicted[index] > 0:  # nothing counted at all is exact
                resident[first:end] = resident_pages(self.fd, self.size, first, end - first)
                self.mincore_pages += end - first
        return resident

    def _bins(self, bins: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(cached, evicted) pages of each of ``bins``; (None, None) if cachestat refuses."""
        counts = np.zeros(len(bins), dtype=np.int64)
        evicted = np.zeros_like(counts)
        for place, index in enumerate(bins.tolist()):
            first, end = int(self.edges[index]), int(self.edges[index + 1])
            found = cached_in_range(self.fd, first * PAGE_SIZE, (end - first) * PAGE_SIZE)
            if found is None:
                return None, None
            counts[place], evicted[place] = found
        return counts, evicted

    def _apply(
        self, first: int, resident: np.ndarray, start_ns: int, end_ns: int
    ) -> tuple[Arrivals | None, np.ndarray]:
        """Update the pages [first, first + len(resident)) to ``resident``; the arrivals,
        and which of those pages were seen leaving."""
        end = first + len(resident)
        state = self.state[first:end]
        now = resident.astype(bool)
        arrived = now & (state == ABSENT)
        gone = ~now & (state != ABSENT)
        if gone.any():
            self.evicted_arrived_pages += int(np.count_nonzero(gone & (state == ARRIVED)))
            self.evicted_before_pages += int(np.count_nonzero(gone & (state == BEFORE)))
            state[gone] = ABSENT
        if not arrived.any():
            return None, gone
        state[arrived] = ARRIVED
        new = arrived & ~self.ever[first:end]
        self.ever[first:end] |= arrived
        self.arrived_pages += int(np.count_nonzero(arrived))
        pages, counts = page_runs(arrived)
        self._count_jumps(pages + first)
        offsets = (pages + first) * PAGE_SIZE
        lengths = np.minimum(counts * PAGE_SIZE, self.size - offsets)
        self.arrived_bytes += int(lengths.sum())
        fresh = self._bytes_of(first, new)
        return Arrivals(self.file.index, start_ns, end_ns, offsets, lengths, 0, fresh), gone

    def _bytes_of(self, first: int, pages: np.ndarray) -> int:
        """Bytes of the pages set in ``pages`` (from page ``first``): the last counts its part."""
        count = int(np.count_nonzero(pages))
        if count and first + len(pages) >= self.pages and pages[-1]:
            return count * PAGE_SIZE - (self.pages * PAGE_SIZE - self.size)
        return count * PAGE_SIZE

    def _count_jumps(self, starts: np.ndarray) -> None:
        """Count the runs starting at pages ``starts`` that do not continue resident data
        (now resident: a stream's holes within one scan are not jumps)."""
        low = max(0, int(starts.min()) - STREAM_GAP_PAGES)
        resident = np.concatenate(([0], np.cumsum(self.state[low : int(starts.max())] != 0)))
        local = starts - low
        before = resident[local] - resident[np.maximum(0, local - STREAM_GAP_PAGES)]
        self.jumps += int(np.count_nonzero((before == 0) & (starts > 0)))

    # --- figures -------------------------------------------------------------------------------

    def unique_arrived_bytes(self) -> int:
        """Bytes of the file that arrived at least once (a file's last page counts whole)."""
        return min(self.size, int(np.count_nonzero(self.ever)) * PAGE_SIZE)

    def resident_map(self, bins: int) -> np.ndarray:
        """Resident fraction per bin (float32, ``bins`` long) from the pages as last scanned:
        the app's residency grid, at no cost to the page cache."""
        if not self.pages:
            return np.zeros(bins, dtype=np.float32)
        edges = np.arange(bins + 1, dtype=np.int64) * self.pages // bins
        prefix = np.concatenate(([0], np.cumsum(self.state != ABSENT, dtype=np.int64)))
        counts = prefix[edges[1:]] - prefix[edges[:-1]]
        widths = np.maximum(edges[1:] - edges[:-1], 1)
        fractions: np.ndarray = (counts / widths).astype(np.float32)
        return fractions

    def resident_fraction(self) -> float:
        if not self.pages:
            return 0.0
        return float(np.count_nonzero(self.state)) / self.pages

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
