"""Opening models and making the demo model, in background threads.

Only the newest request counts: a result that arrives after the user asked for something
else is dropped, so a slow network file can't replace the model they opened since.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from modelmon.gui.state.model_info import gather
from modelmon.gui.tasks import BackgroundTask

TASK_WAIT_S = 0.5  # on close: a task still writing the demo is left to finish on its own


def _demo_index() -> Path:
    from modelmon.core import demo_models

    return demo_models()["safetensors"]


class ModelLoader(QObject):
    loaded = Signal(object)  # modelmon.gui.state.model_info.ModelInfo
    failed = Signal(str)  # one line
    busy = Signal(object)  # str while working, None when idle

    def __init__(
        self, parent: QObject | None = None, make_demo: Callable[[], Path] = _demo_index
    ) -> None:
        super().__init__(parent)
        self._make_demo = make_demo
        self._tasks: list[BackgroundTask] = []
        self._current: BackgroundTask | None = None

    def open(self, path: str) -> None:
        self.busy.emit(f"Reading {Path(path).name}…")
        self._start(lambda: gather(path), "open-model", self._on_loaded)

    def use_demo(self) -> None:
        self.busy.emit("Writing the demo model (once, a few seconds)…")
        self._start(self._make_demo, "demo-model", self._on_demo)

    def _start(
        self,
        work: Callable[[], object],
        name: str,
        on_success: Callable[[BackgroundTask, object], None],
    ) -> None:
        task = BackgroundTask(work, name, self)
        task.succeeded.connect(lambda result, task=task: on_success(task, result))
        task.failed.connect(lambda error, task=task: self._on_failed(task, error))
        self._tasks = [t for t in self._tasks if t.running]
        self._tasks.append(task)
        self._current = task
        task.start()

    def _on_loaded(self, task: BackgroundTask, info: object) -> None:
        if task is self._current:
            self._current = None
            self.busy.emit(None)
            self.loaded.emit(info)

    def _on_demo(self, task: BackgroundTask, path: object) -> None:
        if task is self._current:
            self.open(str(path))

    def _on_failed(self, task: BackgroundTask, error: str) -> None:
        if task is self._current:
            self._current = None
            self.busy.emit(None)
            self.failed.emit(error)

    def shutdown(self, timeout_s: float = TASK_WAIT_S) -> None:
        """Drop pending results and give running tasks a moment to end."""
        self._current = None
        for task in self._tasks:
            task.wait(timeout_s)
        self._tasks = [t for t in self._tasks if t.running]
