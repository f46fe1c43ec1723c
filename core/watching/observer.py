"""One look at the watched program per sample: its tree, then (on their own budgets) what it
has open and mapped, and the pages that arrived; the arrivals go to the run's read log.

The sampler's thread calls ``tick`` on every sample (``sources.WatchedTreeSource``); the
costly looks are spaced out so each stays within a share of one core, as the sampler spaces
its residency rounds: a torch process with thousands of mappings, or a multi-GB model whose
pages move everywhere, is looked at less often rather than slowed down.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from modelmon.core.loading.messages import ReadBatch
from modelmon.core.loading.reads import ReadLog
from modelmon.core.metrics.procfs import ProcFile, system_cpu_line
from modelmon.core.watching.accessors import Accessors
from modelmon.core.watching.arrival_rounds import ArrivalTracker
from modelmon.core.watching.cold_start import RANK_MIN_BYTES, RANK_MIN_SHARE, rank_pids
from modelmon.core.watching.connections import BucketArrivals
from modelmon.core.watching.descriptors import DescriptorGroups
from modelmon.core.watching.files import ModelFile, ModelFiles
from modelmon.core.watching.mapped_reads import MappedReads
from modelmon.core.watching.openings import look
from modelmon.core.watching.others import OTHERS_CPU_SHARE, OtherReaders
from modelmon.core.watching.page_runs import Arrivals
from modelmon.core.watching.proc_counters import ZERO, Counters
from modelmon.core.watching.rank_evidence import Evidence
from modelmon.core.watching.tree import ProcessTree, read_command

LOOK_CPU_SHARE = 0.01  # descriptors and mappings of every process
RSS_CPU_SHARE = 0.005  # smaps of the processes that map the model (it walks page tables)
ARRIVAL_CPU_SHARE = 0.02  # the page scans
RSS_MIN_INTERVAL_S = 0.5
QUIET_CPU = 0.10  # of one core, used or waited for: less, with nothing arriving, is quiet
QUIET_READ_MBPS = 1.0
UNKNOWN_HOLDER = -1  # the read log's worker for pages of a file several processes held


@dataclass(frozen=True, slots=True)
class Progress:
    """The watch so far, for a live view (and for a test that waits on a state)."""

    files: int  # model files known
    arrived_bytes: int
    processes: int  # live processes of the tree
    shared_pids: tuple[int, ...]  # of the most shared description on a model file so far
    mapped: bool  # some process mapped a model file
    looks: int  # looks at the tree's descriptors and mappings so far
    # The start of the first scan in which model bytes arrived (None: none yet): where the
    # program's load began, as far as the watch can tell.
    first_arrival_ns: int | None = None


@dataclass
class FileUse:
    """How the tree used one model file, over the looks."""

    holders: set[int] = field(default_factory=set)  # pids at the latest look
    mapped: bool = False
    opened: bool = False
    mapped_rss_peak: int = 0


class Observer:
    def __init__(self, files: ModelFiles, log: ReadLog, interval_s: float) -> None:
        self.files = files
        self.log = log
        self.interval_ns = max(1, round(interval_s * 1e9))
        self.tree: ProcessTree | None = None
        self.arrivals = ArrivalTracker()
        self.groups = DescriptorGroups()
        self.uses: dict[int, FileUse] = {}
        self.libraries: set[str] = set()
        self.denied: set[str] = set()
        self.others = OtherReaders()  # processes outside the tree with the model's files
        self.lock = threading.Lock()  # what a tick changes, against readers on other threads
        self._next_look = self._next_rss = self._next_scan = self._next_others = 0
        self.cpu_ns = 0  # the ticks' own CPU time
        self.looks = 0
        # What the sources read after a tick:
        self.totals: Counters = ZERO
        self.rss = self.anon_rss = self.peak_rss = self.peak_anon_rss = 0
        self.live = 0
        self.round_ns: int | None = None  # the latest page scan, and the one before
        self.previous_round_ns: int | None = None
        self.round_arrived = 0  # bytes that arrived in the latest scan
        self.last_active_ns: int | None = None
        self._was_runnable = False  # the tree was ready to run at the previous look
        self.ended = False  # the watch decided to end: what follows is not the program's own
        self._last_tick: tuple[int, Counters] | None = None
        # A model in a bucket: its bytes arrive over the tree's connections to the endpoint.
        self.bucket: BucketArrivals | None = None
        self.evidence = Evidence()  # each process's reading of the model, the tree's figures
        self.accessors = Accessors()  # the kernel's word on who had a model file open
        self._proc_stat = ProcFile("/proc/stat")
        self.mapped_reads = MappedReads(
            self.evidence,
            self.lock,
            lambda: [m.pid for m in self.tree.live()] if self.tree is not None else [],
            lambda: [f.path for f in self.files.files],
            lambda: self.ended,
        )

    # --- setting up ----------------------------------------------------------------------------

    def set_root(
        self, pid: int, now_ns: int, attached: bool, command: tuple[str, ...] = ()
    ) -> None:
        """``command``: the root's argv where the watch started it (its name when /proc no
        longer has it: a fast command may be gone, or a zombie, at the first look)."""
        with self.lock:
            self.tree = ProcessTree(pid, attached, now_ns, command)
            self.mapped_reads.start()
            if attached:
                self.tree.adopt_existing(now_ns)
                self._look(now_ns, want_rss=True)  # the files already open or mapped

    def track(self, model_files: list[ModelFile], now_ns: int) -> None:
        """Start scanning these files' pages (their state now is the starting state)."""
        self.accessors.track(model_files)
        for model_file in model_files:
            self.evidence.sizes[model_file.index] = model_file.size
            self.uses.setdefault(model_file.index, FileUse())
            if model_file.index not in self.arrivals.files:
                self.arrivals.add(model_file, now_ns)

    # --- the tick ------------------------------------------------------------------------------

    def tick(self, now_ns: int, final: bool = False) -> None:
        started = time.thread_time_ns()
        with self.lock:
            tree = self.tree
            if tree is not None:
                tree.refresh(now_ns, discover=not final)
                if final or now_ns >= self._next_look:
                    cost = self._look(now_ns, want_rss=final or now_ns >= self._next_rss)
                    self._next_look = now_ns + max(self.interval_ns, int(cost / LOOK_CPU_SHARE))
                if final or now_ns >= self._next_others:
                    cost = self.others.scan(self.files.files, tree.claims)
                    spaced = int(cost / OTHERS_CPU_SHARE)
                    self._next_others = now_ns + max(self.interval_ns, spaced)
            if final or now_ns >= self._next_scan:
                found = self.arrivals.round(everything=final)
                self._log(found)
                cost = self.arrivals.last_round_cpu_ns
                # The first scan pays once for what the others reuse (its first maps of
                # the files): spaced by its cost, a load of a few tenths of a second would
                # be seen by it and the last scan only.
                first = self.round_ns is None
                spacing = self.interval_ns if first else int(cost / ARRIVAL_CPU_SHARE)
                self._next_scan = now_ns + spacing
                self.previous_round_ns, self.round_ns = self.round_ns, now_ns
                self.round_arrived = sum(a.bytes for a in found)
            else:
                self.round_arrived = 0
            if self.bucket is not None and tree is not None:
                self._look_at_bucket(now_ns, [member.pid for member in tree.live()], final)
            if tree is not None:
                accessed = self.accessors.take(tree.members)
                since = {
                    pid: tree.members[pid].last.read_chars - tree.members[pid].baseline.read_chars
                    for pid in accessed
                }
                self.evidence.accessed(now_ns, accessed, since)
            self._figures(now_ns, final)
        self.cpu_ns += time.thread_time_ns() - started

    def _look(self, now_ns: int, want_rss: bool) -> int:
        """Descriptors and mappings of every live member; its CPU cost in ns."""
        tree = self.tree
        if tree is None:
            return 0
        started = time.thread_time_ns()
        known = len(self.files.files)
        descriptors = []
        holders: dict[int, set[int]] = {}
        rss_now: dict[int, int] = {}
        mapped_by: dict[int, dict[int, int]] = {}  # pid → file → its resident mapped bytes
        positions: dict[int, dict[int, int]] = {}  # pid → file → its descriptors' furthest
        for member in tree.live():
            # Read again: a child seen between fork and exec showed its parent's command.
            member.command = read_command(member.pid) or member.command
            seen = look(member.pid, self.files.consider, want_rss)
            if seen is None:
                continue
            if seen.denied:
                self.denied.add(seen.denied)
            self.libraries |= seen.libraries
            descriptors += seen.descriptors
            for descriptor in seen.descriptors:
                holders.setdefault(descriptor.file, set()).add(member.pid)
                self._use(descriptor.file).opened = True
            for mapping in seen.mappings:
                holders.setdefault(mapping.file, set()).add(member.pid)
                self._use(mapping.file).mapped = True
            for index, resident in seen.mapped_rss.items():
                rss_now[index] = max(rss_now.get(index, 0), resident)
            if seen.mapped_rss:
                mapped_by[member.pid] = dict(seen.mapped_rss)
        self.track(self.files.files[known:], now_ns)
        for index, use in self.uses.items():
            use.holders = holders.get(index, set())
            use.mapped_rss_peak = max(use.mapped_rss_peak, rss_now.get(index, 0))
        threads = {m.pid: m.threads for m in tree.live()}
        self.groups.update(descriptors, threads, now_ns)
        for group in self.groups.groups:
            # An offset one process moved alone: a shared one is the sum of everyone's reads.
            if group.last_seen_ns == now_ns and len(group.pids) == 1:
                offsets = positions.setdefault(group.pids[0], {})
                offsets[group.file] = max(offsets.get(group.file, 0), group.position)
        holding: dict[int, set[int]] = {}
        for descriptor in descriptors:
            holding.setdefault(descriptor.pid, set()).add(descriptor.file)
        self.evidence.looked(now_ns, mapped_by, positions, holding)
        self.looks += 1
        cost = time.thread_time_ns() - started
        if want_rss:
            self._next_rss = now_ns + max(int(RSS_MIN_INTERVAL_S * 1e9), int(cost / RSS_CPU_SHARE))
        return cost

    def _look_at_bucket(self, now_ns: int, pids: list[int], final: bool) -> None:
        """What arrived over the connections since the last look, logged as reads of the
        model (file 0, at the offset of what had arrived before)."""
        assert self.bucket is not None
        window = self.bucket.look(now_ns, pids, final)
        self.evidence.connections(now_ns, self.bucket.connections.received_by())
        if window is None:
            return
        start, end, count = window
        offset = self.bucket.received - count
        self.log.add(ReadBatch(UNKNOWN_HOLDER, (0,), (offset,), (count,), (start,), (end,)))
        self.round_arrived += count

    def _use(self, index: int) -> FileUse:
        return self.uses.setdefault(index, FileUse())

    def _log(self, found: list[Arrivals]) -> None:
        for arrivals in found:
            count = len(arrivals.offsets)
            if not count:  # only pages reclaimed unseen: no place in the file to log
                continue
            worker = self._holder_slot(arrivals.file)
            self.log.add(
                ReadBatch(
                    worker,
                    (arrivals.file,) * count,
                    tuple(arrivals.offsets.tolist()),
                    tuple(arrivals.lengths.tolist()),
                    (arrivals.start_ns,) * count,
                    (arrivals.end_ns,) * count,
                )
            )

    def _holder_slot(self, file: int) -> int:
        """The slot of the one process that held the file at the latest look (or of the one
        live process); UNKNOWN_HOLDER when several did or none was seen."""
        tree = self.tree
        if tree is None:
            return UNKNOWN_HOLDER
        holders = self._use(file).holders
        if len(holders) == 1:
            member = tree.members.get(next(iter(holders)))
            return member.slot if member is not None else UNKNOWN_HOLDER
        live = tree.live()
        if not holders and len(live) == 1:
            return live[0].slot
        return UNKNOWN_HOLDER

    def _figures(self, now_ns: int, final: bool) -> None:
        tree = self.tree
        if tree is None:
            return
        self.totals = tree.totals()
        self.rss, self.anon_rss = tree.rss()
        self.peak_rss = max(self.peak_rss, self.rss)
        self.peak_anon_rss = max(self.peak_anon_rss, self.anon_rss)
        self.live = len(tree.live())
        if not self.ended:  # a stopped program's teardown unmaps and frees: no reading
            self.evidence.ticked(
                now_ns,
                [
                    (m.pid, m.ppid, m.last.read_chars, m.anon_rss, m.exited_ns, m.died_ns)
                    for m in tree.members.values()
                ],
                self.totals.cpu_seconds,
                self.totals.system_seconds,
                self.rss,
                self.anon_rss,
                self._machine_cpu(),
                self.totals.read_bytes,
            )
        last, self._last_tick = self._last_tick, (now_ns, self.totals)
        if final or self.ended:  # a stopped program's teardown is not activity
            return
        if last is None or now_ns <= last[0]:
            self.last_active_ns = now_ns
            return
        seconds = (now_ns - last[0]) / 1e9
        cpu = (self.totals.cpu_seconds - last[1].cpu_seconds) / seconds
        read = (self.totals.read_bytes - last[1].read_bytes) / seconds / 1e6
        # A tree that waited for a CPU wanted it: on a machine too busy to give it any, a
        # server still working looks idle by the CPU it got. Its wait is counted when it ends;
        # ready to run at two looks in a row, it is waiting now.
        waited = tree.waited_ns / 1e9 / seconds
        waiting, self._was_runnable = tree.runnable and self._was_runnable, tree.runnable
        busy = max(cpu, waited) >= QUIET_CPU or waiting
        if self.round_arrived or busy or read >= QUIET_READ_MBPS:
            self.last_active_ns = now_ns

    def _machine_cpu(self) -> tuple[float, float]:
        """(busy, total) CPU seconds of the whole machine: whether others held the cores."""
        try:
            line = system_cpu_line(self._proc_stat.read())
        except (OSError, ValueError):
            return 0.0, 0.0
        idle = line.idle + (line.iowait if math.isfinite(line.iowait) else 0.0)
        return line.total - idle, line.total

    # --- what the watch reads at the end --------------------------------------------------------

    def quiet_for_ns(self, now_ns: int) -> int:
        with self.lock:
            return 0 if self.last_active_ns is None else now_ns - self.last_active_ns

    def _windows(self) -> list[tuple[int, int, int]]:
        """The arrival windows: of the model's files' pages, or of a bucket's bytes."""
        return self.bucket.windows if self.bucket is not None else self.arrivals.windows

    def model_seen(self) -> bool:
        with self.lock:
            if self.bucket is not None and self.bucket.received:
                return True
            return self.arrivals.arrived_bytes() > 0 or any(
                use.mapped or use.opened for use in self.uses.values()
            )

    def ready_context(
        self,
    ) -> tuple[list[int], int, Callable[[], set[int]], tuple[int, int, int] | None]:
        """What a look for a ready server needs: the tree's live pids, its root, the pids
        that read the model and their descendants (asked when needed: a pre-forking server's
        workers, forked by the process that read the weights, share them and serve), and
        when model bytes arrived: the first at the earliest, the latest at the earliest and at
        the latest (None: none yet). A page scan's window bounds its bytes' arrival; a rank's
        growth seen at a tick came within the tick before."""
        with self.lock:
            tree = self.tree
            if tree is None:
                return [], 0, set, None
            pids = [m.pid for m in tree.live()]
            root = tree.members.get(tree.root)
            # What the command left running (a daemon, handed to modelmon when its parents
            # ended, and what it started) stands for the command once it has exited: its
            # listening socket is the server's (its reads may fall between two looks at its
            # descriptors, and its parent may have been no orphan when it was found).
            ended = root is not None and (not root.alive or root.died_ns is not None)
            stands_in = set(tree.members) - {tree.root} if ended else set()
            windows = [(start, end) for start, end, n in self._windows() if n > 0]
            for process in self.evidence.processes.values():
                ends = process.growth[:1] + process.growth[-1:]
                windows += [(t - self.interval_ns, t) for t, _ in ends]
            model_bytes = sum(f.size for f in self.files.files) + (
                self.bucket.size if self.bucket is not None else 0
            )
        span = (
            (min(w[0] for w in windows), max(w[0] for w in windows), max(w[1] for w in windows))
            if windows
            else None
        )
        return pids, tree.root, lambda: self._ranks(model_bytes) | stands_in, span

    def _ranks(self, model_bytes: int) -> set[int]:
        """The ranks, and the processes they forked without running another program (a
        pre-forking server's workers: the same command line as the rank that read the
        weights); a helper a rank started (a metrics exporter) is none of them."""
        with self.lock:
            found = rank_pids(self.evidence, model_bytes)
            tree = self.tree
            if tree is not None and not found and self._arrived_unseen(model_bytes):
                found = {tree.root}
            if tree is None or not found:
                return found
            members = {m.pid: (m.ppid, m.command) for m in tree.members.values()}
        for pid, (ppid, command) in members.items():
            seen: set[int] = set()
            ancestor = ppid
            while ancestor in members and ancestor not in seen and pid not in found:
                if members[ancestor][1] != command:
                    break  # another program: not a worker forked from the rank
                if ancestor in found:
                    found.add(pid)
                seen.add(ancestor)
                ancestor = members[ancestor][0]
        return found

    def _arrived_unseen(self, model_bytes: int) -> bool:
        """Model bytes arrived, read by no process the looks saw reading them (opened, read and
        closed between two looks): the command stands for its reader, and the workers it
        forks afterwards for its ranks."""
        arrived = self.arrivals.arrived_bytes() + (
            self.bucket.received if self.bucket is not None else 0
        )
        # As much as makes a rank of a process seen reading (a model partly cached before
        # the start brings only the rest).
        return model_bytes > 0 and arrived >= max(RANK_MIN_BYTES, RANK_MIN_SHARE * model_bytes)

    def progress(self) -> Progress:
        with self.lock:
            shared = max((g.pids for g in self.groups.groups), key=len, default=[])
            return Progress(
                files=len(self.files.files),
                arrived_bytes=self.arrivals.arrived_bytes()
                + (self.bucket.received if self.bucket is not None else 0),
                processes=self.live,
                shared_pids=tuple(shared),
                mapped=any(use.mapped for use in self.uses.values()),
                looks=self.looks,
                first_arrival_ns=next((start for start, _, n in self._windows() if n > 0), None),
            )

    def residency_maps(self, bins: int = 256) -> dict[str, np.ndarray]:
        """{path: resident fraction per bin} of each model file as last scanned (the app's
        residency grid for a watched run; the sampler keeps none for it)."""
        with self.lock:
            return {
                tracked.file.path: tracked.resident_map(bins)
                for tracked in self.arrivals.files.values()
            }

    def close(self) -> None:
        self.mapped_reads.stop()
        with self.lock:
            self.arrivals.close()
            self.accessors.close()
            if self.bucket is not None:
                self.bucket.close()
            if self.tree is not None:
                self.tree.close()
            self._proc_stat.close()
