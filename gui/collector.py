"""Python's cyclic garbage collector, run only in the GUI thread.

A cycle that holds Qt objects (a closed window's menus, a dialog and its slots) is freed by
whichever thread happens to trigger an automatic collection. When that is a worker thread
(an export, model discovery), the Qt destructors run there: they take Qt's locks and then
wait for the GIL, while the GUI thread holds the GIL and waits for the same locks — the app
freezes (seen in a test: an export thread collecting an old window's QMenu). So automatic
collection is off while the app runs, and a timer in the GUI thread collects by the same
thresholds (pyqtgraph's GarbageCollector does the same).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 1000


class GuiThreadCollector(QObject):
    """Started in the GUI thread; ``stop`` gives collection back to the interpreter."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = INTERVAL_MS) -> None:
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        self.timer = QTimer(self)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self.collect_due)
        self.was_enabled = gc.isenabled()
        gc.disable()
        self.timer.start()

    def collect_due(self) -> None:
        """Collect the generations the interpreter would have by now (its own thresholds)."""
        counts = gc.get_count()
        generation = -1
        for level in range(3):
            if counts[level] <= self.thresholds[level]:
                break
            generation = level
        if generation >= 0:
            gc.collect(generation)

    def stop(self) -> None:
        self.timer.stop()
        gc.collect()  # here, in the GUI thread: what is garbage now is freed now
        if self.was_enabled:
            gc.enable()
