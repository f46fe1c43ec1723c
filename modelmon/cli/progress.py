"""Progress with an ETA for the long verbs (load, bench, recommend), on stderr.

Drawn (by rich, see ``rich_bars``) only when stderr is a terminal: piped or redirected,
nothing is drawn. stdout carries the result alone either way. ``progress_bars()`` gives the
same small API in both cases, so the verbs don't branch; rich is imported only when bars
are drawn, so ``modelmon --version`` stays fast.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, TextIO


class Bars(Protocol):
    """One kind of task per verb: bytes (a load), runs (an A/B), a time budget (recommend)."""

    def bytes_task(self, description: str, total: int) -> int: ...
    def runs_task(self, description: str, total: int) -> int: ...
    def budget_task(self, description: str, seconds: float) -> int: ...
    def advance(self, task: int, amount: float) -> None: ...
    def describe(self, task: int, text: str) -> None: ...
    def log(self, text: str) -> None: ...


class QuietBars:
    """Not a terminal: no bars, no lines."""

    def bytes_task(self, description: str, total: int) -> int:
        return 0

    def runs_task(self, description: str, total: int) -> int:
        return 0

    def budget_task(self, description: str, seconds: float) -> int:
        return 0

    def advance(self, task: int, amount: float) -> None:
        pass

    def describe(self, task: int, text: str) -> None:
        pass

    def log(self, text: str) -> None:
        pass


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed, or replaced by an object without isatty
        return False


@contextmanager
def progress_bars(stream: TextIO | None = None) -> Iterator[Bars]:
    """Bars on ``stream`` (default stderr) when it is a terminal, else bars that draw nothing."""
    stream = stream or sys.stderr
    if not is_terminal(stream):
        yield QuietBars()
        return
    from modelmon.cli.rich_bars import RichBars

    bars = RichBars(stream)
    bars.start()
    try:
        yield bars
    finally:
        bars.stop()
