"""The user's loader's rounds planned from its first run: the rounds its answer rests on are
reserved at the loader's measured pace before modelmon's search takes the rest of the budget,
and a budget that cannot hold them is said before the search starts."""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.errors import BudgetWarning
from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring import advice
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.measuring.loader_plan import LoaderPlan, modelmon_pace
from modelmon.core.measuring.loader_rounds import Entry, LoaderRounds
from modelmon.core.measuring.recommend import BudgetUse, Recommendation
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model

from .records import candidate, engine_run

LOADER_S = 10.0  # one run of the loader as it is: its interpreter, imports and load


def plan_of(model: Model, runs_s: float = LOADER_S) -> LoaderPlan:
    """The safetensors engine after its first run: two of its settings to try (each against
    it), and the device's readahead, tried only where the budget allows."""
    deadline = time.monotonic() + 60
    rounds = LoaderRounds(model, model.path, deadline, lambda _: None, None, overrun_s=6.0)
    as_is = Entry(engine_run("safetensors", 500.0), essential=True)
    rounds.walls[as_is.spec] = [runs_s]
    rounds.warmed.add("engine: safetensors")
    changes = [
        Entry(Candidate(parse_engine(f"safetensors backend={b}")), as_is, essential=True)
        for b in ("read", "pread")
    ]
    changes.append(Entry(Candidate(parse_engine("safetensors").with_readahead(4096)), as_is))
    measured = parse_engine("safetensors")
    return LoaderPlan(rounds, as_is, measured, None, None, "given", changes, None)


@pytest.fixture
def model(sharded_model: Path) -> Model:
    return open_model(sharded_model)


def test_the_rest_of_the_rounds_is_counted_at_the_loaders_pace(model: Model) -> None:
    plan = plan_of(model)
    rounds = plan.rest_of_rounds(best_s=4.0)
    # Each setting once and modelmon's best once; then the loader, the leading setting and
    # modelmon's best to EVIDENCE_RUNS each. The readahead values wait for spare budget.
    assert rounds.runs == 2 + 1 + (EVIDENCE_RUNS - 1) * 3
    assert rounds.screen_s == 2 * LOADER_S + 4.0
    assert rounds.seconds == 2 * LOADER_S + 4.0 + (EVIDENCE_RUNS - 1) * (2 * LOADER_S + 4.0)
    # What a budget holds of each finalist's runs: round 1's always, then whole rounds.
    assert [rounds.runs_held(s) for s in (0.0, 47.9, 48.0, 71.9, 72.0, 999.0)] == [
        1, 1, 2, 2, 3, 3
    ]  # fmt: skip
    # modelmon's best is planned at the loader's pace at least: its runs there pay for
    # fresh memory and workers as the loader's pay for an interpreter.
    assert modelmon_pace(model, 2.0, plan) == LOADER_S
    assert modelmon_pace(model, 12.0, plan) == 12.0


class Recorded:
    """``recommend``, ``search_ceilings``, ``first_round`` and ``advise`` of ``advice``
    replaced by fakes that record what they were asked and when."""

    def __init__(self, model: Model, plan: LoaderPlan, monkeypatch: pytest.MonkeyPatch) -> None:
        self.said: list[str] = []
        self.searches: list[dict[str, Any]] = []
        parallel = Ceiling("parallel_read", 1000.0, (1000.0,), "plain", True, wall_s=2.0)

        def search(model_: Model, budget_s: float, **kwargs: Any) -> Recommendation:
            self.said.append("search starts")
            self.searches.append({"budget_s": budget_s, **kwargs})
            best = candidate("sequential", 900.0, workers=4)
            return Recommendation(
                model=model,
                winner=best,
                ranked=(best,),
                ceilings=Ceilings(model.path, (parallel,)),
                usable_ram=10**10,
                budget=BudgetUse(given_s=budget_s, elapsed_s=1.0),
            )

        monkeypatch.setattr(advice, "recommend", search)
        monkeypatch.setattr(advice, "search_ceilings", lambda *_: Ceilings(model.path, (parallel,)))
        monkeypatch.setattr(advice, "first_round", lambda *_, **__: plan)
        monkeypatch.setattr(advice, "advise", lambda *_: None)


