"""The baseline (what a user runs who changes nothing) is measured in every recommendation: it
enters right after the first run whatever the budget, uncut by the leader's pace, and the
answer states its gain against it, or the bound its rate stayed under."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from modelmon.core.errors import BudgetWarning
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring import race
from modelmon.core.measuring import recommend as recommend_module
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.measuring.cutoff import CUT_FACTOR, RaceStop
from modelmon.core.measuring.recommend import NEEDED_CEILINGS, recommend, short_budget
from modelmon.core.measuring.search import Search
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.answer import answer as answer_of
from modelmon.core.output.answer import baseline_of
from modelmon.core.system.storage import storage_facts

from .records import run as load_result
from .test_recommend_budget import LOAD_S, OWN_WALL_S, Clock, ClockedRace

LIBRARY_MBPS = 200.0  # 1 GB in 5 s: 2.5× the leader's load, past the cut's 2×
LIBRARY_LOAD_S = 1e9 / LIBRARY_MBPS / 1e6
OVERHEAD_S = OWN_WALL_S - LOAD_S


class SlowLibraryRace(ClockedRace):
    """As ``ClockedRace``, and the library loads at ``LIBRARY_MBPS``: a racing run of it is
    cut on its course (slower than ``CUT_FACTOR`` × the leader); otherwise it completes when
    its time limit allows its load, and is stopped at the limit when not."""

    def __init__(self, clock: Clock, budget_s: float) -> None:
        super().__init__(clock, budget_s)
        self.limits: list[float | None] = []

    def _run_once(
        self, candidate: Candidate, limit: float | None, race: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        if candidate.strategy != "library":
            return super()._run_once(candidate, limit, race, horizon)
        self.limits.append(limit)
        stop = RaceStop(None, None)
        if race and self.leader is not None:  # judged on its course, 1.5 s in
            self.clock.now += 1.5 + OVERHEAD_S
            stop.reason, stop.cut_at = "cut early: on course for too long", (1.5, 3 * 10**8)
            cut = dataclasses.replace(load_result(LIBRARY_MBPS), status="cancelled", error="cut")
            return cut, 3 * 10**8, stop
        if limit is not None and limit < LIBRARY_LOAD_S:
            self.clock.now += limit + OVERHEAD_S
            loaded = int(limit * LIBRARY_MBPS * 1e6)
            stopped = dataclasses.replace(
                load_result(LIBRARY_MBPS), status="cancelled", error="time limit"
            )
            return stopped, loaded, stop
        self.clock.now += LIBRARY_LOAD_S + OVERHEAD_S
        return load_result(LIBRARY_MBPS), 0, stop


def grid() -> list[Candidate]:
    own = [Candidate.of("sequential", LoadOptions(workers=w, threads=1)) for w in (4, 2, 8, 1)]
    library = Candidate.of("library", LoadOptions(threads=1), role="baseline")
    return [own[0], library, *own[1:]]


def test_a_short_budget_measures_the_baseline_whole_right_after_the_first_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """20 s: after the first run, the library would not fit beside the duel it may lead to,
    and a racing run of it would be cut at twice the leader's load. Reserved, it runs second
    and whole: the answer's gain is a measured one."""
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    order = grid()
    r = SlowLibraryRace(clock, budget_s=20.0)
    r.evidence_overrun_s = 2.0
    Search(r, order, storage_facts(tmp_path), reserve=True).run()
    library = order[1]
    assert [c.median_mbps for c in (library,)] == [LIBRARY_MBPS] and len(library.results) == 1
    assert r.limits and all(limit is None or limit >= LIBRARY_LOAD_S for limit in r.limits)

    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    unreserved = grid()
    Search(SlowLibraryRace(clock, 20.0), unreserved, storage_facts(tmp_path)).run()
    assert not unreserved[1].results  # what every recommendation did before: no gain to state


