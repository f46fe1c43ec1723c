"""Worker resident memory, system available memory and the size of the page cache."""

from __future__ import annotations

import math

import psutil

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import NAN, MetricSpec, MonitorTarget
from modelmon.core.metrics.workers import Gap, SystemAndWorkersSource, worker_ids

MEMINFO = "/proc/meminfo"
_WANTED = {b"MemAvailable:": "available", b"Cached:": "cached"}


def parse_meminfo_fields(data: bytes) -> dict[str, float]:
    """Bytes of MemAvailable and Cached, as "available" and "cached" (missing: absent)."""
    found: dict[str, float] = {}
    for line in data.splitlines():
        key, _, rest = line.partition(b" ")
        name = _WANTED.get(key)
        if name is not None:
            parts = rest.split()
            scale = 1024 if len(parts) > 1 and parts[1] == b"kB" else 1
            found[name] = float(int(parts[0]) * scale)
            if len(found) == len(_WANTED):
                break
    return found


def system_memory(meminfo: procfs.ProcFile | None = None) -> tuple[float, float]:
    """(available, page cache) in bytes; NaN for what this system does not tell.

    /proc/meminfo first (``meminfo`` when kept open): psutil's ``cached`` adds SReclaimable
    (dentry and inode slabs, as ``free`` does), which is not the page cache the model's pages
    live in. Elsewhere psutil, whose ``cached`` field some OSes lack.
    """
    try:
        if meminfo is not None:
            found = parse_meminfo_fields(meminfo.read())
        else:
            with open(MEMINFO, "rb") as file:
                found = parse_meminfo_fields(file.read())
    except OSError:
        found = {}
    if "available" not in found or "cached" not in found:
        memory = psutil.virtual_memory()
        found.setdefault("available", float(memory.available))
        found.setdefault("cached", float(getattr(memory, "cached", NAN)))
    return found["available"], found["cached"]


def _memory(process: psutil.Process) -> procfs.PidMemory:
    info = process.memory_info()
    return procfs.PidMemory(float(info.rss), float(getattr(info, "shared", NAN)))


class MemorySource(SystemAndWorkersSource[procfs.PidMemory]):
    name = "memory"
    description = "Worker RSS, available memory and page-cache size."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(
            target, "system memory", "worker memory", _memory, ("statm", procfs.pid_memory)
        )
        self._meminfo = procfs.ProcFile(MEMINFO)  # where it cannot be read: psutil

    def specs(self) -> list[MetricSpec]:
        specs = [
            MetricSpec(
                f"worker_rss.{worker}",
                "bytes",
                f"Resident memory of worker {worker}; with mmap strategies it "
                "includes the model pages it maps, which are page cache too.",
            )
            for worker in worker_ids(self.target)
        ]
        specs += [
            MetricSpec(
                "workers_rss",
                "bytes",
                "Resident memory of all workers together; a page several workers map "
                "counts once for each, so with mmap this can exceed what they use.",
            ),
            MetricSpec(
                "workers_mapped",
                "bytes",
                "Of the workers' resident memory, the file pages they map (the model's "
                "under mmap, libraries' code) and shared memory: page cache, which the "
                "kernel can reclaim; a page several workers map counts once for each.",
            ),
            MetricSpec(
                "mem_available",
                "bytes",
                "Memory the system can hand out without swapping (MemAvailable: free "
                "memory plus the page cache and slabs it can reclaim).",
            ),
            MetricSpec(
                "page_cache",
                "bytes",
                "Size of the page cache (Cached in /proc/meminfo), the model's cached "
                "pages included.",
            ),
        ]
        return specs

    def sample(self, now_ns: int) -> dict[str, float]:
        values: dict[str, float] = {}
        try:
            values["mem_available"], values["page_cache"] = system_memory(self._meminfo)
            self._system_log.ok()
        except Exception as error:
            self._system_log.failed(error)
        total, mapped, known = 0.0, 0.0, True
        for worker, reading in self._workers.read().items():
            if isinstance(reading, Gap):
                values[f"worker_rss.{worker}"] = NAN
                known = known and reading is Gap.EXITED  # an exited worker holds no memory
                continue
            values[f"worker_rss.{worker}"] = reading.rss
            total += reading.rss
            mapped += reading.mapped
            known = known and math.isfinite(reading.rss)
        values["workers_rss"] = total if known else NAN
        values["workers_mapped"] = mapped if known and math.isfinite(mapped) else NAN
        return values

    def close(self) -> None:
        super().close()
        self._meminfo.close()