def test_the_search_has_what_the_rounds_leave_of_the_budget(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(model, runs_s=4.0)  # the rounds: 2×4 + 4 + 2×(2×4 + 4) = 36 s
    fakes = Recorded(model, plan, monkeypatch)
    started = time.monotonic()
    done = advice.recommend_with_loader(
        model, 60.0, engine="safetensors", progress=fakes.said.append, started=started
    )
    (search,) = fakes.searches
    assert search["budget_s"] == pytest.approx(60.0 - 36.0, abs=1.0)  # not half: 24 s
    assert search["baseline"] is False and search["planned"] is True
    assert fakes.said == ["search starts"]  # the budget holds it all: nothing to say
    # The record's budget is the user's, not the search's share of it.
    assert done.recommendation.budget.given_s == 60.0


def test_a_budget_that_holds_part_of_the_evidence_says_how_much_before_the_search(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds at 10 s a run: round 1's rest 30 s, each evidence round 30 s. The search
    holds its first load alone, at modelmon's best's pace in the rounds (10 s), and that load
    is its run of round 1 (whose rest is then 20 s); 60 s and its 6 s of overrun hold it,
    round 1 and one evidence round: said before the search, a line of progress (the budget
    is kept), not a warning."""
    plan = plan_of(model)
    fakes = Recorded(model, plan, monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        advice.recommend_with_loader(
            model, 60.0, engine="safetensors", progress=fakes.said.append, started=time.monotonic()
        )
    said, started = fakes.said
    assert started == "search starts"
    assert said == (
        "the budget holds 2 cold runs of each finalist, not 3: a run of your loader takes "
        "about 10 s (its start and load), and the answer will say it is not certain; a "
        "budget of about 82 s holds 3"
    )
    assert fakes.searches[0]["budget_s"] < 0.01  # its first load only
    assert plan.rounds.overrun_s == pytest.approx(6.0)


def test_a_budget_round_one_outgrows_is_said_before_the_search_starts(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(model)  # round 1's rest: 2×10 s beside the search's 10 s; 25 s + 2.5 s
    fakes = Recorded(model, plan, monkeypatch)
    with pytest.warns(BudgetWarning, match="^the budget cannot be kept") as warned:
        advice.recommend_with_loader(
            model, 25.0, engine="safetensors", progress=fakes.said.append, started=time.monotonic()
        )
    warning, started = fakes.said
    assert str(warned[0].message) == warning  # a line of its own, terminal or not
    assert started == "search starts"
    assert warning == (
        "the budget cannot be kept: a run of your loader takes about 10 s (its start and "
        "load), and round 1 of the rounds its answer rests on needs 2 more runs (each change "
        "once), about 20 s, beside modelmon's search (10 s at the least): this "
        "recommendation will take about 30 s, 5 s past the budget, and its answer will rest "
        "on 1 cold run of each"
    )
    assert fakes.searches[0]["budget_s"] < 0.01  # its first load only


def test_a_search_of_its_first_load_alone_is_modelmons_best_in_round_one(model: Model) -> None:
    """A search that held its first load alone ran modelmon's best cold right after the
    loader's first run: the rounds count that run as its round-1 run, at the search's wall,
    and do not run it again before the evidence."""
    plan = plan_of(model, runs_s=4.0)
    searched = candidate("sequential", 900.0, workers=4)
    rec = Recommendation(
        model=model,
        winner=searched,
        ranked=(searched,),
        ceilings=Ceilings(model.path, ()),
        usable_ram=10**10,
        budget=BudgetUse(given_s=1.0, elapsed_s=1.0),
    )
    ran: list[str] = []

    def run(entry: Entry, leader_s: float | None = None) -> LoadResult:
        ran.append(entry.spec)
        result = engine_run("safetensors", 500.0).results[0]
        entry.candidate.results.append(result)
        entry.by_round[plan.rounds.round] = result
        entry.candidate.ended = "finished"
        return result

    plan.rounds.run = run  # type: ignore[method-assign]
    plan.rounds.deadline = time.monotonic() - 600  # spent: round 1 only, no evidence
    plan.rounds.overrun_s = 0.0
    done = advice.advise(plan, rec, search_wall_s=7.0)
    assert searched.spec not in ran  # the changes ran; modelmon's best was not run again
    assert done.modelmon.results == searched.results
    assert plan.rounds.walls[searched.spec] == [7.0]
    # Without the search's wall (a search that ran more), round 1 runs it.
    again = plan_of(model, runs_s=4.0)
    again.rounds.run = run  # type: ignore[method-assign]
    again.rounds.deadline, again.rounds.overrun_s = time.monotonic() - 600, 0.0
    advice.advise(again, rec)
    assert ran[-1] == searched.spec
