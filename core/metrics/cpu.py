"""System CPU and IO wait, and the CPU each worker uses.

Percentages come from deltas of cumulative CPU times between samples, computed here rather
than with ``psutil.cpu_percent``, whose first call returns a meaningless 0.0 and whose state
is shared with anyone else in the process who calls it. On Linux /proc/stat and each
worker's /proc/<pid>/stat are kept open and re-read (``procfs``); elsewhere psutil.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import psutil

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import NAN, MetricSpec, MonitorTarget
from modelmon.core.metrics.series import INTERVAL
from modelmon.core.metrics.workers import Gap, SystemAndWorkersSource, worker_ids

# Linux counts guest time inside user and nice too: leaving it out avoids counting it twice.
_ALREADY_COUNTED = ("guest", "guest_nice")


class SystemTimes(NamedTuple):
    total: float  # seconds of all CPUs
    idle: float
    iowait: float  # NaN where the OS has no such field


def system_times(times: Any) -> SystemTimes:
    """Totals from a ``psutil.cpu_times()`` result (``scputimes``; fields differ by OS)."""
    fields: dict[str, float] = times._asdict()
    total = sum(value for name, value in fields.items() if name not in _ALREADY_COUNTED)
    return SystemTimes(total, fields["idle"], fields.get("iowait", NAN))


def _percent(part: float, whole: float) -> float:
    """100·part/whole within [0, 100]; NaN stays NaN (max() and min() would drop it)."""
    share = 100.0 * part / whole
    return min(100.0, max(0.0, share)) if math.isfinite(share) else NAN


def _busy_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)  # children_* are the worker's children, not it


class CpuSource(SystemAndWorkersSource[float]):
    name = "cpu"
    description = "System CPU and IO wait (100 % = all cores), and each worker's CPU."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(
            target,
            "system CPU times",
            "worker CPU times",
            _busy_seconds,
            ("stat", procfs.pid_busy_seconds),
        )
        self._stat = procfs.ProcFile("/proc/stat") if procfs.have_procfs() else None
        self._last_system: SystemTimes | None = None
        # (worker, pid) -> (t_ns, busy seconds) at the previous sample
        self._last_worker: dict[tuple[int, int], tuple[int, float]] = {}

    def specs(self) -> list[MetricSpec]:
        specs = [
            MetricSpec(
                "iowait_pct",
                "%",
                "Share of all CPUs' time spent idle while IO they started was pending "
                "(100 % = every core); a hint of waiting on storage, not a measure of it.",
                over=INTERVAL,
            ),
            MetricSpec(
                "cpu_pct",
                "%",
                "Share of all CPUs' time spent busy, neither idle nor in IO wait "
                "(100 % = every core).",
                over=INTERVAL,
            ),
        ]
        specs += [
            MetricSpec(
                f"worker_cpu_pct.{worker}",
                "%",
                f"CPU time worker {worker} used per second (100 % = one full core).",
                over=INTERVAL,
            )
            for worker in worker_ids(self.target)
        ]
        specs.append(
            MetricSpec(
                "workers_cpu_pct",
                "%",
                "CPU time all workers used together per second (100 % = one full core).",
                over=INTERVAL,
            )
        )
        return specs

    def sample(self, now_ns: int) -> dict[str, float]:
        values = self._system()
        values.update(self._per_worker(now_ns))
        return values

    def _system(self) -> dict[str, float]:
        try:
            if self._stat is not None:
                times = SystemTimes(*procfs.system_cpu_line(self._stat.read()))
            else:
                times = system_times(psutil.cpu_times())
            self._system_log.ok()
        except Exception as error:  # an OS without the call or its fields
            self._system_log.failed(error)
            return {"iowait_pct": NAN, "cpu_pct": NAN}
        last, self._last_system = self._last_system, times
        if last is None:
            return {"iowait_pct": NAN, "cpu_pct": NAN}
        total = times.total - last.total
        if total <= 0:  # within one clock tick: nothing to divide
            return {"iowait_pct": NAN, "cpu_pct": NAN}
        # iowait can step back on tickless kernels (it is estimated per idle period): clamp.
        iowait = max(0.0, times.iowait - last.iowait) if math.isfinite(times.iowait) else NAN
        busy = total - (times.idle - last.idle) - (iowait if math.isfinite(iowait) else 0.0)
        return {"iowait_pct": _percent(iowait, total), "cpu_pct": _percent(busy, total)}

    def _per_worker(self, now_ns: int) -> dict[str, float]:
        values: dict[str, float] = {}
        total, known = 0.0, True
        readings = self._workers.read()
        for worker, reading in readings.items():
            key = (worker, self._workers.pids[worker])
            if isinstance(reading, Gap):
                self._last_worker.pop(key, None)
                values[f"worker_cpu_pct.{worker}"] = NAN
                known = known and reading is Gap.EXITED  # an exited worker uses no CPU
                continue
            last = self._last_worker.get(key)
            self._last_worker[key] = (now_ns, reading)
            # A worker seen for the first time (or under a new pid) only gives a baseline.
            if last is None or now_ns <= last[0] or reading < last[1]:
                percent = NAN
            else:
                percent = 100.0 * (reading - last[1]) * 1e9 / (now_ns - last[0])
            values[f"worker_cpu_pct.{worker}"] = percent
            total += percent
            known = known and math.isfinite(percent)
        values["workers_cpu_pct"] = total if known else NAN
        return values

    def close(self) -> None:
        super().close()
        if self._stat is not None:
            self._stat.close()
