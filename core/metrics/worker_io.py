"""What the workers read from storage vs what they read through read calls (/proc/<pid>/io).

``read_chars`` (rchar) counts bytes returned by read-like system calls (read, pread, readv,
sendfile...), from the page cache or not, O_DIRECT included. ``read_bytes`` counts bytes of
read requests the process submitted to the block layer: its page-cache misses, the readahead
it triggered, its O_DIRECT reads and the page faults it took on mapped files. Touching a
mapping never makes a read call, so mmap strategies leave ``read_chars`` flat while
``read_bytes`` shows their faults that went to disk: for them the cache-hit estimate below is
undefined, and ``read_bytes`` against the load throughput tells the story instead.
"""

from __future__ import annotations

import math
import os
import sys
from typing import NamedTuple

import psutil

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import (
    FAILURES_TO_REPORT,
    NAN,
    MetricSpec,
    MonitorTarget,
    Source,
)
from modelmon.core.metrics.series import INTERVAL
from modelmon.core.metrics.workers import Gap, WorkerProbe, worker_ids

# Below this many bytes of read calls in one interval the estimate is noise (a pipe message,
# a config file), and an mmap load would otherwise read as 0 % hits off a handful of bytes.
MIN_READ_CHARS = 64 << 10


class IoCounters(NamedTuple):
    read_bytes: float
    read_chars: float  # NaN where psutil has no such field (not Linux)


def _io(process: psutil.Process) -> IoCounters:
    counters = process.io_counters()
    return IoCounters(float(counters.read_bytes), float(getattr(counters, "read_chars", NAN)))


def _proc_io(io: bytes) -> IoCounters:
    return IoCounters(*procfs.pid_io(io))


def hit_estimate(read_bytes_change: float, read_chars_change: float) -> float:
    """1 − Δread_bytes/Δread_chars within [0, 1]; NaN when too little went through reads.

    Readahead fetches ahead of the reads, so over a short interval a cold read can show
    more bytes from storage than through reads: that is 0 % hits, not less.
    """
    if not (math.isfinite(read_bytes_change) and math.isfinite(read_chars_change)):
        return NAN
    if read_chars_change < MIN_READ_CHARS:
        return NAN
    return min(1.0, max(0.0, 1.0 - read_bytes_change / read_chars_change))


class WorkerIoSource(Source):
    name = "worker_io"
    description = "Bytes workers read from storage vs through read calls, and a cache-hit estimate."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self._workers = WorkerProbe(target, "worker IO counters", _io, ("io", _proc_io))
        # (worker, pid) -> counters, kept after the worker exits: its reads still happened
        self._last: dict[tuple[int, int], IoCounters] = {}

    def specs(self) -> list[MetricSpec]:
        specs: list[MetricSpec] = []
        for worker in worker_ids(self.target):
            specs += [
                MetricSpec(
                    f"worker_read_bytes.{worker}",
                    "bytes",
                    f"Bytes worker {worker} made the kernel read from storage since it "
                    "started: cache misses, readahead, O_DIRECT and mmap page faults.",
                ),
                MetricSpec(
                    f"worker_read_chars.{worker}",
                    "bytes",
                    f"Bytes worker {worker} got through read calls since it started "
                    "(its Python start-up too), cached or not; mmap access never counts.",
                ),
            ]
        specs += [
            MetricSpec(
                "read_bytes",
                "bytes",
                "Bytes all workers made the kernel read from storage since they "
                "started (/proc/<pid>/io read_bytes).",
            ),
            MetricSpec(
                "read_chars",
                "bytes",
                "Bytes all workers got through read calls since they started, their "
                "Python start-up included (/proc/<pid>/io rchar).",
            ),
            MetricSpec(
                "cache_hit_estimate",
                "fraction",
                "Share of the bytes workers read through read calls that the page cache "
                "served, 1 − Δread_bytes/Δread_chars; a gap when under 64 KiB went "
                "through read calls, as with mmap, whose page faults make no read call.",
                over=INTERVAL,
            ),
        ]
        return specs

    def unavailable(self) -> str | None:
        if not hasattr(psutil.Process, "io_counters"):
            return "per-process IO counters are not available on this OS"
        if sys.platform.startswith("linux") and not os.path.exists(f"/proc/{os.getpid()}/io"):
            return "the kernel keeps no per-process IO counters (no /proc/<pid>/io)"
        return None

    def sample(self, now_ns: int) -> dict[str, float]:
        values: dict[str, float] = {}
        change_bytes = change_chars = 0.0
        known = True
        for worker, reading in self._workers.read().items():
            key = (worker, self._workers.pids[worker])
            if isinstance(reading, Gap):
                values[f"worker_read_bytes.{worker}"] = NAN
                values[f"worker_read_chars.{worker}"] = NAN
                # An exited worker's last counters stay in the totals; one never read is unknown
                # unless it exited before we saw it (then it read nothing we can know of).
                known = known and (key in self._last or reading is Gap.EXITED)
                continue
            values[f"worker_read_bytes.{worker}"] = reading.read_bytes
            values[f"worker_read_chars.{worker}"] = reading.read_chars
            last = self._last.get(key)
            self._last[key] = reading
            if last is not None:  # a newly seen worker only sets its baseline
                change_bytes += reading.read_bytes - last.read_bytes
                change_chars += reading.read_chars - last.read_chars
        totals = [sum(column) for column in zip(*self._last.values(), strict=True)] or [0.0, 0.0]
        values["read_bytes"], values["read_chars"] = totals if known else (NAN, NAN)
        values["cache_hit_estimate"] = hit_estimate(change_bytes, change_chars) if known else NAN
        return values

    def failing(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        return self._workers.failing(at_least)

    def close(self) -> None:
        self._workers.close()
