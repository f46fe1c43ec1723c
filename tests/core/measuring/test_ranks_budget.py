"""recommend --ranks keeps its budget's promise: where one run of each way cannot fit, it says
so as soon as round 1's runs show it, as a ``BudgetWarning`` (the CLI's "warning: the budget
cannot be kept" line), and not where the round fits."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from modelmon.core.errors import BUDGET_NOT_KEPT, BudgetWarning
from modelmon.core.measuring import ranks_search
from modelmon.core.measuring.ranks_records import RankResult, RanksResult
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.system.cache import CacheState


class Clock:
    """Time that passes only by the runs: each takes ``run_s``."""

    def __init__(self, run_s: float) -> None:
        self.now, self.run_s, self.runs = 1000.0, run_s, 0

    def monotonic(self) -> float:
        return self.now

    def run(self, model: Any, ranks: int, way: Any, limit: Any, stop: Any) -> RanksResult:
        self.runs += 1
        self.now += self.run_s
        state = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
        rows = tuple(RankResult(r, 1, 0.0, 0.5, "ok", 1, 1, None) for r in range(ranks))
        return RanksResult("ok", way.strategy, way.options, "/m", way.mode, state, rows, 1)


@pytest.fixture
def model(tmp_path: Path) -> Any:
    return open_model(write_safetensors_model(tmp_path, layers=2, hidden=64, vocab=128))


def _search(monkeypatch: pytest.MonkeyPatch, model: Any, run_s: float, budget_s: float) -> Clock:
    clock = Clock(run_s)
    monkeypatch.setattr(ranks_search, "_run", clock.run)
    monkeypatch.setattr(ranks_search.time, "monotonic", clock.monotonic)
    ranks_search.recommend_ranks(model, 2, budget_s=budget_s, options=LoadOptions())
    return clock


def test_a_round_past_the_budget_is_said_after_its_first_run(
    monkeypatch: pytest.MonkeyPatch, model: Any
) -> None:
    lines: list[str] = []
    clock = Clock(4.0)
    monkeypatch.setattr(ranks_search, "_run", clock.run)
    monkeypatch.setattr(ranks_search.time, "monotonic", clock.monotonic)
    with pytest.warns(BudgetWarning) as caught:
        ranks_search.recommend_ranks(model, 2, budget_s=10.0, on_progress=lines.append)
    (warning,) = caught
    text = str(warning.message)
    assert text.startswith(f"{BUDGET_NOT_KEPT}: one run of each of the ")
    assert "past the budget of 10 s" in text
    assert lines.index(text) == 1  # after round 1's first run, before its second
    assert clock.runs >= 2


def test_a_round_that_fits_says_nothing(monkeypatch: pytest.MonkeyPatch, model: Any) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", BudgetWarning)
        clock = _search(monkeypatch, model, run_s=1.0, budget_s=600.0)
    assert clock.runs > 0
