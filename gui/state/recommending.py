"""The open model's recommendation: the search while it runs, then its answer, and where its
config file was exported. Qt-free.

Recommending measures; exporting writes. Run ▸ Recommend… searches within a budget and keeps
the answer here; File ▸ Export recommended configuration… writes it, as often and wherever
the user wants, without measuring again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from modelmon.core import Recommendation
from modelmon.gui.state.events import Event

MAX_PROGRESS_LINES = 12  # the latest lines of the search; the whole story is the explanation


@dataclass(frozen=True, slots=True)
class RecommendationShown:
    phase: str  # "none" | "running" | "done" | "stopped"
    budget_s: float = 0.0
    lines: tuple[str, ...] = ()  # the search so far (its latest lines)
    recommendation: Recommendation | None = None
    explanation: tuple[str, ...] = ()
    exported_to: str | None = None  # the config file last written from it
    # The copy the app keeps the moment the answer comes (``system.kept_answer_path``):
    # the line to paste names a file that exists before any export.
    kept_to: str | None = None
    text: str = ""  # why it stopped
    memory_limit: int | None = field(default=None)
    # With the user's loader (Run ▸ Recommend… with your loader): its advice
    # (``LoaderAdvice``), or why it was not measured; the config's [apply] tools, in order.
    advice: Any = None
    loader_note: str = ""
    apply_tools: tuple[str, ...] = ()
    loader: str | None = None  # the loader asked for, while the search runs
    # More than one rank on the node: the ranks search and its answer
    # (``RanksRecommendation``) instead of ``recommendation``.
    ranks: int = 1
    ranks_found: Any = None
    # Over an earlier answer shown again: why the newer search gave none (cancelled, failed).
    note: str = ""


class RecommendationState:
    def __init__(self) -> None:
        self.shown = RecommendationShown("none")
        # While a search runs: the answer shown before it, shown again if it gives none.
        self.previous: RecommendationShown | None = None
        self.changed = Event()  # RecommendationShown

    @property
    def running(self) -> bool:
        return self.shown.phase == "running"

    @property
    def recommendation(self) -> Recommendation | None:
        """The answer to export; None before one, or while a new search runs."""
        return self.shown.recommendation if self.shown.phase == "done" else None

    @property
    def ranks_found(self) -> Any:
        """The ranks answer to export (``RanksRecommendation``); None as ``recommendation``."""
        return self.shown.ranks_found if self.shown.phase == "done" else None

    @property
    def exportable(self) -> bool:
        return self.recommendation is not None or self.ranks_found is not None

    def _show(self, shown: RecommendationShown) -> None:
        self.shown = shown
        self.changed.emit(shown)

    def clear(self) -> None:
        self.previous = None
        self._show(RecommendationShown("none"))

    def restore(self, shown: RecommendationShown | None) -> None:
        self.previous = None
        self._show(shown if shown is not None else RecommendationShown("none"))

    def start(self, budget_s: float, loader: str | None = None, ranks: int = 1) -> None:
        shown = self.shown
        self.previous = replace(shown, note="") if shown.phase == "done" else None
        self._show(RecommendationShown("running", budget_s, loader=loader, ranks=ranks))

    def progress(self, line: str) -> None:
        shown = self.shown
        lines = (*shown.lines, line)[-MAX_PROGRESS_LINES:]
        self._show(replace(shown, lines=lines))

    def done(
        self,
        recommendation: Recommendation,
        explanation: tuple[str, ...],
        memory_limit: int | None = None,
        *,
        advice: Any = None,
        loader_note: str = "",
        apply_tools: tuple[str, ...] = (),
    ) -> None:
        self.previous = None
        self._show(
            RecommendationShown(
                "done",
                self.shown.budget_s,
                recommendation=recommendation,
                explanation=explanation,
                memory_limit=memory_limit,
                advice=advice,
                loader_note=loader_note,
                apply_tools=apply_tools,
                loader=self.shown.loader,
            )
        )

    def ranks_done(self, found: Any, memory_limit: int | None = None) -> None:
        """The ranks search's answer (``RanksRecommendation``)."""
        self.previous = None
        self._show(
            RecommendationShown(
                "done",
                self.shown.budget_s,
                memory_limit=memory_limit,
                ranks=found.ranks,
                ranks_found=found,
            )
        )

    def stopped(self, text: str) -> None:
        """The search gave no answer (``text`` says why): the answer shown before it comes
        back, headed by ``text``, and stays exportable; without one, ``text`` alone."""
        shown, previous, self.previous = self.shown, self.previous, None
        if previous is not None:
            self._show(replace(previous, note=text))
            return
        self._show(
            RecommendationShown(
                "stopped", shown.budget_s, shown.lines, text=text, ranks=shown.ranks
            )
        )

    def kept(self, path: str, answer: object) -> None:
        """The answer ``answer`` (its recommendation or ranks answer) kept at ``path``."""
        shown = self.shown
        if shown.phase == "done" and answer in (shown.recommendation, shown.ranks_found):
            self._show(replace(shown, kept_to=os.path.abspath(path)))

    @property
    def config_path(self) -> str | None:
        """The file the line to paste names: the last export, else the kept copy."""
        return self.shown.exported_to or self.shown.kept_to

    def exported(self, path: str) -> None:
        shown = self.shown
        if shown.phase == "done":
            # Absolute: the line to paste loads it from wherever the user runs it.
            self._show(replace(shown, exported_to=os.path.abspath(path)))
