"""The live feed of a load's metric series: the load's own MB/s by its reads' own times, as
the finished session gives it, whenever the workers' reports arrive."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from modelmon.core import Model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun, MetricSpec, ReadBatch, Sampled
from modelmon.gui.state.live import SETTLE_S
from modelmon.gui.state.metrics_live import MetricFeed

MS = 1_000_000


@dataclass
class Rows:
    """A sampler as the feed reads it: sample rows every 100 ms since the load started, and
    the rate of reported bytes in each, as the sampled series has it."""

    t0: int
    reported_mbps: list[float]
    specs: dict[str, MetricSpec] = field(
        default_factory=lambda: {"load_mbps": MetricSpec("load_mbps", "MB/s", "", over="interval")}
    )
    unavailable: dict[str, str] = field(default_factory=dict)
    over: dict[str, str] = field(default_factory=lambda: {"load_mbps": "interval"})

    @property
    def samples_taken(self) -> int:
        return len(self.reported_mbps)

    def residency_maps(self) -> list[Any]:
        return []

    def sampled(self) -> Sampled:
        count = len(self.reported_mbps)
        starts = self.t0 + np.arange(count, dtype=np.int64) * 100 * MS
        values = {"load_mbps": np.array(self.reported_mbps, dtype=np.float64)}
        return Sampled(starts, starts + 100 * MS, values)


@dataclass
class Load:
    t0_ns: int
    reads: Any


@dataclass
class FakeSession:
    sampler: Rows
    load: Load


def feed_of(model: Model, t0: int, reported: list[float]) -> MetricFeed:
    """A load that reads 10 MB every 100 ms from ``t0``, in 1 MB reads of 10 ms each, for as
    many intervals as ``reported`` (the sampled rate of the bytes reported in each)."""
    log = LoadRun(model, "sequential", LoadOptions(workers=1)).reads  # not run: reads added
    for tenth in range(len(reported)):
        starts = tuple(t0 + tenth * 100 * MS + i * 10 * MS for i in range(10))
        ends = tuple(s + 10 * MS for s in starts)
        log.add(ReadBatch(0, (0,) * 10, (0,) * 10, (1_000_000,) * 10, starts, ends))
    session = FakeSession(Rows(t0, reported), Load(t0, log))
    return MetricFeed("A", session, poll_s=0.0)  # type: ignore[arg-type]


def test_a_late_report_is_counted_when_its_reads_happened_not_when_it_arrived(
    two_file_model: Model,
):
    """One worker's reports of the first 0.3 s arrive together in the fourth interval, where
    the reported bytes make a spike four times the load's rate. The feed draws the 100 MB/s
    the load read in each interval."""
    reported = [0.0, 0.0, 0.0, 400.0, 100.0]
    t0 = time.perf_counter_ns() - 500 * MS - int(SETTLE_S * 1e9)  # all settled
    snapshot = feed_of(two_file_model, t0, reported).poll()
    assert snapshot is not None
    times, rates = snapshot.series["load_mbps"]
    assert times == pytest.approx([0.05, 0.15, 0.25, 0.35, 0.45])
    assert rates == pytest.approx([100.0] * 5, rel=1e-6), rates


def test_the_newest_intervals_wait_for_their_reports(two_file_model: Model):
    """Intervals that ended less than ``SETTLE_S`` ago may have reports still on their way:
    drawn as nothing yet, not as a dip."""
    t0 = time.perf_counter_ns() - 500 * MS  # the fifth interval ends now
    snapshot = feed_of(two_file_model, t0, [100.0] * 5).poll()
    assert snapshot is not None
    rates = snapshot.series["load_mbps"][1]
    assert rates[:3] == pytest.approx([100.0] * 3, rel=1e-6)
    assert np.isnan(rates[3:]).all(), rates
