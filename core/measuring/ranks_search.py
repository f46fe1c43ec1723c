"""How N ranks of this node should get their weights, within a memory limit: each way of
loading that keeps every byte (``ranks.RANKS_MODES`` with a strategy each) measured here, the
fastest that holds picked, and the smallest limit it holds at.

Before anything runs, a way whose weights alone outgrow the limit is set aside with what they
hold (``weights_bytes``: N copies for ``whole``, the parts for ``slice``, one for
``one-reader``), a sure bound: its processes hold more beside, which only a run measures. The
others run under the limit, round by round in alternating order, until
each has ``REPEATS`` runs or the budget is spent (past round 1, a run that would end past it,
by round 1's walls, is not started): a way OOM-killed there does not fit, one that
read the model again after reclaim ran the limit's time, not its own. The pick is the fastest
by the median of its slowest rank's time; within ``NOISE`` of it, the one that holds less.
Then the smallest limit the pick holds at: its anonymous and shared memory at their peak, and
room for its processes, verified by one more run under it where the budget allows.

Nothing here discards: a way of loading that keeps nothing is no way to load the weights.
"""

from __future__ import annotations

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from modelmon.core.configuration import ProgramConfig, parse_configuration
from modelmon.core.errors import BUDGET_NOT_KEPT, BudgetWarning, OptionsError, warn
from modelmon.core.measuring.race import PEER_START_GUESS_S
from modelmon.core.measuring.ranks import RanksRun
from modelmon.core.measuring.ranks_checks import check_ranks
from modelmon.core.measuring.ranks_node import needs_why, weights_bytes
from modelmon.core.measuring.ranks_records import RANKS_MODES, RanksMode, RanksResult
from modelmon.core.model.records import Model
from modelmon.core.options import MAX_PARALLEL, LoadOptions, MiB, format_spec
from modelmon.core.system.memory_limit import PROCESS_BYTES, ram_text

REPEATS = 3
NOISE = 0.05  # slowest-rank medians this close are the same speed: the leaner one is picked
ROUND_TO = 64 * MiB  # a limit is said in these steps
# A round projected to end this share of the budget past it is said to overrun it (the CLI's
# and the app's budget promise: within 15 %).
BUDGET_SLACK = 0.15
# The strategies each mode is tried with: buffered reads, and O_DIRECT (no page cache, which
# a limit charges and reclaims).
STRATEGIES = ("sequential", "direct")


@dataclass(frozen=True, slots=True)
class RanksWay:
    """One way N ranks may load: a mode and the strategy its reads use; or another loader
    that runs N ranks itself (``engine``: that loader's configuration)."""

    mode: RanksMode
    strategy: str
    options: LoadOptions
    engine: ProgramConfig | None = None

    @property
    def spec(self) -> str:
        if self.engine is not None:
            return self.engine.body
        return f"{self.mode} · {format_spec(self.strategy, self.options)}"


@dataclass(frozen=True, slots=True)
class WayMeasured:
    way: RanksWay
    needs_bytes: int  # what its weights hold at once, at least (its processes hold more)
    runs: tuple[RanksResult, ...] = ()
    refused: str | None = None  # why it was not run (it cannot fit the limit)

    @property
    def ok_runs(self) -> list[RanksResult]:
        return [r for r in self.runs if r.status == "ok"]

    @property
    def seconds(self) -> float | None:
        """The median of its slowest rank's time over its ok runs."""
        ok = self.ok_runs
        return statistics.median(r.seconds for r in ok) if ok else None

    @property
    def peak_bytes(self) -> int | None:
        """The node's highest peak over its runs (page cache included)."""
        peaks = [r.node.peak_bytes for r in self.runs if r.node is not None]
        return max(peaks) if peaks else None

    @property
    def held_bytes(self) -> int | None:
        """Its anonymous and shared memory at their peak: what a limit must leave it."""
        held = [r.node.held_peak_bytes for r in self.runs if r.node and r.node.held_peak_bytes]
        return max(held) if held else None

    @property
    def failure(self) -> str | None:
        """Why it did not hold, from its runs (an OOM kill at the limit, a failure)."""
        failed = [r for r in self.runs if r.status == "failed"]
        return failed[0].error if failed else None

    @property
    def fits(self) -> bool:
        return self.refused is None and bool(self.ok_runs) and self.failure is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.way.mode,
            "strategy": self.way.strategy,
            "spec": self.way.spec,
            "needs_bytes": self.needs_bytes,
            "refused": self.refused,
            "fits": self.fits,
            "failure": self.failure,
            "seconds": self.seconds,
            "run_seconds": [r.seconds for r in self.runs],
            "peak_bytes": self.peak_bytes,
            "held_bytes": self.held_bytes,
        }


