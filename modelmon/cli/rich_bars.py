"""The terminal's progress bars (rich): imported by ``progress`` only when stderr is a tty."""

from __future__ import annotations

import math
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.progress_bar import ProgressBar
from rich.text import Text


class BudgetBarColumn(ProgressColumn):
    """A time budget: the bar fills with the time spent, whatever the work reports."""

    def render(self, task: Task) -> ProgressBar:
        total = task.total or 0.0
        return ProgressBar(total=total, completed=min(task.elapsed or 0.0, total), width=40)


class BudgetLeftColumn(ProgressColumn):
    """What is left of the budget, then how far past it the search is: the ceilings and a
    first load always run, and the pick's runs may overrun, so the budget is no promise of
    an end (an "ETA" would be one)."""

    def render(self, task: Task) -> Text:
        total = task.total or 0.0
        left = total - (task.elapsed or 0.0)
        if left <= 0:
            return Text(f"{-left:.0f} s past the {total:.0f} s budget")
        return Text(f"{math.ceil(left)} s of the {total:.0f} s budget left")


def columns(kind: str) -> tuple[ProgressColumn, ...]:
    """The columns for a task of ``kind``: "bytes", "runs" or "budget"."""
    description = TextColumn("{task.description}")
    if kind == "budget":
        return (description, BudgetBarColumn(), BudgetLeftColumn())
    amount: list[ProgressColumn] = (
        [DownloadColumn(), TransferSpeedColumn()] if kind == "bytes" else [MofNCompleteColumn()]
    )
    return (
        description,
        BarColumn(),
        TaskProgressColumn(),
        *amount,
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )


class RichBars:
    """rich's Progress on a console writing to ``stream``; safe to call from any thread."""

    def __init__(self, stream: TextIO) -> None:
        self.console = Console(file=stream)
        # stdout is left alone: what a verb prints there is its result, never the bars' business.
        # What else writes to stderr (a warning) is printed above the bars, never glued to them.
        self.progress = Progress(console=self.console, redirect_stdout=False, redirect_stderr=True)

    def start(self) -> None:
        self.progress.start()

    def stop(self) -> None:
        self.progress.stop()

    def _add(self, kind: str, description: str, total: float) -> int:
        # A verb shows one kind of task: its columns are the Progress's.
        self.progress.columns = columns(kind)
        return int(self.progress.add_task(description, total=total))

    def bytes_task(self, description: str, total: int) -> int:
        return self._add("bytes", description, max(total, 1))

    def runs_task(self, description: str, total: int) -> int:
        return self._add("runs", description, max(total, 1))

    def budget_task(self, description: str, seconds: float) -> int:
        return self._add("budget", description, max(seconds, 1.0))

    def advance(self, task: int, amount: float) -> None:
        self.progress.advance(TaskID(task), amount)

    def describe(self, task: int, text: str) -> None:
        self.progress.update(TaskID(task), description=text)

    def log(self, text: str) -> None:
        """A line above the bars (they are redrawn below it)."""
        self.console.print(text, markup=False, highlight=False)
