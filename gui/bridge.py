"""The one crossing from other threads into the GUI thread: ``GuiPoster``, the ``Post`` of
the app's Qt-free state (``gui/state/events.py``).

A job, a discovery or a watch runs in its own thread and hands its outcome over as a
function to run in the state's thread; here that is one queued signal, so the function runs
in the GUI thread's event loop, in order. Emitting a queued signal never waits for the GUI
thread, so a slow repaint cannot stall the job thread or the workers it measures.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, Signal


class GuiPoster(QObject):
    _call = Signal(object)  # a function, from any thread, queued into the GUI thread

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._call.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def __call__(self, function: Callable[[], None]) -> None:
        with contextlib.suppress(RuntimeError):  # the window (and this object) went away
            self._call.emit(function)

    @staticmethod
    def _run(function: Callable[[], None]) -> None:
        function()