def test_a_baseline_the_budget_cannot_hold_is_given_the_clocks_cut_and_stated_as_a_bound(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A budget the first run spent: the baseline is still run, for the time any racing run
    is given (``CUT_FACTOR`` × the leader's load), and the bound its rate stayed under is
    what the answer states."""
    clock = Clock()
    monkeypatch.setattr(race, "time", clock)
    order = grid()
    r = SlowLibraryRace(clock, budget_s=6.0)
    Search(r, order, storage_facts(tmp_path), reserve=True).run()
    library = order[1]
    assert r.limits == [pytest.approx(CUT_FACTOR * LOAD_S)]
    assert not library.results and library.stopped_below_mbps == pytest.approx(LIBRARY_MBPS)
    # Walk 25: "(2× the leader's load time)" read as the leader's cut the docs say it is
    # spared; the budget ended it, and the clock's cut is what it was given even so.
    assert library.reason.endswith(
        f"(the end of the budget; a baseline is given {CUT_FACTOR:g}× the leader's load "
        "time even so)"
    ), library.reason


def test_every_real_recommendation_states_a_gain_over_the_baseline(sharded_model: Path) -> None:
    """1 s after the ceilings: before, the first load spent it and the answer said the
    library's own read "was not measured to compare"."""
    model = open_model(sharded_model)
    known = measure_ceilings(model, NEEDED_CEILINGS, repeats=1, workers=2)
    said: list[str] = []
    rec = recommend(model, 1.0, workers=2, peers=False, ceilings=known, progress=said.append)
    baseline = baseline_of(rec)
    assert baseline is not None and baseline.role == "baseline"
    assert baseline.results or baseline.stopped_below_mbps
    assert any(line.startswith(f"{baseline.spec}: the baseline") for line in said)
    found = answer_of(rec, "/x/m.toml")
    assert "not measured" not in found.gain
    gain = r"(At least )?\d+\.\d\d× the library's own read"
    assert re.match(gain, found.gain) or found.action.startswith("Keep"), found.gain


def test_a_budget_that_cannot_hold_the_loads_every_answer_needs_is_said_before() -> None:
    assert short_budget(60.0, 5.0, 6.0, 2, 120.0) == ""
    assert short_budget(12.0, 5.0, 1.0, 2, 60.0) == (
        "12 s of the budget are left after the ceilings: a first load and the baseline's fit, "
        "but the pick may rest on fewer than 3 runs (about 5 s each); a budget of 70 s or more "
        "holds them"
    )
    assert short_budget(4.0, 5.0, 6.0, 2, 60.0).startswith(
        "4 s of the budget are left after the ceilings: a first load and the baseline's end up "
        "to 6 s past it, but the pick may rest on fewer than 3 runs"
    )
    assert short_budget(3.0, 5.0, 1.0, 2, 30.0) == (
        "the budget cannot be kept: 3 s of the budget are left after the ceilings, and the "
        "loads every answer rests on (a first load and the baseline's) take about 10 s at "
        "the ceilings' pace: the search will end about 7 s past it"
    )
    # Walk 25 (--budget 5 on 2.3 GB): the ceilings took 26 s; "0 s of the budget are left
    # ... the search will end about 8 s past it" ended 31 s past it. What the ceilings
    # already overran is counted and said.
    assert short_budget(-21.0, 4.0, 1.0, 2, 5.0) == (
        "the budget cannot be kept: the ceilings took it and 21 s more, and the loads every "
        "answer rests on (a first load and the baseline's) take about 8 s at the ceilings' "
        "pace: the search will end about 29 s past it"
    )


def test_a_budget_that_cannot_be_kept_is_a_warning_before_the_search(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Said as a warning too, not only as progress: a command whose standard error is not a
    terminal draws no progress, yet is told before the search that its budget will not hold
    (here: loads planned at 10 s each, from a budget of 5 s)."""
    model = open_model(sharded_model)
    known = measure_ceilings(model, NEEDED_CEILINGS, repeats=1, workers=2)
    monkeypatch.setattr(recommend_module, "first_pace", lambda model, ceilings: 10.0)
    said: list[str] = []
    with pytest.warns(BudgetWarning, match=r"^the budget cannot be kept: \d+ s of the budget"):
        recommend(model, 5.0, workers=2, peers=False, ceilings=known, progress=said.append)
    assert any(line.startswith("the budget cannot be kept") for line in said)  # the app's
