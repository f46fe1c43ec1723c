"""recommend's plan of the budget: the runs the pick rests on are kept whatever the entries
would spend, and a peer is planned and bounded at what its run really costs (a process
start and imports on top of its load)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.errors import ReadaheadError
from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring import race
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import RaceStop
from modelmon.core.measuring.race import PEER_START_GUESS_S, Race
from modelmon.core.measuring.search import Search, fill, screening_order
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs.start import run_for
from modelmon.core.system.storage import storage_facts

from .records import run as load_result

LOAD_S = 2.0  # every load here: 1 GB at 500 MB/s
OWN_WALL_S = 5.0  # one of modelmon's runs: priming, workers and the load
PEER_READY_S = 14.0  # a peer whose imports are slow (the hdd bench once took 16 s a run)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class ClockedRace(Race):
    """The real race on a clock of its own: modelmon's runs take ``OWN_WALL_S``, a peer's
    ``PEER_READY_S`` of imports and then its load, unless its ``horizon`` comes first."""

    def __init__(self, clock: Clock, budget_s: float) -> None:
        super().__init__(None, clock.now + budget_s, OWN_WALL_S, lambda _: None, None)  # type: ignore[arg-type]
        self.clock = clock
        self.peer_runs_stopped = 0

    def _run_once(
        self, candidate: Candidate, limit: float | None, race: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        if candidate.program is None:
            self.clock.now += OWN_WALL_S
            return load_result(500.0), 0, RaceStop(None, None)
        cost = PEER_READY_S + LOAD_S
        if horizon is not None and self.clock.now + cost > horizon:
            self.clock.now = max(self.clock.now, horizon)
            self.peer_runs_stopped += 1
            stopped = dataclasses.replace(load_result(500.0), status="cancelled", error="stopped")
            return stopped, 0, RaceStop(None, None)
        self.clock.now += cost
        return load_result(500.0), 0, RaceStop(None, None)


def own(workers: int) -> Candidate:
    return Candidate.of("sequential", LoadOptions(workers=workers, threads=1))


def peer() -> Candidate:
    return Candidate(parse_engine("runai"), role="peer")


def test_an_unrun_peer_is_planned_with_its_start_then_at_its_measured_cost() -> None:
    r = Race(None, time.monotonic() + 60, 4.0, lambda _: None, None)  # type: ignore[arg-type]
    a_peer, mine = peer(), own(4)
    assert r.pace(a_peer) == 4.0 + r.overhead_s + PEER_START_GUESS_S  # nothing ran yet
    r.leader, r.overheads = LOAD_S, [3.0]
    assert r.pace(mine) == LOAD_S + 3.0
    assert r.pace(a_peer) == LOAD_S + 3.0 + PEER_START_GUESS_S
    r.peer_overheads["engine: runai"] = [9.0, 11.0]
    assert r.pace(a_peer) == LOAD_S + 10.0  # its own start, measured
    assert r.overheads == [3.0]  # a peer's start never makes modelmon's runs look slower


def test_a_candidate_run_once_is_planned_at_no_less_than_the_usual_overhead() -> None:
    """The search's first run may start without the wait every later run has (the host's
    report pass after a free): its wall time alone would plan its next runs too short, and
    let entrants spend the pairs the pick rests on."""
    r = Race(None, time.monotonic() + 60, 4.0, lambda _: None, None)  # type: ignore[arg-type]
    first = own(4)
    first.results.append(load_result(500))  # a 2 s load
    first.wall_seconds.append(2.5)
    r.overheads = [0.5, 3.0, 3.0]
    assert r.pace(first) == LOAD_S + 3.0
    first.results.append(load_result(500))
    first.wall_seconds.append(5.0)
    assert r.pace(first) == 3.75  # its own runs, once it has two


def test_a_slow_peer_cannot_spend_the_runs_the_pick_rests_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # 45 s after the ceilings, 5 s a run: the duel's two pairs (20 s) are almost half of it.
    # A peer whose imports take 14 s, planned at the leader's pace, would leave the pick on
    # one run; planned at its cost, it does not fit beside the duel and is not started.
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    r = ClockedRace(clock, budget_s=45.0)
    pool = screening_order([own(4), own(1), own(2), own(8)], [peer()])
    best, duel = Search(r, pool, storage_facts(tmp_path)).run()
    assert best is not None and duel is not None
    assert len(best.results) >= EVIDENCE_RUNS and duel.pairs >= 1
    assert r.left() >= 0  # the budget kept
    assert any(c.reason == "not measured: no budget left" for c in pool)


def test_a_peer_that_would_run_into_the_reserve_is_stopped_at_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    r = ClockedRace(clock, budget_s=30.0)
    r.leader, r.overheads = LOAD_S, [3.0]
    slow = peer()
    assert r.run(slow, keep_s=20.0) is None  # 16 s of run, 10 s outside the reserve
    assert r.peer_runs_stopped == 1 and r.left() == pytest.approx(20.0)
    assert slow.ended == "not measured" and "did not start loading" in slow.reason


def test_another_loaders_run_ends_at_its_limit_imports_included(
    sharded_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit counts from the command's start, its interpreter's start and imports
    included, and stops the command there. The child here never gets past its interpreter's
    start (a ``sitecustomize`` that sleeps an hour): a run that waited for it, or counted
    from its first byte, would never end (the suite's timeout fails it); one that ends, saying
    so, was stopped at its limit, whatever the machine's pace."""
    model = open_model(sharded_model)
    engine = parse_engine("safetensors")
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    (frozen / "sitecustomize.py").write_text("import time\n\ntime.sleep(3600)\n")
    with monkeypatch.context() as patch:
        path = os.environ.get("PYTHONPATH")
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(frozen), path])))
        ran = run_for(model, engine, "cold", time_limit_s=0.05, monitor=False).run()
    done = ran.result
    assert done.status == "cancelled" and "time limit" in (done.error or ""), done.error
    assert ran.watch is not None and ran.watch.ended_by == "cancel"  # stopped, not waited for
    assert done.bytes == 0 and ran.own is None  # it never got as far as its harness
    stop = threading.Event()
    assert run_for(model, engine, "cold", cancel=stop).run().result.status == "ok"


