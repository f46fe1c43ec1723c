"""What the window measured on each model it opened in this session. Qt-free.

Switching models must not lose results: each model keeps its runs, its last A/B and its one
set of ceilings, and gets them back when it is opened again. The ceilings are the model's
only set: "Measure ceilings" and a recommendation both update it (by name), and a
recommendation starts from it rather than measuring its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from modelmon.core import ABResult, Ceiling, Ceilings
from modelmon.gui.state.formatting import CEILING_NAMES, rate_text
from modelmon.gui.state.records import RunRecord


@dataclass
class ModelResults:
    """One model's results in this session."""

    records: list[RunRecord] = field(default_factory=list)
    ab_result: ABResult | None = None
    ceilings: Ceilings | None = None

    @property
    def empty(self) -> bool:
        return not self.records and self.ab_result is None and self.ceilings is None


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


def measured_when(ceilings: Ceilings, now: float | None = None) -> str:
    """When the ceilings were measured: "measured 14:02" or "measured 14:02–14:05"."""
    times = sorted(c.measured_at for c in ceilings.items if c.measured_at > 0)
    if not times:
        return "measured at an unknown time"
    first, last = (time.strftime("%H:%M", time.localtime(t)) for t in (times[0], times[-1]))
    day = time.strftime("%Y-%m-%d", time.localtime(times[0]))
    today = time.strftime("%Y-%m-%d", time.localtime(now if now is not None else time.time()))
    when = first if first == last else f"{first}–{last}"
    return f"measured {when}" + ("" if day == today else f" on {day}")


def ceiling_lines(ceilings: Ceilings) -> list[str]:
    """One line per ceiling: its figure, how it was measured, how many runs, when."""
    lines = []
    for c in ceilings.items:
        runs = len(c.runs)
        clock = time.strftime("%H:%M:%S", time.localtime(c.measured_at)) if c.measured_at else "?"
        lines.append(
            f"{CEILING_NAMES.get(c.name, c.name)}: {rate_text(c.mbps)} — {c.spec}; "
            f"median of {runs} run{'s' if runs != 1 else ''}, at {clock}"
        )
    return lines
