"""The models on this machine, for the start page: found off the state's thread, filtered
and sorted as the user asks. Qt-free.

Discovery walks model stores (the Hugging Face cache, Ollama, LM Studio...) with a bounded
budget of entries, so it ends; on a network home it still takes a while, which is why it
runs in a task and the page shows "Looking for models…" meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

from modelmon.core import Discovery, discover_models
from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.model_list import ModelRow, model_row
from modelmon.gui.state.tasks import Task

DISCOVERY_WAIT_S = 5.0  # on close: discovery is bounded by its entry budget, so it ends


class DiscoveryState:
    def __init__(self, post: Post, discover: Callable[[], Discovery] = discover_models) -> None:
        self.post = post
        self.discover = discover
        self.discovery: Discovery | None = None
        self.rows: list[ModelRow] = []
        self.error: str | None = None  # why the last search failed
        self._task: Task | None = None
        self.changed = Event()  # (): searching, the rows, or the error changed

    @property
    def searching(self) -> bool:
        return self._task is not None

    def refresh(self) -> None:
        """Look for models again; ``changed`` when it starts and when it is done."""
        if self._task is not None:
            return
        self.error = None
        self._task = Task(self.discover, "discovery", self.post, self._done)
        self.changed.emit()
        self._task.start()

    def _done(self, discovery: object, error: str | None) -> None:
        self._task = None
        if error is None and not isinstance(discovery, Discovery):
            error = f"discovery returned {type(discovery).__name__}, not a Discovery"
        if error is not None:
            self.error = error
        else:
            assert isinstance(discovery, Discovery)
            self.discovery = discovery
            self.rows = [model_row(model) for model in discovery.models]
        self.changed.emit()

    def shutdown(self, timeout_s: float = DISCOVERY_WAIT_S) -> None:
        if self._task is not None:
            self._task.wait(timeout_s)
            self._task = None
