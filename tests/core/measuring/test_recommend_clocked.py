"""recommend whole (its search, the race's planning and bookkeeping, the record and its words)
on a clock of its own: runs take what ``ClockedRace`` says, so the pairs, the rows and the cut
come out the same on any machine, however busy. What real runs show whatever the machine's
pace is test_recommend_evidence's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring import cutoff, race
from modelmon.core.measuring import recommend as recommend_module
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.cutoff import JUDGE_AFTER_S, TRICKLE, RaceStop
from modelmon.core.measuring.recommend import NEEDED_CEILINGS, Recommendation, recommend
from modelmon.core.measuring.search_space import candidates
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions, MiB
from modelmon.core.output.explain import explain

from .records import run as load_result
from .test_recommend_budget import LOAD_S, OWN_WALL_S, Clock, ClockedRace

BUDGET_S = 90.0  # on the clock: the entries, duels and the pick's runs, none of it real time
SLOW_MBPS = 100.0  # 1 GB in 10 s: on course for 5× the leader's 2 s
STEP_S = 0.05  # how often a stepped run is judged, as a real run polls its stop event


class SteppedClock(Clock):
    """The race's clock, and the cut's (``RaceStop`` times a load by ``perf_counter_ns``)."""

    def perf_counter_ns(self) -> int:
        return round(self.now * 1e9)


class Loading:
    """A run's progress as ``RaceStop`` reads it (``cutoff.Progressing``)."""

    def __init__(self) -> None:
        self.loaded_bytes = 0
        self.load_started_ns = 0


class SlowMappingRace(ClockedRace):
    """As ``ClockedRace``, and a mapping ("mmap") loads at ``SLOW_MBPS``: its load is stepped
    on the clock and judged by the race's own stop event, as a real run's is, until it
    completes, the cut stops it or its time limit comes."""

    def _run_once(
        self, candidate: Candidate, limit: float | None, race_: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        if candidate.strategy != "mmap":
            return super()._run_once(candidate, limit, race_, horizon)
        total = load_result(SLOW_MBPS).bytes
        stop = RaceStop(None, self.leader if race_ else None, total)
        loading = Loading()
        stop.watch(loading)
        self.clock.now += OWN_WALL_S - LOAD_S  # its workers start
        assert isinstance(self.clock, SteppedClock)
        started, steps = self.clock.now, 0
        loading.load_started_ns = self.clock.perf_counter_ns()
        while loading.loaded_bytes < total:
            if stop.is_set() or (limit is not None and steps * STEP_S >= limit):
                stopped = dataclasses.replace(
                    load_result(SLOW_MBPS), status="cancelled", error="stopped"
                )
                return stopped, loading.loaded_bytes, stop
            steps += 1
            self.clock.now = started + steps * STEP_S
            loading.loaded_bytes = min(total, round(steps * STEP_S * SLOW_MBPS * 1e6))
        return load_result(SLOW_MBPS), total, stop


def ceilings_of(model_path: str) -> Ceilings:
    """Every ceiling a search needs, at 1000 MB/s, a run of the parallel read taking what
    one of the race's runs takes."""
    return Ceilings(
        model_path,
        tuple(
            Ceiling(name, 1000.0, (1000.0,), "plain reads", True, wall_s=OWN_WALL_S)
            for name in NEEDED_CEILINGS
        ),
    )


def on_the_clock(
    monkeypatch: pytest.MonkeyPatch, kind: type[ClockedRace] = ClockedRace
) -> Callable[..., Recommendation]:
    """``recommend`` whose race is a ``kind`` on a ``SteppedClock`` (the budget's start and
    end, every run's time and the cut's judgement read it), the rest of it as it is."""
    clock = SteppedClock()
    for module in (race, recommend_module, cutoff):
        monkeypatch.setattr(module, "time", clock)

    def build(
        model: Any, deadline: float, first_pace_s: float, progress: Any, cancel: Any, **kw: Any
    ) -> ClockedRace:
        made = kind(clock, deadline - clock.now)
        made.model, made.progress, made.cancel = model, progress, cancel
        made.first_pace_s = first_pace_s
        made.evidence_overrun_s = kw["evidence_overrun_s"]
        return made

    monkeypatch.setattr(recommend_module, "Race", build)

    def recommend_on_the_clock(model_path: Path, **kwargs: Any) -> Recommendation:
        model = open_model(model_path)
        ceilings = ceilings_of(model.path)
        return recommend(model, workers=2, peers=False, ceilings=ceilings, **kwargs)

    return recommend_on_the_clock


@pytest.fixture
def searched(sharded_model: Path, monkeypatch: pytest.MonkeyPatch) -> Recommendation:
    """The grid recommend searches with two workers and a peer in its screening place (after
    modelmon's first two), in a budget that holds their entries, duels and the pick's
    evidence, but not every entry."""
    grid = candidates(open_model(sharded_model), 2)
    pool = [*grid[:2], Candidate(parse_engine("safetensors"), role="peer"), *grid[2:]]
    return on_the_clock(monkeypatch)(sharded_model, budget_s=BUDGET_S, pool=pool)


def test_winner_rests_on_three_runs_and_paired_runs(searched: Recommendation) -> None:
    rec = searched
    assert len(rec.winner.results) >= 3
    duel = rec.duel
    assert duel is not None and duel.verdict is not None and duel.pairs >= 1
    assert duel.other.verdict is duel.verdict
    assert any("Paired with the other finalist" in line for line in explain(rec))


def test_every_candidate_has_a_row_saying_how_it_ended(searched: Recommendation) -> None:
    rec = searched
    rows = (*rec.ranked, *rec.peers, *rec.unranked)
    assert sum(c is rec.winner for c in rows) == 1
    assert [c.role for c in rec.peers] == ["peer"]
    assert any(c.ended == "not measured" for c in rec.unranked)
    for c in rows:
        assert c.ended in ("finished", "cut early", "ruled out", "failed", "not measured")
        assert c.ended == "finished" or c.reason
        if c.spread_mbps is not None:
            assert c.spread_mbps[0] <= c.median_mbps <= c.spread_mbps[1]
    assert rec.duel is not None and rec.duel.other.verdict is not None
    assert rec.duel.other.verdict.text in ("A faster", "within noise")


def test_slow_candidate_is_cut_early(sharded_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapping on course for 5× the leader's load is cut where the race's stop event
    judges it (``JUDGE_AFTER_S`` past its trickle), ranked with the bound its rate stayed under,
    and said so."""
    fast = Candidate.of("sequential", LoadOptions(workers=2, threads=1, chunk=16 * MiB))
    slow = Candidate.of("mmap", LoadOptions(threads=1, madvise="random"))
    search = on_the_clock(monkeypatch, SlowMappingRace)
    rec = search(sharded_model, budget_s=40.0, pool=[fast, slow])
    assert slow.ended == "cut early" and slow.reason.startswith("cut early")
    # The stop event's cut, not the clock's: JUDGE_AFTER_S after its first TRICKLE arrived.
    trickle_s = TRICKLE * load_result(SLOW_MBPS).bytes / (SLOW_MBPS * 1e6)
    assert f"after {JUDGE_AFTER_S + trickle_s:.2f} s" in slow.reason
    assert not slow.results and slow.stopped_below_mbps == pytest.approx(SLOW_MBPS)
    assert rec.winner is fast and slow in rec.ranked
    assert any("Cut early" in line and slow.spec in line for line in explain(rec))
