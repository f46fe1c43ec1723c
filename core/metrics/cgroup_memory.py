"""The run's memory cgroup under a memory limit: what it is charged, split into anonymous
memory (arrays, interpreters) and page cache, beside the limit, for a plot to draw the limit
as a line and the split under it. Nothing without a limit (no series, nothing unavailable)."""

from __future__ import annotations

from modelmon.core.metrics.base import MetricSpec, Source


class CgroupMemorySource(Source):
    name = "memory_limit"
    description = "Under --memory-limit: the run's memory cgroup's charge, its split, the limit."

    def specs(self) -> list[MetricSpec]:
        if self.target.memory_limit is None:
            return []
        return [
            MetricSpec("limit_bytes", "bytes", "The memory limit the run runs under."),
            MetricSpec(
                "cgroup_bytes",
                "bytes",
                "All the run's memory cgroup is charged: its processes' memory and the page "
                "cache their reads brought in.",
            ),
            MetricSpec(
                "cgroup_anon_bytes",
                "bytes",
                "Of it, anonymous memory (arrays, interpreters): what reclaim cannot free.",
            ),
            MetricSpec(
                "cgroup_cache_bytes",
                "bytes",
                "Of it, page cache: reclaimable, read again if it is needed after reclaim.",
            ),
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        limit = self.target.memory_limit
        find = self.target.memory_cgroup
        cgroup = find() if find is not None else None
        if limit is None or cgroup is None:
            return {}
        charged, anon, cache = cgroup.charge()
        return {
            "limit_bytes": float(limit),
            "cgroup_bytes": float(charged),
            "cgroup_anon_bytes": float(anon),
            "cgroup_cache_bytes": float(cache),
        }
