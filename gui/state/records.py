"""A finished run: the job's report of a run's end, and the results table's and the exports'
row. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelmon.core import Ceilings, LoadResult, SessionResult


@dataclass(frozen=True, slots=True)
class RunRecord:
    label: str  # "A" | "B"
    spec: str  # format_spec(strategy, options)
    pair: int | None  # 0-based pair of an A/B; None for a single run
    outcome: SessionResult | None  # the monitored session; None when the run could not start
    error: str | None = None  # why it could not start (one line)
    session: str | None = None  # the A/B it belongs to: "A/B 2 at 14:03:55"; None if single

    @property
    def result(self) -> LoadResult | None:
        return self.outcome.result if self.outcome is not None else None

    @property
    def status(self) -> str:
        return self.result.status if self.result is not None else "failed"

    @property
    def message(self) -> str | None:
        if self.result is not None and self.result.status == "failed":
            return self.result.error
        return self.error

    @property
    def run_name(self) -> str:
        """ "A", or "B · pair 2 · A/B 1 at 14:03:55": runs of different A/Bs never share a name."""
        if self.pair is None:
            return self.label
        name = f"{self.label} · pair {self.pair + 1}"
        return f"{name} · {self.session}" if self.session else name

    @property
    def measured(self) -> bool:
        """The run has a throughput to show (it finished, or stopped after reading some)."""
        result = self.result
        return result is not None and (result.status == "ok" or result.bytes > 0)

    def peak_rss(self) -> tuple[int, str] | None:
        """Peak resident memory of the workers together, and how it was measured.

        The max of the sampler's ``workers_rss`` (their RSS summed, every sample interval): a
        load shorter than a sample interval has none. Not the sum of ``WorkerTiming.peak_rss``
        (each worker's own VmHWM): the workers peak at different moments, so the sum of
        their peaks overstates what they held at once.
        """
        if self.outcome is None:
            return None
        values = self.outcome.series.get("workers_rss", (None, np.empty(0)))[1]
        seen = values[np.isfinite(values) & (values > 0)]
        if not len(seen):
            return None
        return (
            int(seen.max()),
            f"max of the workers' summed RSS over {len(seen)} samples "
            f"taken every {self.outcome.interval_s * 1000:.0f} ms (a page mapped by several "
            "workers counts once for each)",
        )


def ceiling_for(record: RunRecord, ceilings: Ceilings | None) -> tuple[float, str] | None:
    """This run's MB/s as a fraction of the ceiling that applies, and that ceiling's name.

    parallel_read (cold, own descriptors, every core) for runs from a cold or kept cache; a
    run that started verified warm is held against parallel_read_warm when it was measured:
    against a cold ceiling it would read as several hundred percent.
    """
    if ceilings is None or not record.measured or record.result is None:
        return None
    name = "parallel_read"
    if record.result.cache.warm and ceilings.get("parallel_read_warm") is not None:
        name = "parallel_read_warm"
    fraction = ceilings.fraction(record.result.mbps, name)
    return (fraction, name) if fraction is not None else None
