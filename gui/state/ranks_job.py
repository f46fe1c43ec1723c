"""The job of a ranks recommendation (Run ▸ Recommend… with more than one rank): how N ranks
of this node get their weights fastest while holding under the window's memory limit.
Qt-free. It measures and writes nothing: its answer is exported afterwards."""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.core import Model, RanksRecommendation
from modelmon.core.errors import LoadError
from modelmon.gui.state.jobs import Job, JobProgress


@dataclass(frozen=True, slots=True)
class RanksRecommended:
    found: RanksRecommendation


class RanksRecommendJob(Job):
    """``core.recommend_ranks`` within a budget, under the window's memory limit (which
    ``Workbench`` sets on every job before it starts)."""

    kind = "recommend"

    def __init__(self, model: Model, ranks: int, budget_s: float) -> None:
        super().__init__(model)
        self.ranks, self.budget_s = ranks, budget_s

    def execute(self) -> RanksRecommended:
        from modelmon.core import recommend_ranks

        found = recommend_ranks(
            self.model,
            self.ranks,
            memory_limit=self.memory_limit,
            budget_s=self.budget_s,
            cancel=self.cancel_event,
            on_progress=lambda text: self.report(JobProgress(text)),
        )
        if self.cancelled:
            raise LoadError("recommendation cancelled")
        return RanksRecommended(found)
