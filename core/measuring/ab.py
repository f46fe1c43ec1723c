"""A/B: two configurations run alternately (A B A B …) from the same verified cache state.

The verdict comes from the pairs themselves: B is faster only if every pair says so and the
median gain is larger than the run-to-run noise each side shows on its own.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from modelmon.core.errors import LoadError
from modelmon.core.limits import MAX_AB_PAIRS, check_whole
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.runner import LoadRun
from modelmon.core.model.records import Model
from modelmon.core.options import Config, LoadOptions
from modelmon.core.system.cache import rest_storage

# A gain is told apart from the noise when it exceeds this many times the spread of the runs
# (their median absolute deviation; twice the MAD is about 1.35 standard deviations of normal
# noise). For pairs every pair must agree too: three pairs of equals agree one time in four,
# and a median gain beyond twice their spread rules out most of those.
BEYOND_NOISE = 2.0


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
        max((r.workers_peak_rss for r in results), default=0),
        largest_tree_peak(results),
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
    return Verdict(text, math.exp(middle), min(ratios), max(ratios), noise, note, resolution)


def timing_error(a: LoadResult, b: LoadResult) -> float:
    """How far ``b``/``a``'s ratio may be off by timing alone: each run's span is known to
    its ``timed_every_s`` (a watched program's), and a ratio's two errors add up."""
    return sum(r.timed_every_s / r.seconds for r in (a, b) if r.seconds > 0)


RunOne = Callable[[str, int, str, LoadOptions], LoadResult]
"""Runs one load of an A/B: (side "A" | "B", 0-based pair, strategy, options) → its result."""


def run_ab(
    model: Model,
    a: Config,
    b: Config,
    n: int = 3,
    cache: str = "cold",
    *,
    on_result: Callable[[str, int, LoadResult], None] | None = None,
    cancel: threading.Event | None = None,
    run_one: RunOne | None = None,
    on_rest: Callable[[float], None] | None = None,
) -> ABResult:
    """Run A, B, A, B … ``n`` pairs; each run starts from the same verified ``cache`` state.

    Each run is a ``LoadRun``, or what ``run_one`` makes of it (the window runs a monitored
    Session, told which side and pair it is). On network storage each run waits for the
    mount to rest after the last (``rest_storage``); ``on_rest`` hears the seconds first.
    """
    check_whole("n (pairs)", n, 1, MAX_AB_PAIRS)

    def load(side: str, pair: int, strategy: str, options: LoadOptions) -> LoadResult:
        return LoadRun(model, strategy, options, cancel=cancel).run()

    run = run_one or load
    results: dict[str, list[LoadResult]] = {"A": [], "B": []}
    ordered: list[tuple[str, LoadResult]] = []
    files = [f.path for f in model.files]
    for pair in range(n):
        for side, config in (("A", a), ("B", b)):
            # On network storage neither side is timed with help left by the other's run.
            rest_storage(files, cancel, on_rest)
            if cancel is not None and cancel.is_set():  # between two runs: void, as mid-run
                raise ABFailed(side, pair, None)
            result = run(side, pair, config.strategy, config.options.with_(cache=cache))
            results[side].append(result)
            ordered.append((side, result))
            if on_result is not None:
                on_result(side, pair, result)
            if result.status != "ok":
                raise ABFailed(side, pair, result)
    pairs = min(len(results["A"]), len(results["B"]))
    if pairs == 0:
        raise ABFailed("A", 0, None)
    ratios = [results["B"][i].mbps / results["A"][i].mbps for i in range(pairs)]
    side_a = summarize(a.spec, results["A"][:pairs])
    side_b = summarize(b.spec, results["B"][:pairs])
    resolution = statistics.median(
        timing_error(results["A"][i], results["B"][i]) for i in range(pairs)
    )
    verdict = judge(ratios, resolution)
    not_cold = [
        f"{s} run {i // 2 + 1}"
        for i, (s, r) in enumerate(ordered)
        if cache == "cold" and not r.cache.cold
    ]
    if not_cold:
        verdict = replace(verdict, note=f"not verified cold: {', '.join(not_cold)}")
    return ABResult(side_a, side_b, tuple(ratios), verdict, tuple(ordered), cache)


class ABFailed(LoadError):
    """A run of the A/B did not complete (failed or cancelled): the comparison is void."""

    def __init__(self, side: str, pair: int, result: LoadResult | None) -> None:
        self.side, self.pair, self.result = side, pair, result
        why = "cancelled" if result is None else f"{result.status}: {result.error}"
        super().__init__(f"{side} run {pair + 1} {why}")
