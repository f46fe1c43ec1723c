"""Opening a model and making the demo model, off the state's thread. Qt-free.

Only the newest request counts: a result that arrives after the user asked for something
else is dropped, so a slow network file can't replace the model they opened since.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.model_info import gather
from modelmon.gui.state.tasks import Task, Tasks

TASK_WAIT_S = 0.5  # on close: a task still writing the demo is left to finish on its own


def demo_index() -> Path:
    from modelmon.core.model import demo_models

    return demo_models()["safetensors"]


class ModelOpener:
    def __init__(self, post: Post, make_demo: Callable[[], Path] = demo_index) -> None:
        self.make_demo = make_demo
        self.tasks = Tasks(post)
        self._current: Task | None = None
        self.loaded = Event()  # ModelInfo
        self.failed = Event()  # one line
        self.busy = Event()  # str while working, None when idle
        self.demo_path: str | None = None  # the demo model's, once made: its title says so

    def open(self, path: str) -> None:
        self.busy.emit(f"Reading {Path(path).name}…")
        self._start(lambda: gather(path), "open-model", self._on_loaded)

    def use_demo(self) -> None:
        self.busy.emit("Writing the demo model (once, a few seconds)…")
        self._start(self.make_demo, "demo-model", self._on_demo)

    def _start(
        self, work: Callable[[], object], name: str, on_success: Callable[[object], None]
    ) -> None:
        task: Task | None = None

        def done(result: object, error: str | None) -> None:
            if task is not self._current:
                return  # the user asked for something else since
            if error is not None:
                self._current = None
                self.busy.emit(None)
                self.failed.emit(error)
            else:
                on_success(result)

        task = self.tasks.start(work, name, done)
        self._current = task

    def _on_loaded(self, info: object) -> None:
        self._current = None
        self.busy.emit(None)
        self.loaded.emit(info)

    def _on_demo(self, path: object) -> None:
        self.demo_path = str(path)
        self.open(str(path))

    def shutdown(self, timeout_s: float = TASK_WAIT_S) -> None:
        """Drop pending results and give running tasks a moment to end."""
        self._current = None
        self.tasks.wait_all(timeout_s)
