"""The window as a user drives it: open, run A and B, cancel, bad files, closing mid-load."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QTimer, QUrl
from PySide6.QtGui import QDropEvent
from PySide6.QtWidgets import QMessageBox

from modelmon.core import open_model as parse_model
from modelmon.core import write_safetensors_model
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.formatting import cache_state_text
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.state.results_rows import CACHE, STATUS

from .conftest import (
    SLOW_OPTIONS,
    empty_home_discovery,
    open_model,
    start_slow_ab,
    wait_loading,
    worker_processes,
)


def run_and_wait(qtbot, window: MainWindow, label: str, timeout_ms: int = 20_000) -> None:
    workspace = window.workspace
    rows = workspace.results.results.rowCount()
    workspace.bench.run(label)
    qtbot.waitUntil(lambda: workspace.results.results.rowCount() == rows + 1, timeout=timeout_ms)


def test_window_opens_on_a_model(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    assert window.windowTitle() == f"modelmon — {recent_label(str(small_model))}"
    assert window.pages.currentWidget() is window.workspace
    tensors = len(parse_model(small_model).extents)
    assert window.workspace.model_panel.values["tensors"].text() == f"{tensors:,}"
    assert "fits" in window.workspace.model_panel.values["memory"].text()
    assert window.recent.paths() == [str(small_model)]


def test_run_a_then_b_fills_plots_and_results(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    workspace = window.workspace
    run_and_wait(qtbot, window, "A")
    (first,) = workspace.results.results.records
    assert first.label == "A" and first.status == "ok", first.message
    assert first.spec.startswith("sequential")
    assert first.result.cache.method != "none"  # the cache state was measured, not assumed
    cache_cell = workspace.results.results.cell_text(first, CACHE)
    assert cache_cell == cache_state_text(first.result.cache)
    assert cache_cell.startswith(("cold ✓", "NOT cold"))
    assert workspace.throughput.point_count("A") > 0
    assert workspace.access.segment_count > 0
    assert "A" in workspace.blocks.bars
    assert workspace.bench.live.workers_qt_free

    workspace.panels["B"].strategy_box.setCurrentText("pread")
    run_and_wait(qtbot, window, "B")
    second = workspace.results.results.records[1]
    assert (second.label, second.status) == ("B", "ok"), second.message
    assert second.spec.startswith("pread")
    assert workspace.throughput.point_count("B") > 0
    assert set(workspace.blocks.bars) == {"A", "B"}
    assert workspace.blocks.ready["B"].startswith("first block")  # time to the first block
    assert len(workspace.blocks.ready_lines) == 2
    assert workspace.results.results.cell_text(second, STATUS) == "ok"


def test_cancel_stops_the_workers(qtbot, window: MainWindow, slow_model: Path):
    open_model(qtbot, window, slow_model)
    workspace = window.workspace
    workspace.panels["A"].set_config("sequential", SLOW_OPTIONS)
    workspace.bench.run("A")
    wait_loading(qtbot, workspace)
    assert worker_processes()
    qtbot.keyClick(window, Qt.Key.Key_Escape)  # the Cancel action's shortcut
    qtbot.waitUntil(lambda: workspace.results.results.rowCount() == 1, timeout=10_000)
    (record,) = workspace.results.results.records
    assert record.status == "cancelled"
    assert workspace.results.results.cell_text(record, STATUS).startswith("cancelled")
    assert worker_processes() == []
    assert not workspace.bench.running and workspace.panels["A"].run_button.isEnabled()


def test_closing_mid_load_leaves_no_worker(qtbot, settings, tmp_path, slow_model: Path):
    window = MainWindow(settings=settings, discover=empty_home_discovery(tmp_path))
    qtbot.addWidget(window)
    window.show()
    open_model(qtbot, window, slow_model)
    window.workspace.panels["B"].set_config("mmap-shared-fd", SLOW_OPTIONS)
    window.bench.run("B")
    wait_loading(qtbot, window.workspace)
    window.close()
    assert not window.bench.running
    assert worker_processes() == []


def test_a_malformed_file_shows_one_line_and_the_app_goes_on(
    qtbot, window: MainWindow, malformed_file: Path, small_model: Path
):
    window.open_path(str(malformed_file))
    qtbot.waitUntil(lambda: window.messages.isVisible(), timeout=10_000)
    assert window.messages.level == "error"
    text = window.messages.message()
    assert malformed_file.name in text and "\n" not in text and "Traceback" not in text
    assert window.pages.currentWidget() is window.start_page
    open_model(qtbot, window, small_model)  # still usable
    assert not window.messages.isVisible()


def test_a_run_that_cannot_start_shows_its_error(qtbot, window, small_model: Path, monkeypatch):
    open_model(qtbot, window, small_model)
    monkeypatch.setattr(
        "modelmon.core.loading.preflight.memory_facts", lambda: type("Tiny", (), {"usable": 1024})()
    )
    run_and_wait(qtbot, window, "A")
    (record,) = window.workspace.results.results.records
    assert record.status == "failed" and "would not fit" in (record.message or "")
    assert window.messages.level == "error" and "would not fit" in window.messages.message()


def test_demo_model_is_made_in_the_background(qtbot, settings, tmp_path, small_model: Path):
    import threading

    release = threading.Event()

    def make_demo() -> Path:
        release.wait(5)
        return small_model

    window = MainWindow(
        settings=settings,
        make_demo=make_demo,
        discover=empty_home_discovery(tmp_path),
    )
    qtbot.addWidget(window)
    window.show()
    window.start_page.demo_button.click()
    qtbot.waitUntil(lambda: window.start_page.busy.isVisible(), timeout=2_000)
    assert not window.start_page.demo_button.isEnabled()  # the UI is responsive, not frozen
    release.set()
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=10_000)
    assert not window.start_page.busy.isVisible()
    # The title tells the demo from a model of the same name elsewhere.
    assert window.windowTitle() == "modelmon — the demo model"
    twin = write_safetensors_model(tmp_path / "twin", layers=1, hidden=64, vocab=256, shards=2)
    assert twin.name == small_model.name
    window.open_path(str(twin))
    qtbot.waitUntil(lambda: window.bench.info.path == str(twin), timeout=10_000)
    assert window.windowTitle() == f"modelmon — {twin.name} — {twin.parent}"
    window.close()


def test_dropping_a_folder_opens_its_model(qtbot, window: MainWindow, small_model: Path):
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(small_model.parent))])
    event = QDropEvent(
        QPointF(10, 10),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
    window.dropEvent(event)
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=10_000)
    assert window.bench.info.model.total_bytes == parse_model(small_model).total_bytes


def answer_confirmation(window: MainWindow, button: QMessageBox.StandardButton) -> list[str]:
    """Click ``button`` of the confirmation once it is on screen (it runs its own loop);
    the list it returns then holds the box's text and the button's."""
    said: list[str] = []

    def click() -> None:
        box = window.confirmation
        if box is None or not box.isVisible():
            QTimer.singleShot(10, click)
            return
        said.extend([box.text(), box.button(button).text()])
        box.button(button).click()

    QTimer.singleShot(0, click)
    return said


def test_opening_a_model_mid_ab_asks_first_and_keeps_each_models_results(
    qtbot, window: MainWindow, slow_model: Path, small_model: Path
):
    open_model(qtbot, window, slow_model)
    start_slow_ab(qtbot, window.workspace, 3)
    # "Cancel": nothing is lost, the A/B goes on.
    answer_confirmation(window, QMessageBox.StandardButton.Cancel)
    window.open_path(str(small_model))
    assert window.confirmation is None
    assert window.bench.running and window.bench.info.path == str(slow_model)
    # "Stop and open": the A/B is cancelled, then the other model opens.
    answer_confirmation(window, QMessageBox.StandardButton.Yes)
    window.open_path(str(small_model))
    qtbot.waitUntil(
        lambda: window.windowTitle() == f"modelmon — {recent_label(str(small_model))}",
        timeout=10_000,
    )
    assert not window.bench.running and worker_processes() == []
    assert window.workspace.results.results.rowCount() == 0  # a new model: its own table
    # The first model's runs come back with it.
    open_model_again = window.bench.info
    window.open_path(str(slow_model))
    qtbot.waitUntil(lambda: window.bench.info is not open_model_again, timeout=10_000)
    (record,) = window.bench.records
    assert record.status == "cancelled"


def test_quitting_mid_ab_asks_first_and_stops_it_cleanly(
    qtbot, window: MainWindow, slow_model: Path
):
    open_model(qtbot, window, slow_model)
    start_slow_ab(qtbot, window.workspace, 3)
    quit_action = next(a for a in window.menus.files.actions() if a.text() == "&Quit")
    # "Cancel": the window stays and the A/B goes on.
    answer_confirmation(window, QMessageBox.StandardButton.Cancel)
    quit_action.trigger()
    assert window.confirmation is None
    assert window.isVisible() and window.bench.running
    # "Stop and quit": the A/B is cancelled, its workers ended, then the window closes.
    said = answer_confirmation(window, QMessageBox.StandardButton.Yes)
    quit_action.trigger()
    assert said == [
        "An A/B comparison is running. Quitting stops it, and what it has not finished is lost.",
        "Stop and quit",
    ]
    assert not window.isVisible() and not window.bench.running
    assert worker_processes() == []


def test_quitting_with_nothing_running_asks_nothing(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    quit_action = next(a for a in window.menus.files.actions() if a.text() == "&Quit")
    quit_action.trigger()
    assert window.confirmation is None and not window.isVisible()
