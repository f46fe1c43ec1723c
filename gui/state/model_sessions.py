"""What the window measured on each model it opened in this session. Qt-free.

Switching models must not lose results: each model keeps its runs, its last A/B, its one
set of ceilings and its recommendation, and gets them back when it is opened again. The
ceilings are the model's only set: "Measure ceilings" and a recommendation both update it
(by name), and a recommendation starts from it rather than measuring its own; they are also
kept across sessions (``ceilings_state``).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field

from modelmon.core import ABResult, Ceiling, Ceilings
from modelmon.core.output import counted, median_words
from modelmon.gui.state.formatting import CEILING_NAMES, rate_text
from modelmon.gui.state.recommending import RecommendationShown
from modelmon.gui.state.records import RunRecord


@dataclass
class ModelResults:
    """One model's results in this session."""

    records: list[RunRecord] = field(default_factory=list)
    ab_result: ABResult | None = None
    ab_session: str = ""  # the name of the A/B that reached ``ab_result`` ("A/B 2 at 14:02")
    ab_started: int = 0  # A/Bs started on it: the next one is numbered after them
    ceilings: Ceilings | None = None
    recommendation: RecommendationShown | None = None  # its last search's answer
    # The runs its plots showed (``Workbench.shown_runs``, oldest first): drawn again when
    # it is opened again, as they were (of ``records``: empty when they are).
    shown_runs: list[RunRecord] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return (
            not self.records
            and self.ab_result is None
            and self.ab_started == 0
            and self.ceilings is None
            and self.recommendation is None
        )


class ModelSessions:
    """Results by model path; the window stashes the current model's before switching."""

    def __init__(self) -> None:
        self._by_path: dict[str, ModelResults] = {}

    def stash(self, path: str, results: ModelResults) -> None:
        if results.empty:
            self._by_path.pop(path, None)
        else:
            self._by_path[path] = results

    def take(self, path: str) -> ModelResults:
        """The results kept for ``path`` (empty if none); the window holds them from now on."""
        return self._by_path.pop(path, None) or ModelResults()

    def paths(self) -> list[str]:
        return list(self._by_path)


def with_ceiling(ceilings: Ceilings | None, model: str, ceiling: Ceiling) -> Ceilings:
    """``ceilings`` with ``ceiling`` added, or in place of the one of the same name."""
    known = ceilings if ceilings is not None else Ceilings(model, ())
    return known.merged(Ceilings(model, (ceiling,)))


def age_text(measured_at: float, now: float | None = None) -> str:
    """ "today", "yesterday", "3 days ago": how old a measurement is, in calendar days."""
    then_day = time.localtime(measured_at)
    now_day = time.localtime(time.time() if now is None else now)
    days = (
        datetime.date(now_day.tm_year, now_day.tm_mon, now_day.tm_mday)
        - datetime.date(then_day.tm_year, then_day.tm_mon, then_day.tm_mday)
    ).days
    if days <= 0:
        return "today"
    return "yesterday" if days == 1 else f"{days} days ago"


def measured_when(ceilings: Ceilings, now: float | None = None) -> str:
    """When the ceilings were measured: "measured 14:02", "measured 14:02–14:05", or with
    their age when that was another day: "measured 3 days ago, YYYY-MM-DD 14:02"."""
    times = sorted(c.measured_at for c in ceilings.items if c.measured_at > 0)
    if not times:
        return "measured at an unknown time"
    first, last = (time.strftime("%H:%M", time.localtime(t)) for t in (times[0], times[-1]))
    when = first if first == last else f"{first}–{last}"
    age = age_text(times[0], now)
    if age == "today":
        return f"measured {when}"
    day = time.strftime("%Y-%m-%d", time.localtime(times[0]))
    return f"measured {age}, {day} {when}"


def ceiling_lines(ceilings: Ceilings) -> list[str]:
    """One line per ceiling: its figure, how it was measured, how many runs, when."""
    lines = []
    for c in ceilings.items:
        runs = len(c.runs)
        clock = time.strftime("%H:%M:%S", time.localtime(c.measured_at)) if c.measured_at else "?"
        lines.append(
            f"{CEILING_NAMES.get(c.name, c.name)}: {rate_text(c.mbps)} — {c.spec}; "
            f"{median_words(counted(runs, 'run'), runs)}, at {clock}"
        )
    return lines
