"""The load's own throughput, so it works on any filesystem: while the load runs, the rate of
the bytes its workers report done; the session that holds the reads gives each sample its
bytes by the reads' own times instead (``read_bins.load_mbps_over``), and so does the app's
live feed, for a report that arrives late lands whole in one interval."""

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
                "Bytes the load read per second (MB = 10⁶ bytes), each read's bytes "
                "counted over its own span: it works on every filesystem, FUSE and NFS "
                "too.",
                over=INTERVAL,
            )
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        return {"load_mbps": self._rate.update(now_ns, float(self.target.loaded_bytes())) / 1e6}