@dataclass(frozen=True, slots=True)
class RanksRecommendation:
    model: str
    model_bytes: int
    ranks: int
    memory_limit: int | None
    ways: tuple[WayMeasured, ...]
    pick: WayMeasured | None
    holds_at: int | None  # the smallest limit the pick holds at
    holds_verified: bool  # a run under ``holds_at`` held
    budget_s: float
    seconds: float  # what the search took
    notes: tuple[str, ...] = ()  # what was not measured, and why

    @property
    def does_not_fit(self) -> bool:
        return self.pick is None

    def least_needed(self) -> int:
        """The least any way's weights hold: what a limit must be more than."""
        return min(w.needs_bytes for w in self.ways)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "model_bytes": self.model_bytes,
            "ranks": self.ranks,
            "memory_limit": self.memory_limit,
            "pick": self.pick.to_dict() if self.pick else None,
            "holds_at_bytes": self.holds_at,
            "holds_verified": self.holds_verified,
            "does_not_fit": self.does_not_fit,
            "least_needed_bytes": self.least_needed(),
            "ways": [w.to_dict() for w in self.ways],
            "budget_s": self.budget_s,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


# Run:ai's streamer in every rank, reading all (vLLM's runai_streamer under tensor
# parallelism), and distributed (one reads, the ranks get it over torch.distributed): its
# `ranks` knob runs them over gloo on this machine.
PEERS = {
    "whole": "engine: runai ranks={ranks} RUNAI_STREAMER_DIST=0",
    "one-reader": "engine: runai ranks={ranks} RUNAI_STREAMER_DIST=1",
}


def ways_for(ranks: int, options: LoadOptions, model: Model) -> tuple[list[RanksWay], list[str]]:
    """The ways to measure, and why other loaders' are not among them (one line each)."""
    from modelmon.core.loaders.registry import engine_unavailable, get_engine

    kept = options.with_(discard=False, cache="cold")
    # One reader reads for the node: it gets the workers N ranks would have between them.
    reader = kept.with_(workers=min(MAX_PARALLEL, kept.workers * ranks))
    ways = [
        RanksWay(mode, strategy, reader if mode == "one-reader" else kept)
        for mode in RANKS_MODES
        for strategy in STRATEGIES
    ]
    why = engine_unavailable("runai")
    if why is None and any(f.remote is not None for f in model.files):
        why = "Run:ai's streamer runs ranks on files here, not from a bucket"
    if why is None and model.format not in get_engine("runai").formats:
        why = f"Run:ai's streamer does not read {model.format}"
    if why is not None:
        return ways, [f"Run:ai's streamer (every rank, or distributed) is not measured: {why}"]
    for mode, spec in PEERS.items():
        peer = parse_configuration(spec.format(ranks=ranks))
        assert isinstance(peer, ProgramConfig)
        ways.append(RanksWay(mode, "runai", kept, peer))  # type: ignore[arg-type]
    return ways, []