def test_a_pick_short_of_its_evidence_runs_past_the_budget_by_the_overrun_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leader that changes in the last pairs leaves the pick on two runs with 2 s left; its
    third run may end past the deadline, by the overrun at most."""

    def pick_on_two_runs(overrun_s: float) -> tuple[ClockedRace, Candidate]:
        clock = Clock()
        monkeypatch.setattr(race, "time", clock)
        r = ClockedRace(clock, 30.0)
        r.evidence_overrun_s = overrun_s
        best = own(4)
        for _ in range(2):
            r.run(best, race=False)  # 5 s each: its pace
        clock.now = r.deadline - 2.0
        return r, best

    r, best = pick_on_two_runs(4.0)
    fill(r, best)
    assert len(best.results) == EVIDENCE_RUNS
    assert r.clock.now == r.deadline + 3.0  # 5 s from 2 s before the deadline: no fourth
    r, best = pick_on_two_runs(2.0)  # a run would end 3 s past, more than it may
    fill(r, best)
    assert len(best.results) == 2 and r.clock.now == r.deadline - 2.0


class LibraryCutRace(ClockedRace):
    """As ``ClockedRace``, but the library is cut early, 3 s in, far behind the leader."""

    def _run_once(
        self, candidate: Candidate, limit: float | None, race: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        if candidate.strategy != "library":
            return super()._run_once(candidate, limit, race, horizon)
        self.clock.now += 3.0
        stop = RaceStop(None, None)
        stop.reason = "cut early: far behind the leader"
        cut = dataclasses.replace(load_result(100.0), status="cancelled", error="cut")
        return cut, 0, stop


def test_a_search_that_found_no_rival_screens_on_with_what_it_kept_for_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On FUSE: the leader, the cut library, and a budget kept for a rival. It finds one
    (the failure mode once, the next candidate, a pair, and the pick on 3 runs) rather than
    spending it on more runs of the leader ("only one candidate completed")."""
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    r = LibraryCutRace(clock, budget_s=32.0)
    r.evidence_overrun_s = 3.2  # recommend's 10 % of the budget
    failure = Candidate.of("mmap-shared-fd", LoadOptions(workers=4), role="failure mode")
    library = Candidate.of("library", LoadOptions(threads=1), role="baseline")
    pool = [own(4), library, failure, own(2), own(8)]
    best, duel = Search(r, pool, storage_facts(tmp_path)).run()
    assert library.ended == "cut early"
    assert failure.results and pool[3].results  # measured once each
    assert pool[4].ended == "not measured"  # a rival found: the rest go to the duel
    assert duel is not None and {id(best), id(duel.other)} == {id(pool[0]), id(pool[3])}
    assert best is not None and duel.pairs >= 1 and len(best.results) >= EVIDENCE_RUNS
    assert r.left() >= -r.evidence_overrun_s


def test_a_run_whose_readahead_another_modelmon_run_holds_fails_and_the_search_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    r = ClockedRace(clock, budget_s=60.0)
    held = Candidate.of("sequential", LoadOptions(workers=4, threads=1, readahead=4096))

    def busy(candidate: Candidate, limit: float | None, race_: bool, horizon: object) -> Any:
        raise ReadaheadError("readahead of vda not changed: another modelmon run is using it")

    monkeypatch.setattr(r, "_run_once", busy)
    assert r.run(held) is None
    assert held.ended == "failed" and held.reason.endswith("another modelmon run is using it")


class _RatedRace(ClockedRace):
    """As ``ClockedRace``, each run loading at the next rate of its candidate's list."""

    def __init__(self, clock: Clock, rates: dict[int, list[float]]) -> None:
        super().__init__(clock, budget_s=600.0)
        self.rates = rates

    def _run_once(
        self, candidate: Candidate, limit: float | None, race: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        self.clock.now += OWN_WALL_S
        mbps = self.rates[candidate.options.workers].pop(0)
        return load_result(mbps), 0, RaceStop(None, None)


def test_the_leader_is_the_fastest_median_not_one_outlier_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walk 22: entrants were cut against the leader's one outlier run (1547 MB/s of runs
    534-1547, median 934): a cut at twice that run's time stops runs within the leader's own
    spread. The leader is the fastest candidate's median load time."""
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    r = _RatedRace(clock, {4: [1547.0, 534.0, 934.0], 8: [700.0]})
    leader = own(4)
    r.run(leader)
    assert r.leader == pytest.approx(1e9 / 1547e6)  # one run: that run
    r.run(leader)
    r.run(leader)
    assert r.leader == pytest.approx(1e9 / 934e6)  # the median of its three
    r.run(own(8))
    assert r.leader == pytest.approx(1e9 / 934e6)  # 700 MB/s: not faster than that
