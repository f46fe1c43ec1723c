"""The open model's finished runs (the results table's rows, the exports' runs), and the
progress strip's line. Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.gui.state.events import Event
from modelmon.gui.state.records import RunRecord


class RunList:
    def __init__(self) -> None:
        self.records: list[RunRecord] = []
        self.added = Event()  # RunRecord
        self.reset = Event()  # list[RunRecord]: the list was replaced (another model)

    def add(self, record: RunRecord) -> None:
        self.records.append(record)
        self.added.emit(record)

    def show(self, records: list[RunRecord]) -> None:
        """Another model is open: its runs, in place of these."""
        self.records = list(records)
        self.reset.emit(list(self.records))

    def __len__(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class StatusLine:
    """What the progress strip says between loads' live updates: a job's line and how far
    it got (``fraction``; None: unknown), or how the last job ended (``ended``)."""

    text: str
    fraction: float | None = None
    ended: bool = False
    # Another model is open: nothing of the last run stays beside the line (its spec).
    new_model: bool = False


# No job: the line says where a first-time user starts, as the menus would.
IDLE = "idle: Recommend… (Ctrl+E) finds what to change here; Run A loads it once"


class JobStatus:
    def __init__(self) -> None:
        self.line = StatusLine(IDLE, ended=True)
        self.changed = Event()  # StatusLine

    def show(self, text: str, fraction: float | None = None) -> None:
        self.line = StatusLine(text, fraction)
        self.changed.emit(self.line)

    def ended(self, text: str) -> None:
        self.line = StatusLine(text, ended=True)
        self.changed.emit(self.line)

    def idle(self) -> None:
        """Another model is open: no job, and no word of the last model's runs."""
        self.line = StatusLine(IDLE, ended=True, new_model=True)
        self.changed.emit(self.line)