def _round_up(count: int) -> int:
    return -(-count // ROUND_TO) * ROUND_TO


def recommend_ranks(
    model: Model,
    ranks: int,
    *,
    memory_limit: int | None = None,
    budget_s: float = 120.0,
    options: LoadOptions | None = None,
    cancel: threading.Event | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> RanksRecommendation:
    """The fastest way for ``ranks`` ranks to load ``model`` here that holds under
    ``memory_limit`` (see the module's docstring)."""
    if ranks < 2:
        raise OptionsError("a ranks recommendation is for 2 ranks or more (--ranks N)")
    if options is not None and options.discard:
        raise OptionsError("a ranks recommendation keeps the weights: leave --discard out")
    started = time.monotonic()
    deadline = started + budget_s
    stop = cancel or threading.Event()
    say: Callable[[str], None] = on_progress or (lambda _: None)
    ways = []
    planned, left_out = ways_for(ranks, options or LoadOptions(), model)
    for way in planned:
        if way.engine is None:
            check_ranks(model, way.strategy, ranks, way.mode)
        needs = weights_bytes(model, ranks, way.mode)
        refused = None
        if memory_limit is not None and needs > memory_limit:
            refused = (
                f"needs more than {ram_text(needs)}: its weights alone, "
                f"{needs_why(way.mode, ranks, model)}"
            )
        ways.append(WayMeasured(way, needs, refused=refused))
    order = [i for i, w in enumerate(ways) if w.refused is None]
    walls: list[tuple[RanksWay, float]] = []  # round 1's runs: what the rest of it will take
    said = False
    for round_number in range(REPEATS):
        for index in order if round_number % 2 == 0 else reversed(order):
            measured = ways[index]
            # Past round 1, a run that would end past the deadline is not started.
            if stop.is_set() or (round_number and _past(deadline, measured.way, walls)):
                break
            if measured.failure is not None:  # it did not hold: not run again
                continue
            say(f"round {round_number + 1}: {measured.way.spec}")
            before = time.monotonic()
            result = _run(model, ranks, measured.way, memory_limit, stop)
            ways[index] = dataclasses.replace(measured, runs=(*measured.runs, result))
            if round_number == 0 and not said:
                walls.append((measured.way, time.monotonic() - before))
                rest = [ways[i].way for i in order[len(walls) :]]
                end = time.monotonic() + sum(_wall_of(way, walls) for way in rest)
                if end > deadline + BUDGET_SLACK * budget_s:  # said now, not found at the end
                    _say_short(say, len(order), end - started, budget_s)
                    said = True
    pick = _pick(ways)
    holds_at, verified = None, False
    if pick is not None:
        holds_at = _round_up((pick.held_bytes or pick.needs_bytes) + ranks * PROCESS_BYTES)
        if memory_limit is None or holds_at < memory_limit:
            if not _past(deadline, pick.way, walls) and not stop.is_set():
                say(f"checking it holds at {ram_text(holds_at)}: {pick.way.spec}")
                check = _run(model, ranks, pick.way, holds_at, stop)
                verified = check.status == "ok"
                if not verified:
                    holds_at = memory_limit if memory_limit is not None else None
        else:
            holds_at, verified = memory_limit, True
    return RanksRecommendation(
        model.path,
        model.total_bytes,
        ranks,
        memory_limit,
        tuple(ways),
        pick,
        holds_at,
        verified,
        budget_s,
        time.monotonic() - started,
        tuple(left_out),
    )


def _past(deadline: float, way: RanksWay, walls: list[tuple[RanksWay, float]]) -> bool:
    """Whether a run of ``way`` started now would end past ``deadline``."""
    return time.monotonic() + (_wall_of(way, walls) if walls else 0.0) > deadline


def _wall_of(way: RanksWay, walls: list[tuple[RanksWay, float]]) -> float:
    """A run of ``way``, planned from round 1's runs so far: those of its own loader (another
    loader's start and imports are its own), else modelmon's and that start on top."""
    same = [s for w, s in walls if (w.engine is None) == (way.engine is None)]
    if same:
        return statistics.median(same)
    own = statistics.median(s for _, s in walls)
    return own + (PEER_START_GUESS_S if way.engine is not None else 0.0)


def _say_short(say: Callable[[str], None], ways: int, round_s: float, budget_s: float) -> None:
    line = (
        f"{BUDGET_NOT_KEPT}: one run of each of the {ways} ways that may fit takes about "
        f"{round_s:.0f} s, past the budget of {budget_s:.0f} s: each runs once (without a "
        "run, a way is not known)"
    )
    say(line)
    warn(line, BudgetWarning)


def _run(
    model: Model, ranks: int, way: RanksWay, limit: int | None, stop: threading.Event
) -> RanksResult:
    if way.engine is not None:
        return _run_engine(model, ranks, way, limit, stop)
    return RanksRun(
        model, way.strategy, way.options, ranks, way.mode, cancel=stop, memory_limit=limit
    ).run()


def _run_engine(
    model: Model, ranks: int, way: RanksWay, limit: int | None, stop: threading.Event
) -> RanksResult:
    """Another loader's ranks, watched in one memory cgroup (the limit, or the machine's
    size: there only to measure the node): as a ranks result, its ranks' time the loader's
    own (its harness waits for its slowest rank)."""
    from modelmon.core.measuring.ranks_node import cgroup_memory
    from modelmon.core.measuring.ranks_records import RankResult
    from modelmon.core.runs.start import run_for
    from modelmon.core.system import cache
    from modelmon.core.system.memory import memory_facts

    assert way.engine is not None
    size = limit if limit is not None else memory_facts().total
    outcome = run_for(
        model, way.engine, "cold", cancel=stop, memory_limit=size, monitor=False
    ).run()
    result = outcome.result
    watched = getattr(outcome, "watch", None)
    record = watched.memory_limit if watched is not None else None
    node = cgroup_memory(record, limit is not None) if record is not None else None
    ranked = tuple(
        RankResult(
            r, len(model.extents), 0.0, result.seconds, result.status, 0, 0, None, result.error
        )
        for r in range(ranks)
    )
    return RanksResult(
        result.status,
        way.strategy,
        way.options,
        model.path,
        way.mode,
        result.cache if result.cache is not None else cache.not_measured("cold"),
        ranked,
        model.total_bytes,
        node,
        error=result.error,
    )


def _pick(ways: Sequence[WayMeasured]) -> WayMeasured | None:
    """The fastest that holds; within NOISE of it, the one that holds the least."""
    fitting = [w for w in ways if w.fits and w.seconds is not None]
    if not fitting:
        return None
    best = min(w.seconds or 0.0 for w in fitting)
    close = [w for w in fitting if (w.seconds or 0.0) <= best * (1 + NOISE)]
    return min(close, key=lambda w: (w.held_bytes or w.needs_bytes, w.seconds or 0.0))
