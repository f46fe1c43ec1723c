"""The processes there are to watch (File ▸ Watch a process…): listed off the state's thread
(a machine may run thousands), filtered as the user types. Qt-free."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import psutil

from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.tasks import Task

LIST_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class ProcessEntry:
    pid: int
    command: str  # its command line, one line
    user: str

    def matches(self, words: list[str]) -> bool:
        text = f"{self.pid} {self.command} {self.user}".lower()
        return all(word in text for word in words)


def _own_workers(me: int) -> set[int]:
    """This app's own helper processes: its load workers and multiprocessing's tracker."""
    found = set()
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(me).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if any("multiprocessing" in word for word in child.cmdline()):
                    found.add(child.pid)
    return found


def running_processes() -> list[ProcessEntry]:
    """The processes there are to attach to, newest first: not kernel threads, not this
    app or its own workers."""
    me = os.getpid()
    mine = {me} | _own_workers(me)
    found: list[tuple[float, ProcessEntry]] = []
    for process in psutil.process_iter(["pid", "cmdline", "username", "create_time"]):
        info = process.info
        argv = info.get("cmdline") or []
        if info["pid"] in mine or not argv:
            continue
        command = " ".join(" ".join(argv).split())
        entry = ProcessEntry(info["pid"], command, info.get("username") or "?")
        found.append((info.get("create_time") or 0.0, entry))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [entry for _, entry in found]


def filtered(entries: list[ProcessEntry], text: str) -> list[ProcessEntry]:
    """The entries every word of ``text`` is found in (pid, command line or user)."""
    words = text.lower().split()
    return [entry for entry in entries if entry.matches(words)]


class ProcessList:
    def __init__(self, post: Post) -> None:
        self.post = post
        self.entries: list[ProcessEntry] = []
        self.error: str | None = None
        self._task: Task | None = None
        self.changed = Event()  # (): listing, the entries or the error changed

    @property
    def listing(self) -> bool:
        return self._task is not None

    def refresh(self) -> None:
        if self._task is not None:
            return
        self.error = None
        self._task = Task(running_processes, "processes", self.post, self._done)
        self.changed.emit()
        self._task.start()

    def _done(self, entries: object, error: str | None) -> None:
        self._task = None
        if error is not None:
            self.error = error
        elif isinstance(entries, list):
            self.entries = entries
        self.changed.emit()

    def shutdown(self, timeout_s: float = LIST_WAIT_S) -> None:
        if self._task is not None:
            self._task.wait(timeout_s)
            self._task = None
