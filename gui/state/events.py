"""The state's event mechanism: an ``Event`` is a list of callbacks, called in order on
``emit``. Qt-free, like everything in gui/state.

State changes in one thread, the one the window runs in. Work done elsewhere (a job, a
discovery, a watch) hands its outcome back through a ``Post``: a callable that runs a function
in that thread later. The window's ``Post`` is a queued Qt signal (``gui/bridge.py``); tests
without Qt use a ``CallQueue`` and run what it holds when they look.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

Callback = Callable[..., Any]
Post = Callable[[Callable[[], None]], None]  # run this in the state's thread, later


class Event:
    """Callbacks to call with what changed; ``connect`` returns the callback (a decorator)."""

    def __init__(self) -> None:
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callback:
        self._callbacks.append(callback)
        return callback

    def disconnect(self, callback: Callback) -> None:
        self._callbacks = [c for c in self._callbacks if c != callback]

    def emit(self, *args: Any) -> None:
        # A copy: a callback may connect or disconnect others while this runs.
        for callback in list(self._callbacks):
            callback(*args)

    def __len__(self) -> int:
        return len(self._callbacks)


class CallQueue:
    """A ``Post`` for code without an event loop: functions wait here until ``run_pending``
    (from the thread that owns the state) runs them, in order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Callable[[], None]] = []
        self._ready = threading.Event()

    def __call__(self, function: Callable[[], None]) -> None:
        with self._lock:
            self._pending.append(function)
            self._ready.set()

    def run_pending(self, wait_s: float = 0.0) -> int:
        """Run what is queued (waiting up to ``wait_s`` for something); how many ran."""
        if wait_s > 0:
            self._ready.wait(wait_s)
        with self._lock:
            pending, self._pending = self._pending, []
            self._ready.clear()
        for function in pending:
            function()
        return len(pending)
