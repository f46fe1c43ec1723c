"""The sampler's series of the running load, pulled for the plots at a bounded cost. Qt-free.

``Sampler.series()`` hands out thread-safe copies of whole series, so each pull costs in
proportion to the run's length. The feed pulls at most every ``poll_s`` and only when the
sampler has taken new samples, and stretches ``poll_s`` when a pull costs more than its share
of the GUI thread: an hour-long run then updates its metric plots less often instead of
making every tick slower. Times become seconds since the load started, like every plot.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from modelmon.core.runs import MetricSpec, Session, SessionResult
from modelmon.gui.state.residency_grid import Maps

POLL_S = 0.2  # the sampler takes a sample every 100 ms; plots need no more than 5 a second
PULL_SHARE = 0.05  # of the GUI thread's time that pulling series may take
MAX_POLL_S = 2.0

Series = dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (seconds since load start, values)


@dataclass(frozen=True, slots=True)
class MetricSnapshot:
    """Every series of one run so far (or in full, when ``final``)."""

    label: str
    series: Series
    specs: dict[str, MetricSpec]
    unavailable: dict[str, str]  # source -> why it gives nothing here
    maps: Maps = ()
    final: bool = False
    resident_fraction: float = field(default=math.nan)  # the latest finite value
    # Of a final snapshot: how often the sampler looked, and how long the run took.
    interval_s: float = math.nan
    seconds: float = math.nan
    # Where a finished run ended (s), that its pictures stop at: a load that completed, or
    # a watch; NaN while it runs, or of a load stopped before its end.
    end_s: float = math.nan

    @staticmethod
    def of_result(label: str, outcome: SessionResult) -> MetricSnapshot:
        """The complete series of a finished session."""
        return MetricSnapshot(
            label,
            dict(outcome.series),
            dict(outcome.specs),
            dict(outcome.unavailable),
            tuple(outcome.residency_maps),
            True,
            latest(outcome.series, "resident_fraction"),
            outcome.interval_s,
            outcome.result.seconds,
            outcome.result.seconds if outcome.result.status == "ok" else math.nan,
        )

    def too_short(self, names: list[str]) -> str | None:
        """Of a finished run whose ``names`` series have no line to draw (fewer than two
        samples each): why, in a few words; None when there is a line or the run is live."""
        if not self.final or not names:
            return None
        for name in names:
            values = self.series.get(name, (None, np.empty(0)))[1]
            if int(np.isfinite(values).sum()) >= 2:
                return None
        if math.isnan(self.seconds) or math.isnan(self.interval_s):
            return None
        return (
            f"{self.seconds * 1000:.0f} ms: over before the sampler's second look "
            f"(one every {self.interval_s * 1000:.0f} ms; View ▸ Sample metrics every)"
        )


def latest(series: Series, name: str) -> float:
    """The newest finite value of ``name``; NaN when there is none."""
    values = series.get(name, (None, np.empty(0)))[1]
    finite = values[np.isfinite(values)]
    return float(finite[-1]) if len(finite) else math.nan


class MetricFeed:
    """Snapshots of one live session, for the GUI thread's tick."""

    def __init__(self, label: str, session: Session, poll_s: float = POLL_S) -> None:
        self.label = label
        self.session = session
        self.poll_s = poll_s
        self._last_pull = -math.inf
        self._samples = -1
        self._maps = -1

    def poll(self, now_s: float | None = None) -> MetricSnapshot | None:
        """A snapshot when one is due and the sampler has something new; else None."""
        sampler = self.session.sampler
        t0_ns = self.session.load.t0_ns
        now = time.perf_counter() if now_s is None else now_s
        if sampler is None or not t0_ns or now - self._last_pull < self.poll_s:
            return None
        samples = sampler.samples_taken
        maps = sampler.residency_maps()
        if samples == self._samples and len(maps) == self._maps:
            return None
        started = time.perf_counter()
        self._last_pull, self._samples, self._maps = now, samples, len(maps)
        series = {name: ((t - t0_ns) / 1e9, v) for name, (t, v) in sampler.series().items()}
        snapshot = MetricSnapshot(
            self.label,
            series,
            dict(sampler.specs),
            sampler.unavailable,
            tuple(((t - t0_ns) / 1e9, files) for t, files in maps),
            resident_fraction=latest(series, "resident_fraction"),
        )
        cost = time.perf_counter() - started
        # Keep the pulls within their share: a pull of 10 ms allows one every 200 ms.
        self.poll_s = min(MAX_POLL_S, max(self.poll_s, cost / PULL_SHARE))
        return snapshot
