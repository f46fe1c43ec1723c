"""A/B: what two configurations' runs, alternating (A B A B …), say: each side's summary and
the verdict of the pairs (``ab_run.run_ab`` runs them; ``ranks_ab.run_ranks_ab`` runs N ranks
a side). A run is anything ``Paired``: a load's ``LoadResult``, a ranks run's ``RanksResult``.

The verdict comes from the pairs themselves: B is faster only if every pair says so and the
median gain is larger than the run-to-run noise each side shows on its own. Loads are
compared by their MB/s; servers (runs seen ready) by their time to ready, A's over B's, so
that a ratio above 1 is B's gain either way, and each phase of their cold starts beside it
(``PhaseShift``): where the difference comes from.
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
# A phase of two servers' cold starts differs when every pair moves it the same way, beyond
# twice the pairs' spread of it, by this long at least and this share of the ready's change.
PHASE_MIN_S = 0.25
PHASE_MIN_SHARE = 0.1
BY_RATE, BY_READY = "rate", "ready"  # what an A/B compares: MB/s, or the time to ready


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
    @property
    def ready_s(self) -> float | None: ...
    @property
    def ready_every_s(self) -> float: ...
    @property
    def phases(self) -> dict[str, float]: ...


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
    # Servers: the time to ready over the runs (median, min, max), and each phase's median.
    median_ready_s: float | None = None
    min_ready_s: float | None = None
    max_ready_s: float | None = None
    phases: dict[str, float] = field(default_factory=dict)


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
    # What the ratios are of: "rate" (B's MB/s over A's) or "ready" (A's time to ready over
    # B's: B's speed-up, a ratio above 1 still B's gain).
    by: str = BY_RATE

    @property
    def within_timing(self) -> bool:
        """Whether the median gain, whichever side leads, is within ``resolution``."""
        ratio = self.median_ratio
        return ratio > 0 and _within_timing(math.log(ratio), self.resolution)


def _within_timing(log_ratio: float, resolution: float) -> bool:
    return resolution > 0 and abs(log_ratio) <= math.log1p(resolution)


@dataclass(frozen=True, slots=True)
class PhaseShift:
    """One phase of two servers' cold starts: its median on each side, and how it moved."""

    name: str  # "before", "weights", "after", or "line: NAME" (a server's own line)
    a_s: float
    b_s: float
    change_s: float  # B − A, median over the pairs
    differs: bool  # every pair moved it the same way, beyond their noise and ``PHASE_MIN_S``


@dataclass(frozen=True, slots=True)
class ABResult:
    a: SideSummary
    b: SideSummary
    ratios: tuple[float, ...]  # B/A MB/s of each pair (servers: A/B time to ready), in order
    verdict: Verdict
    runs: tuple[tuple[str, LoadResult], ...] = field(default=())  # ("A"|"B", result) in order
    cache: str = "cold"
    phases: tuple[PhaseShift, ...] = ()  # servers: each phase of their cold starts

    @property
    def by(self) -> str:
        return self.verdict.by

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "cache": self.cache,
            "by": self.by,
            "a": asdict(self.a),
            "b": asdict(self.b),
            "ratios": list(self.ratios),
            "verdict": asdict(self.verdict),
            "phases": [asdict(shift) for shift in self.phases],
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
    """A side's rates and times over its runs, with the peaks its caller measured; a
    server's noise is its time to ready's."""
    mbps = [r.mbps for r in results]
    seconds = [r.seconds for r in results]
    ready = [r.ready_s for r in results if r.ready_s is not None]
    server = bool(ready) and len(ready) == len(results)
    figures = [x for x in (ready if server else mbps) if x > 0]
    middle = statistics.median(figures) if figures else 0.0
    noise = statistics.median(abs(math.log(x / middle)) for x in figures) if figures else 0.0
    names = dict.fromkeys(name for r in results for name in r.phases)
    return SideSummary(
        spec,
        len(results),
        statistics.median(mbps),
        min(mbps),
        max(mbps),
        statistics.median(seconds),
        min(seconds),
        max(seconds),
        noise,
        peak_rss,
        tree_peak_rss,
        statistics.median(ready) if server else None,
        min(ready) if server else None,
        max(ready) if server else None,
        {name: statistics.median(r.phases.get(name, 0.0) for r in results) for name in names}
        if server
        else {},
    )


def largest_tree_peak(results: list[LoadResult]) -> int | None:
    """The largest whole-process-tree peak RSS of ``results``; None unless all were measured."""
    trees = [r.process_tree_peak_rss for r in results]
    known = [tree for tree in trees if tree is not None]
    return max(known) if known and len(known) == len(trees) else None


