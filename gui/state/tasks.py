"""One slow, Qt-free call off the state's thread (open a model, discover models, write an
export, list processes); its outcome comes back through the state's ``Post``.

A plain ``threading.Thread`` rather than a pool: a pool keeps idle threads alive, which
would look like leaked threads, and nothing here needs one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from modelmon.core.errors import ModelmonError, one_line
from modelmon.gui.state.events import Post

log = logging.getLogger(__name__)

Done = Callable[[Any, str | None], None]  # (result, None) or (None, one line)


def error_line(exc: BaseException) -> str:
    """Why a task failed, in one line: a modelmon error as it says it; an OS error naming
    its file; anything else (a bug) with its type."""
    if isinstance(exc, ModelmonError):
        return one_line(exc)
    if isinstance(exc, OSError):
        return f"{exc.filename + ': ' if exc.filename else ''}" + (exc.strerror or one_line(exc))
    return f"{type(exc).__name__}: {one_line(exc)}"


class Task:
    """``work()`` in a thread of its own; ``done(result, error)`` in the state's thread."""

    def __init__(self, work: Callable[[], Any], name: str, post: Post, done: Done) -> None:
        self._work, self._post, self._done = work, post, done
        self._thread = threading.Thread(target=self._body, name=f"modelmon-{name}", daemon=True)

    def start(self) -> Task:
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout_s: float) -> bool:
        """Join the thread; True when it has ended."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _body(self) -> None:
        try:
            result, error = self._work(), None
        except Exception as exc:
            if not isinstance(exc, ModelmonError | OSError):
                log.exception("background task failed")
            result, error = None, error_line(exc)
        self._post(lambda: self._done(result, error))


class Tasks:
    """The tasks one owner started: a new one replaces nothing, ``wait_all`` lets them end."""

    def __init__(self, post: Post) -> None:
        self.post = post
        self._tasks: list[Task] = []

    def start(self, work: Callable[[], Any], name: str, done: Done) -> Task:
        task = Task(work, name, self.post, done)
        self._tasks = [t for t in self._tasks if t.running]
        self._tasks.append(task)
        return task.start()

    @property
    def running(self) -> bool:
        return any(t.running for t in self._tasks)

    def wait_all(self, timeout_s: float) -> None:
        for task in self._tasks:
            task.wait(timeout_s)
        self._tasks = [t for t in self._tasks if t.running]
