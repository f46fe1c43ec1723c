"""The metric sources of a watched run, for the same ``Sampler`` modelmon's own loads use.

A watched program has no workers: its series are those of its process tree, under the names
the app's plots read for a load's workers (``workers_cpu_pct``, ``workers_rss``), and the
model's own throughput is the rate its pages arrived (``load_mbps``). ``WATCH_SOURCES`` lists
them in sampling order: the tree source ticks the observer, the others read what it found.
"""

from __future__ import annotations

import math

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import (
    NAN,
    MetricSpec,
    MonitorTarget,
    Source,
)
from modelmon.core.metrics.cgroup_memory import CgroupMemorySource
from modelmon.core.metrics.device import DeviceSource
from modelmon.core.metrics.memory import MEMINFO, system_memory
from modelmon.core.metrics.series import INTERVAL
from modelmon.core.watching.limit import WatchMemory
from modelmon.core.watching.observer import Observer


class WatchTarget(MonitorTarget):
    """A monitor target that also carries the observer of the watched tree."""

    def __init__(
        self, paths: tuple[str, ...], observer: Observer, memory: WatchMemory | None = None
    ) -> None:
        super().__init__(paths, 0, dict, observer.arrivals.arrived_bytes, observer.residency_maps)
        self.observer = observer
        if memory is not None:  # the command's memory cgroup under a limit (watching.limit)
            self.memory_limit = memory.limit
            self.memory_cgroup = lambda: memory.cgroup


def _observer(target: MonitorTarget) -> Observer:
    if not isinstance(target, WatchTarget):
        raise TypeError("a watch source needs a WatchTarget")
    return target.observer


class WatchedTreeSource(Source):
    name = "watched_tree"
    description = "CPU, memory, IO and page faults of the watched process tree."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self.observer = _observer(target)
        self._last: tuple[int, float, int] | None = None  # (t_ns, cpu seconds, major faults)

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec(
                "workers_cpu_pct",
                "%",
                "CPU time the watched process tree used per second (100 % = one full core), "
                "exited children included.",
                over=INTERVAL,
            ),
            MetricSpec(
                "workers_rss",
                "bytes",
                "Resident memory of the watched tree's live processes together; model pages "
                "they map count (they are page cache).",
            ),
            MetricSpec(
                "workers_anon_rss",
                "bytes",
                "Private resident memory of the watched tree (RSS less file pages): its own "
                "copies of the weights.",
            ),
            MetricSpec(
                "read_bytes",
                "bytes",
                "Bytes the watched tree made the kernel read from storage since the watch "
                "began (/proc/PID/io read_bytes): misses, readahead, O_DIRECT, page faults.",
            ),
            MetricSpec(
                "read_chars",
                "bytes",
                "Bytes the watched tree's read calls returned since the watch began (rchar), "
                "cached or not; mapped access never counts.",
            ),
            MetricSpec(
                "major_faults_per_s",
                "faults/s",
                "Page faults of the watched tree per second that waited for storage.",
                over=INTERVAL,
            ),
            MetricSpec("processes", "count", "Live processes in the watched tree."),
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        observer = self.observer
        observer.tick(now_ns)
        if observer.tree is None:
            return {}
        totals = observer.totals
        values = {
            "workers_rss": float(observer.rss),
            "workers_anon_rss": float(observer.anon_rss),
            "read_bytes": float(totals.read_bytes),
            "read_chars": float(totals.read_chars),
            "processes": float(observer.live),
            "workers_cpu_pct": NAN,
            "major_faults_per_s": NAN,
        }
        last, self._last = self._last, (now_ns, totals.cpu_seconds, totals.major_faults)
        if last is not None and now_ns > last[0]:
            seconds = (now_ns - last[0]) / 1e9
            values["workers_cpu_pct"] = 100.0 * (totals.cpu_seconds - last[1]) / seconds
            values["major_faults_per_s"] = (totals.major_faults - last[2]) / seconds
        return values


class ArrivalSource(Source):
    name = "arrival"
    description = "MB/s of the model arriving in the page cache, and how much of it is there."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self.observer = _observer(target)
        self._seen_round: int | None = None

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec(
                "load_mbps",
                "MB/s",
                "Model bytes that arrived in the page cache per second (MB = 10⁶ bytes), "
                "from page bitmaps diffed between scans: any reader, reads and mappings alike.",
                over=INTERVAL,
            ),
            MetricSpec(
                "resident_fraction",
                "fraction",
                "Share of the model files' pages in the page cache, at each page scan.",
            ),
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        observer = self.observer
        round_ns = observer.round_ns
        if round_ns is None or round_ns == self._seen_round:
            return {"load_mbps": NAN, "resident_fraction": NAN}
        self._seen_round = round_ns
        values = {"resident_fraction": self._fraction(), "load_mbps": NAN}
        previous = observer.previous_round_ns
        if previous is not None and round_ns > previous:
            values["load_mbps"] = observer.round_arrived / ((round_ns - previous) / 1e9) / 1e6
        return values

    def _fraction(self) -> float:
        tracked = list(self.observer.arrivals.files.values())
        pages = sum(t.pages for t in tracked)
        if not pages:
            return NAN
        return sum(t.resident_fraction() * t.pages for t in tracked) / pages


class SystemSource(Source):
    name = "system"
    description = "System CPU and IO wait (100 % = all cores), available memory, page cache."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self._stat = procfs.ProcFile("/proc/stat")
        self._meminfo = procfs.ProcFile(MEMINFO)
        self._last: procfs.CpuLine | None = None

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec(
                "iowait_pct",
                "%",
                "Share of all CPUs' time idle while IO they started was pending "
                "(100 % = every core); a hint of waiting on storage.",
                over=INTERVAL,
            ),
            MetricSpec(
                "cpu_pct",
                "%",
                "Share of all CPUs' time spent busy (100 % = every core).",
                over=INTERVAL,
            ),
            MetricSpec(
                "mem_available",
                "bytes",
                "Memory the system can hand out without swapping (MemAvailable).",
            ),
            MetricSpec("page_cache", "bytes", "Size of the page cache (Cached in /proc/meminfo)."),
        ]

    def unavailable(self) -> str | None:
        return None if procfs.have_procfs() else "no /proc here"

    def sample(self, now_ns: int) -> dict[str, float]:
        values: dict[str, float] = {}
        values["mem_available"], values["page_cache"] = system_memory(self._meminfo)
        line = procfs.system_cpu_line(self._stat.read())
        last, self._last = self._last, line
        if last is not None and line.total > last.total:
            total = line.total - last.total
            iowait = max(0.0, line.iowait - last.iowait) if math.isfinite(line.iowait) else NAN
            busy = total - (line.idle - last.idle) - (iowait if math.isfinite(iowait) else 0.0)
            values["iowait_pct"] = min(100.0, max(0.0, 100.0 * iowait / total))
            values["cpu_pct"] = min(100.0, max(0.0, 100.0 * busy / total))
        return values

    def close(self) -> None:
        self._stat.close()
        self._meminfo.close()


WATCH_SOURCES: tuple[type[Source], ...] = (
    WatchedTreeSource,
    ArrivalSource,
    DeviceSource,
    SystemSource,
    CgroupMemorySource,
)
