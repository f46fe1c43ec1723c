"""Cyclic garbage is collected in the GUI thread only (gui/collector.py)."""

from __future__ import annotations

import gc
import threading
import weakref

from PySide6.QtCore import QObject

from modelmon.gui.app import create_application
from modelmon.gui.collector import GuiThreadCollector


class _Holder:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it
        self.qt = QObject()


def test_a_cycle_with_qt_objects_is_freed_by_the_gui_thread_not_by_another(qtbot) -> None:
    assert not gc.isenabled()  # the suite's collector (tests/gui/conftest.py) is running
    holder = _Holder()
    gone = weakref.ref(holder)
    del holder
    freed_in: list[str] = []

    kept: list[list[int]] = []

    def churn() -> None:  # allocations that would trigger automatic collections
        kept.extend([] for _ in range(50_000))
        freed_in.append("worker" if gone() is None else "")

    worker = threading.Thread(target=churn)
    worker.start()
    worker.join()
    assert freed_in == [""]  # the worker thread did not free it
    qtbot.waitUntil(lambda: gone() is None, timeout=5_000)  # the GUI thread's timer did


def test_the_app_collects_in_its_gui_thread_and_stop_gives_collection_back(qtbot) -> None:
    app = create_application()
    assert isinstance(app.findChild(GuiThreadCollector), GuiThreadCollector)
    create_application()
    assert len(app.findChildren(GuiThreadCollector)) == 1  # made once
    collector = GuiThreadCollector(interval_ms=10_000)
    collector.stop()
    assert not gc.isenabled()  # it found collection off (the suite's collector): left off
