"""The user's loader's rounds planned from its first run: the rounds its answer rests on are
reserved at the loader's measured pace before modelmon's search takes the rest of the budget,
and a budget that cannot hold them is said before the search starts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.errors import BudgetWarning
from modelmon.core.limits import EVIDENCE_RUNS
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
    rounds = LoaderRounds(model, model.path, time.monotonic() + 60, lambda _: None, None)
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
    seconds, runs = plan.rest_of_rounds(best_s=4.0)
    # Each setting once and modelmon's best once; then the loader, the leading setting and
    # modelmon's best to EVIDENCE_RUNS each. The readahead values wait for spare budget.
    assert runs == 2 + 1 + (EVIDENCE_RUNS - 1) * 3
    assert seconds == 2 * LOADER_S + 4.0 + (EVIDENCE_RUNS - 1) * (2 * LOADER_S + 4.0)
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


def test_a_budget_the_rounds_alone_outgrow_is_said_before_the_search_starts(
    model: Model, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_of(model)  # the rounds: 2×10 + 10 + 2×(2×10 + 10) = 90 s
    fakes = Recorded(model, plan, monkeypatch)
    with pytest.warns(BudgetWarning, match="^the budget cannot be kept") as warned:
        advice.recommend_with_loader(
            model, 60.0, engine="safetensors", progress=fakes.said.append, started=time.monotonic()
        )
    warning, started = fakes.said
    assert str(warned[0].message) == warning  # a line of its own, terminal or not
    assert started == "search starts"
    assert warning.startswith(
        "the budget cannot be kept: a run of your loader takes about 10 s (its start and "
        "load), and the rounds its answer rests on need 9 more runs (each change once, "
        "modelmon's best, then 3 cold runs of each finalist), about 90 s, beside modelmon's "
        "search (2 s at the least): this recommendation will take about 92 s, 32 s past the "
        "budget"
    )
    assert fakes.searches[0]["budget_s"] < 0.01  # its first load only
