"""A/B: what two configurations' runs, alternating (A B A B …), say: each side's summary and
the verdict of the pairs (``ab_run.run_ab`` runs them; ``ranks_ab.run_ranks_ab`` runs N ranks
a side). A run is anything ``Paired``: a load's ``LoadResult``, a ranks run's ``RanksResult``.

The verdict comes from the pairs themselves: B is faster only if every pair says so and the
median gain is larger than the run-to-run noise each side shows on its own.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from modelmon.core.errors import LoadError, StorageError
from modelmon.core.loading.result import LoadResult
from modelmon.core.system.cache import CacheState

# A gain is told apart from the noise when it exceeds this many times the spread of the runs
# (their median absolute deviation; twice the MAD is about 1.35 standard deviations of normal
# noise). For pairs every pair must agree too: three pairs of equals agree one time in four,
# and a median gain beyond twice their spread rules out most of those.
BEYOND_NOISE = 2.0


class Paired(Protocol):
    """What the pairs and the verdict read of a run."""

    @property
    def status(self) -> str: ...
    @property
    def error(self) -> str | None: ...
    @property
    def seconds(self) -> float: ...
    @property
    def mbps(self) -> float: ...
    @property
    def timed_every_s(self) -> float: ...
    @property
    def cache(self) -> CacheState: ...
    @property
    def storage_error(self) -> StorageError | None: ...


@dataclass(frozen=True, slots=True)
class SideSummary:
    spec: str
    runs: int
    median_mbps: float
    min_mbps: float
    max_mbps: float
    median_seconds: float
    min_seconds: float
    max_seconds: float
    noise: float  # relative run-to-run spread of this side: median |log(x / median)|
    # The largest peak RSS of this side's runs: the load's workers', and the whole modelmon
    # process tree's (None where a parent's peak was not measured).
    peak_rss: int = 0
    process_tree_peak_rss: int | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    text: str  # "B faster" | "A faster" | "within noise"
    median_ratio: float  # B/A throughput, median over pairs
    min_ratio: float
    max_ratio: float
    noise: float  # spread of the pairs: exp(MAD of log B/A) − 1
    note: str = ""
    # How far a pair's ratio may be off by the runs' timing alone (``timing_error``, median
    # over the pairs): a gain within it is within noise, however well the pairs agree.
    resolution: float = 0.0
    # How many pairs it judges: under ``judging.MIN_PAIRS`` their spread estimates no noise,
    # so a comparison of the two is of all their runs (``comparison.paired_verdict``).
    pairs: int = 0

    @property
    def within_timing(self) -> bool:
        """Whether the median gain, whichever side leads, is within ``resolution``."""
        ratio = self.median_ratio
        return ratio > 0 and _within_timing(math.log(ratio), self.resolution)


def _within_timing(log_ratio: float, resolution: float) -> bool:
    return resolution > 0 and abs(log_ratio) <= math.log1p(resolution)


@dataclass(frozen=True, slots=True)
class ABResult:
    a: SideSummary
    b: SideSummary
    ratios: tuple[float, ...]  # B/A MB/s of each pair, in run order
    verdict: Verdict
    runs: tuple[tuple[str, LoadResult], ...] = field(default=())  # ("A"|"B", result) in order
    cache: str = "cold"

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "cache": self.cache,
            "a": asdict(self.a),
            "b": asdict(self.b),
            "ratios": list(self.ratios),
            "verdict": asdict(self.verdict),
            "runs": [{"side": side, **result.to_dict()} for side, result in self.runs],
        }


def summarize(spec: str, results: list[LoadResult]) -> SideSummary:
    return side_summary(
        spec,
        results,
        max((r.workers_peak_rss for r in results), default=0),
        largest_tree_peak(results),
    )


def side_summary(
    spec: str, results: Sequence[Paired], peak_rss: int = 0, tree_peak_rss: int | None = None
) -> SideSummary:
    """A side's rates and times over its runs, with the peaks its caller measured."""
    mbps = [r.mbps for r in results]
    seconds = [r.seconds for r in results]
    middle = statistics.median(mbps)
    noise = statistics.median(abs(math.log(x / middle)) for x in mbps) if middle > 0 else 0.0
    return SideSummary(
        spec,
        len(results),
        middle,
        min(mbps),
        max(mbps),
        statistics.median(seconds),
        min(seconds),
        max(seconds),
        noise,
        peak_rss,
        tree_peak_rss,
    )


def largest_tree_peak(results: list[LoadResult]) -> int | None:
    """The largest whole-process-tree peak RSS of ``results``; None unless all were measured."""
    trees = [r.process_tree_peak_rss for r in results]
    known = [tree for tree in trees if tree is not None]
    return max(known) if known and len(known) == len(trees) else None


def judge(ratios: list[float], resolution: float = 0.0) -> Verdict:
    """The verdict of the pairs.

    Pairs run back to back, so drift of the machine (a neighbour's I/O, thermal state) hits
    both sides of a pair alike and cancels in the ratio. The noise is therefore the spread of
    the pairs' log-ratios (median absolute deviation). "B faster" needs every pair to agree
    and the median gain to exceed ``BEYOND_NOISE`` times that spread, and ``resolution``
    (``timing_error``: how far a ratio may be off by the runs' timing alone).
    """
    logs = [math.log(r) for r in ratios]
    middle = statistics.median(logs)
    spread = statistics.median(abs(x - middle) for x in logs)
    note = "" if len(ratios) > 1 else "one pair: no estimate of the noise, run more pairs"
    if all(x > 0 for x in logs) and middle > BEYOND_NOISE * spread:
        text = "B faster"
    elif all(x < 0 for x in logs) and -middle > BEYOND_NOISE * spread:
        text = "A faster"
    else:
        text = "within noise"
    if _within_timing(middle, resolution):
        text = "within noise"
    noise = math.exp(spread) - 1
    return Verdict(
        text, math.exp(middle), min(ratios), max(ratios), noise, note, resolution, len(ratios)
    )


def timing_error(a: Paired, b: Paired) -> float:
    """How far ``b``/``a``'s ratio may be off by timing alone: each run's span is known to
    its ``timed_every_s`` (a watched program's), and a ratio's two errors add up."""
    return sum(r.timed_every_s / r.seconds for r in (a, b) if r.seconds > 0)


class ABFailed(LoadError):
    """A run of the A/B did not complete (failed or cancelled): the comparison is void."""

    def __init__(self, side: str, pair: int, result: Paired | None) -> None:
        self.side, self.pair, self.result = side, pair, result
        why = "cancelled" if result is None else f"{result.status}: {result.error}"
        super().__init__(f"{side} run {pair + 1} {why}")
