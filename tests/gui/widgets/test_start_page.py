"""The start page: discovered models (fake home), filter, sort, open; recent models; drops."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from modelmon.core import discover_models
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.model_list import COLUMNS

from ..conftest import empty_home_discovery, open_model

NAME = COLUMNS.index("Name")


def shown(window: MainWindow) -> list[str]:
    table = window.start_page.table
    return [table.item(row, NAME).text() for row in range(table.rowCount())]


def make_window(qtbot, settings, discover) -> MainWindow:
    window = MainWindow(settings=settings, discover=discover)
    qtbot.addWidget(window)
    window.show()
    return window


def test_discovered_models_are_listed_filtered_sorted_and_opened(
    qtbot, settings, model_home: SimpleNamespace
):
    window = make_window(qtbot, settings, discover_models)
    page = window.start_page
    qtbot.waitUntil(lambda: page.discovery is not None, timeout=10_000)
    assert not window.state.discovery.searching
    assert page.table.rowCount() == 5
    assert page.summary.text() == "5 models found"
    references = {row.reference for row in page.shown_rows}
    assert {"hf:acme/tiny-llama", "ollama:tinyllama:latest"} <= references

    page.filter.setText("ollama")
    assert shown(window) == ["tinyllama:latest"]
    assert page.summary.text() == "1 of 5 models match"
    # As in a search box: Down goes on to the list, to its first model.
    page.filter.setFocus()
    qtbot.keyClick(page.filter, Qt.Key.Key_Down)
    assert window.focusWidget() is page.table and page.table.currentRow() == 0
    page.filter.clear()

    page.set_sort("Size, largest first")
    sizes = [row.bytes for row in page.shown_rows]
    assert sizes == sorted(sizes, reverse=True)
    page.table.horizontalHeader().sectionClicked.emit(NAME)  # a click on "Name"
    assert shown(window) == sorted(shown(window), key=str.lower)

    # Enter on a row opens its model, by reference.
    row = next(i for i, r in enumerate(page.shown_rows) if r.reference == "hf:acme/tiny-llama")
    page.table.setCurrentCell(row, NAME)
    page.table.setFocus()
    qtbot.keyClick(page.table, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=10_000)
    assert window.bench.info.path == "hf:acme/tiny-llama"
    assert window.pages.currentWidget() is window.workspace
    assert window.recent.paths()[0] == "hf:acme/tiny-llama"

    # Back on the start page (View ▸ Start page), a double click opens too (here Ollama's).
    window.menus.start_page_action.trigger()
    assert window.pages.currentWidget() is page
    assert page.back_button.isVisible() and "tiny-llama" in page.back_button.text()
    row = next(i for i, r in enumerate(page.shown_rows) if r.reference.startswith("ollama:"))
    rect = page.table.visualRect(page.table.model().index(row, NAME))
    # QTest's double click is a press-release then a double-click event: the view wants a
    # press on the same cell before it (as a real first click gives).
    qtbot.mouseClick(page.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(page.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.bench.info.path == "ollama:tinyllama:latest", timeout=10_000)
    assert window.pages.currentWidget() is window.workspace

    # Enter in the filter opens the model the list shows first.
    window.state.show_page("start")
    page.filter.setText("tiny-llama-GGUF")
    first = page.shown_rows[0].reference
    qtbot.keyClick(page.filter, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: window.bench.info.path == first, timeout=10_000)
    assert window.pages.currentWidget() is window.workspace
    window.close()


def test_an_empty_home_says_where_it_looked(qtbot, settings, tmp_path: Path):
    window = make_window(qtbot, settings, empty_home_discovery(tmp_path / "nobody"))
    page = window.start_page
    qtbot.waitUntil(lambda: page.discovery is not None, timeout=10_000)
    assert page.table.rowCount() == 0
    assert page.summary.text().startswith("No models found")
    window.close()


def test_recent_models_show_their_folder_and_open(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    page = window.start_page
    item = page.recent.item(0)
    assert item.text().startswith(f"{small_model.name} — ")
    assert small_model.parent.name in item.text()
    window.fill_recent()
    assert window.menus.recent_menu.actions()[0].text() == item.text()
    # The model open now, chosen again: its page comes back, nothing is read again.
    window.state.show_page("start")
    page.recent.itemActivated.emit(item)
    assert window.pages.currentWidget() is window.workspace
    assert not window.state.opener.tasks.running


MOVE, COPY, LINK = Qt.DropAction.MoveAction, Qt.DropAction.CopyAction, Qt.DropAction.LinkAction


def drop(
    window: MainWindow, *paths: Path, offered: Qt.DropAction = COPY | MOVE | LINK
) -> QDropEvent:
    """Drag ``paths`` over the window and drop them, as a file manager proposing a move (its
    default within one disk) and offering ``offered``."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    enter = QDragEnterEvent(
        QPointF(50, 50).toPoint(), offered, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier(0)
    )
    enter.setDropAction(MOVE)
    QApplication.sendEvent(window, enter)
    event = QDropEvent(
        QPointF(50, 50), offered, mime, Qt.MouseButton.LeftButton, Qt.KeyboardModifier(0)
    )
    event.setDropAction(MOVE)
    if enter.isAccepted():
        # Taken as a copy, never as the move proposed: the source keeps its file.
        assert enter.dropAction() in (COPY, LINK)
        QApplication.sendEvent(window, event)
        assert event.dropAction() == enter.dropAction()
    return event


def test_a_drag_that_can_only_move_is_refused(qtbot, window: MainWindow, small_model: Path):
    event = drop(window, small_model, offered=MOVE)
    assert not event.isAccepted() and window.bench.info is None


def test_dropping_a_folder_or_files_opens_the_model(
    qtbot, window: MainWindow, small_model: Path, slow_model: Path
):
    assert drop(window, small_model.parent).isAccepted()
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=10_000)
    assert Path(window.bench.info.path) == small_model.parent
    drop(window, slow_model, small_model)  # several: the first opens, the window says so
    qtbot.waitUntil(
        lambda: window.bench.info is not None and Path(window.bench.info.path) == slow_model,
        timeout=10_000,
    )
    assert window.messages.message() == f"2 items dropped: opening the first, {slow_model.name}."
