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

from modelmon.core.runs import MetricSpec, ReadBins, Sampled, Session, SessionResult
from modelmon.gui.state.live import MAX_READS_PER_TICK, SETTLE_S
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
    # How a finished run ended, as its results row says: "ok", "cancelled" or "failed"; ""
    # while it runs.
    ending: str = ""

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
            outcome.result.status,
        )

    def too_short(self, names: list[str]) -> str | None:
        """Of a finished run whose ``names`` series have no line to draw (fewer than two
        samples each): why, in the words that follow the run's name ("took 25 ms: over
        before…", "was cancelled before…"); None when there is a line or the run is live."""
        if not self.final or not names:
            return None
        for name in names:
            values = self.series.get(name, (None, np.empty(0)))[1]
            if int(np.isfinite(values).sum()) >= 2:
                return None
        if math.isnan(self.interval_s):
            return None
        before = "before the sampler's second look"
        every = f"one every {self.interval_s * 1000:.0f} ms"
        # A run stopped before its end is timed to its last worker's end (0 s when none
        # ended): how it ended says why it has no line, never a time it did not take.
        if self.ending == "cancelled":
            return f"was cancelled {before} ({every})"
        if self.ending == "failed":
            return f"failed {before} ({every})"
        if math.isnan(self.seconds):
            return None
        took = f"took {self.seconds * 1000:.0f} ms"
        return f"{took}: over {before} ({every}; View ▸ Sample metrics every)"


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
        self._bins = ReadBins()  # the load's reads so far, by their own times
        self._cursor = 0  # reads of the load's log taken so far
        self._last_end_s = 0.0

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
        sampled = sampler.sampled()
        placed = sampled.placed(sampler.over)
        series = {name: ((t - t0_ns) / 1e9, v) for name, (t, v) in placed.items()}
        if "load_mbps" in series:
            series["load_mbps"] = (series["load_mbps"][0], self._own_rates(sampled, t0_ns))
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

    def _own_rates(self, sampled: Sampled, t0_ns: int) -> np.ndarray:
        """The load's own MB/s in each sample interval by its reads' own times, as the
        finished session gives them (``load_mbps_over``); NaN for an interval whose reads may
        still be on their way (newer than ``SETTLE_S``, or past the reads taken so far)."""
        log = self.session.load.reads
        columns, self._cursor = log.columns_since(self._cursor, MAX_READS_PER_TICK, wait=False)
        load = ~columns["prefetch"].astype(bool)
        ends_s = (columns["end"][load] - t0_ns) / 1e9
        self._bins.add((columns["start"][load] - t0_ns) / 1e9, ends_s, columns["length"][load])
        if len(ends_s):
            self._last_end_s = max(self._last_end_s, float(ends_s.max()))
        settled = (time.perf_counter_ns() - t0_ns) / 1e9 - SETTLE_S
        if self._cursor < log.count:  # more reads are waiting to be taken
            settled = min(settled, self._last_end_s - SETTLE_S)
        starts, ends = (sampled.starts - t0_ns) / 1e9, (sampled.ends - t0_ns) / 1e9
        rates = self._bins.mbps_over(starts, ends)
        rates[ends > settled] = np.nan
        return rates
