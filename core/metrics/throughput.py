"""The load's own throughput: what the workers report done, so it works on any filesystem."""

from __future__ import annotations

from modelmon.core.metrics.base import MetricSpec, MonitorTarget, Rate, Source
from modelmon.core.metrics.series import INTERVAL


class LoadThroughputSource(Source):
    name = "load_throughput"
    description = "MB/s the load completes, from the workers' own reports."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self._rate = Rate()

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec(
                "load_mbps",
                "MB/s",
                "Bytes the load completed per second (MB = 10⁶ bytes), from the "
                "workers' reports: it works on every filesystem, FUSE and NFS too.",
                over=INTERVAL,
            )
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        return {"load_mbps": self._rate.update(now_ns, float(self.target.loaded_bytes())) / 1e6}