def judge(ratios: list[float], resolution: float = 0.0, by: str = BY_RATE) -> Verdict:
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
        text, math.exp(middle), min(ratios), max(ratios), noise, note, resolution, len(ratios), by
    )


def timing_error(a: Paired, b: Paired) -> float:
    """How far ``b``/``a``'s ratio may be off by timing alone: each run's span is known to
    its ``timed_every_s`` (a watched program's; a server's time to ready to its
    ``ready_every_s``), and a ratio's two errors add up."""
    if a.ready_s and b.ready_s:
        return sum(r.ready_every_s / (r.ready_s or 1.0) for r in (a, b))
    return sum(r.timed_every_s / r.seconds for r in (a, b) if r.seconds > 0)


def compared_by(runs: Sequence[tuple[str, Paired]]) -> str:
    """What an A/B of these (side, run)s compares: the time to ready where every run was a
    server's, MB/s where none was; a mix compares nothing (``MixedRuns``)."""
    servers = [run.ready_s is not None for _, run in runs]
    if servers and all(servers):
        return BY_READY
    if any(servers):
        raise MixedRuns(runs)
    return BY_RATE


def pair_ratio(a: Paired, b: Paired, by: str) -> float:
    """B's gain over A in one pair: its MB/s over A's, or A's time to ready over B's."""
    if by == BY_READY:
        return (a.ready_s or 0.0) / (b.ready_s or 1.0)
    return b.mbps / a.mbps


def phase_shifts(a_runs: Sequence[Paired], b_runs: Sequence[Paired]) -> tuple[PhaseShift, ...]:
    """Each phase of two servers' cold starts, pair by pair (their own lines where every run
    printed them): its medians, its median change, and whether it differs (every pair
    agrees, beyond twice their spread, and by at least ``PHASE_MIN_S`` and
    ``PHASE_MIN_SHARE`` of the time to ready's change)."""
    pairs = list(zip(a_runs, b_runs, strict=False))
    ready = [(b.ready_s or 0.0) - (a.ready_s or 0.0) for a, b in pairs]
    moved = abs(statistics.median(ready)) if ready else 0.0
    names = dict.fromkeys(name for a, b in pairs for name in (*a.phases, *b.phases))
    shifts = []
    for name in names:
        # A server's own line that a run did not print took no 0 s: it is another server's
        # stage (Run:ai's streamer prints no 'Loading weights'), and does not compare.
        if name.startswith("line: ") and not all(
            name in a.phases and name in b.phases for a, b in pairs
        ):
            continue
        changes = [b.phases.get(name, 0.0) - a.phases.get(name, 0.0) for a, b in pairs]
        middle = statistics.median(changes)
        spread = statistics.median(abs(c - middle) for c in changes)
        agree = all(c > 0 for c in changes) or all(c < 0 for c in changes)
        big = abs(middle) >= max(PHASE_MIN_S, PHASE_MIN_SHARE * moved)
        shifts.append(
            PhaseShift(
                name,
                statistics.median(a.phases.get(name, 0.0) for a, _ in pairs),
                statistics.median(b.phases.get(name, 0.0) for _, b in pairs),
                middle,
                agree and big and abs(middle) > BEYOND_NOISE * spread,
            )
        )
    return tuple(shifts)


class MixedRuns(LoadError):
    """An A/B whose runs were not all servers or all loads: a time to ready and a load's
    MB/s do not compare."""

    def __init__(self, runs: Sequence[tuple[str, Paired]]) -> None:
        served = {side for side, run in runs if run.ready_s is not None}
        loaded = {side for side, run in runs if run.ready_s is None}
        if served != loaded:
            say = (
                f"{'/'.join(sorted(served))} was ready as a server and "
                f"{'/'.join(sorted(loaded))} ended as a load (it loaded and exited, or went "
                "quiet, without listening)"
            )
        else:
            say = "some runs were ready as servers and others ended as loads"
        super().__init__(
            f"{say}: a time to ready and MB/s do not compare; compare servers with servers "
            "(--ready-port, --ready-line or --ready-url say when one is ready)"
        )


class ABFailed(LoadError):
    """A run of the A/B did not complete (failed or cancelled): the comparison is void."""

    def __init__(self, side: str, pair: int, result: Paired | None) -> None:
        self.side, self.pair, self.result = side, pair, result
        why = "cancelled" if result is None else f"{result.status}: {result.error}"
        super().__init__(f"{side} run {pair + 1} {why}")
