"""Settings that persist, the theme, Help, the window's size limits, and exports' folders
and permissions."""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import QPoint, QSettings, QSize
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QComboBox, QLabel, QSpinBox, QWidget

from modelmon.core import Ceiling, Ceilings, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.system import prime_mode, set_prime_mode
from modelmon.gui.main_window import MINIMUM_SIZE, MainWindow
from modelmon.gui.plots.blocks import LABEL_SPACING_PX
from modelmon.gui.state.results_rows import STATUS
from modelmon.gui.theme import apply_palette, current_theme
from modelmon.gui.workspace import RESULT_ROWS

from .conftest import (
    MEDIUM_OPTIONS,
    empty_home_discovery,
    open_model,
    start_slow_ab,
    wait_idle,
)


def new_window(qtbot, settings: QSettings, home: Path) -> MainWindow:
    window = MainWindow(settings=settings, discover=empty_home_discovery(home))
    qtbot.addWidget(window)
    window.show()
    return window


def test_settings_round_trip_geometry_configurations_and_pairs(qtbot, tmp_path: Path):
    path = str(tmp_path / "round-trip.ini")
    first = new_window(qtbot, QSettings(path, QSettings.Format.IniFormat), tmp_path)
    first.resize(800, 560)  # Qt's offscreen screen is 800 × 600: restoring keeps it on it
    options = LoadOptions(workers=3, threads=2, chunk=16 << 20, cache="warm", verify=True)
    first.workspace.panels["B"].set_config("pread", options)
    first.workspace.compare.pairs.setValue(7)
    first.menus.sample_menu.actions[250].trigger()
    assert first.workspace.bench.sample_interval_s == 0.25
    first.close()

    second = new_window(qtbot, QSettings(path, QSettings.Format.IniFormat), tmp_path)
    assert (second.width(), second.height()) == (800, 560)
    panel = second.workspace.panels["B"]
    assert panel.strategy() == "pread"
    assert panel.options() == first.workspace.panels["B"].options()
    assert panel.options().cache == "warm" and panel.options().verify
    assert second.workspace.compare.pairs.value() == 7
    assert second.workspace.bench.sample_interval_s == 0.25
    assert second.menus.sample_menu.actions[250].isChecked()
    second.close()


def test_priming_is_chosen_in_the_run_menu_kept_and_applied(
    qtbot, tmp_path: Path, request: pytest.FixtureRequest
):
    request.addfinalizer(functools.partial(set_prime_mode, prime_mode()))  # restored after
    path = str(tmp_path / "priming.ini")
    first = new_window(qtbot, QSettings(path, QSettings.Format.IniFormat), tmp_path)
    assert first.menus.prime_menu.actions["auto"].isChecked() and prime_mode() == "auto"
    first.menus.prime_menu.actions["off"].trigger()
    assert prime_mode() == "off"
    first.close()
    set_prime_mode("auto")
    second = new_window(qtbot, QSettings(path, QSettings.Format.IniFormat), tmp_path)
    assert second.menus.prime_menu.actions["off"].isChecked() and prime_mode() == "off"
    second.close()


def test_settings_never_go_to_the_users_file(qtbot, window: MainWindow, tmp_path: Path):
    window.close()
    assert window.settings.qsettings.fileName() == str(tmp_path / "modelmon.ini")


@pytest.fixture
def light_afterwards() -> Iterator[None]:
    yield
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    apply_palette(app, "light")  # the palette is the application's: leave it as it was


def test_the_dark_theme_recolours_widgets_and_plots(
    qtbot, window: MainWindow, light_afterwards: None
):
    plot = window.workspace.throughput
    ceilings = window.bench.ceilings
    ceilings.merge(
        Ceilings(ceilings.model, (Ceiling("parallel_read", 900.0, (900.0,), "four readers", True),))
    )
    (line,) = plot.ceiling_lines.values()
    light_background = plot.plot.backgroundBrush().color().name()
    window.menus.theme_menu.actions["dark"].trigger()
    assert window.settings.theme() == "dark"
    assert current_theme().dark
    assert QApplication.palette().color(QPalette.ColorRole.Window).lightness() < 128
    qtbot.waitUntil(
        lambda: plot.plot.backgroundBrush().color().name() == current_theme().background
    )
    assert plot.plot.backgroundBrush().color().name() != light_background
    # Lines and their labels in the text colour follow it: dark text on dark would vanish.
    assert line.label.color.name() == line.pen.color().name() == current_theme().foreground
    window.menus.theme_menu.actions["light"].trigger()
    assert not current_theme().dark
    qtbot.waitUntil(lambda: plot.plot.backgroundBrush().color().name() == light_background)
    window.menus.theme_menu.actions["system"].trigger()
    assert window.settings.theme() == "system"


def test_help_menu_shows_how_it_measures_shortcuts_and_about(qtbot, window: MainWindow):
    help_menu = window.menus.help_menu
    assert "verified cold" in help_menu.show_how().browser.toPlainText()
    shortcuts = help_menu.show_shortcuts().browser.toPlainText()
    assert "Open model" in shortcuts and "Run A/B × n" in shortcuts and "Ctrl+T" in shortcuts
    assert "CPU & memory" in shortcuts and "Disk & page cache" in shortcuts  # as the tabs say
    dialog = help_menu.show_about()
    from modelmon import __version__

    assert f"modelmon {__version__}" in dialog.browser.toPlainText()
    # A window as small as its few lines: all of them shown, nothing to scroll.
    assert dialog.width() < 640 and dialog.height() < 480
    assert dialog.browser.verticalScrollBar().maximum() == 0
    help_menu.dialog.close()


def squeezed(window: MainWindow) -> list[str]:
    """Text-bearing widgets drawn shorter than they need: their text would overlap."""
    found = []
    for kind in (QLabel, QComboBox, QSpinBox):
        for widget in window.workspace.findChildren(kind):
            if widget.isVisibleTo(window) and widget.height() < widget.minimumSizeHint().height():
                found.append(f"{type(widget).__name__} {getattr(widget, 'text', str)()!r}")
    return found


def in_sight(widget: QWidget) -> bool:
    """The whole of ``widget`` is drawn (nothing of it scrolled away or cut off)."""
    return widget.isVisible() and widget.visibleRegion().boundingRect() == widget.rect()


def plots_whole(window: MainWindow) -> list[str]:
    """Plots of the tab shown that are shorter than they need, or whose caption is drawn over
    the plot (its time axis' label): none may be."""
    found = []
    for name, plot in window.workspace.plots.items():
        if not plot.isVisible() or name == "Blocks":
            continue
        if plot.height() < plot.minimumHeight():
            found.append(f"{name}: {plot.height()} px of {plot.minimumHeight()}")
        if plot.caption.isVisible() and plot.caption.y() < plot.plot.geometry().bottom():
            found.append(f"{name}: its caption over the plot")
    return found


def test_minimum_size_and_small_windows_scroll_instead_of_overlapping(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    assert window.minimumSize() == MINIMUM_SIZE
    window.resize(300, 200)
    assert (window.width(), window.height()) >= (MINIMUM_SIZE.width(), MINIMUM_SIZE.height())
    workspace = window.workspace
    window.bench.run("A")
    wait_idle(qtbot, window)

    window.resize(1000, 700)
    qtbot.waitUntil(lambda: window.height() == 700)
    QApplication.processEvents()
    assert squeezed(window) == [] and plots_whole(window) == []
    # The configurations show whole (nothing to scroll), several result rows fit, and the
    # plots are tall enough for their axis titles.
    assert workspace.top_scroll.verticalScrollBar().maximum() == 0
    row = workspace.results.verticalHeader().defaultSectionSize()
    header = workspace.results.horizontalHeader().height()
    assert workspace.results.viewport().height() >= 3 * row
    assert workspace.results.height() >= header + 3 * row

    window.resize(800, 500)
    qtbot.waitUntil(lambda: window.height() == 500)
    QApplication.processEvents()
    assert squeezed(window) == [] and plots_whole(window) == []
    # The configurations scroll, but each shows its strategy and its Run button; a result row
    # shows above a horizontal scroll bar.
    assert all(in_sight(panel.run_button) for panel in workspace.panels.values())
    assert all(in_sight(panel.strategy_box) for panel in workspace.panels.values())
    assert in_sight(workspace.progress.cancel_button) and in_sight(workspace.compare.ab_button)
    assert workspace.results.viewport().height() >= row
    for index in range(workspace.tabs.count()):
        workspace.tabs.setCurrentIndex(index)
        QApplication.processEvents()
        assert plots_whole(window) == [], workspace.tabs.tabText(index)


def test_at_1000x700_four_runs_show_and_no_fact_takes_three_lines(
    qtbot, window: MainWindow, tmp_path: Path
):
    """The window of a new user's walk: the model opened into it (from the start page), the
    facts beside the configurations. The facts scroll at the configurations' height (never
    making the top taller), each fact on at most two lines; the results show four rows."""
    model = write_safetensors_model(tmp_path / "sharded", layers=8, hidden=64, vocab=128, shards=4)
    window.resize(1000, 700)
    qtbot.waitUntil(lambda: window.height() == 700)
    open_model(qtbot, window, model)
    QApplication.processEvents()
    workspace = window.workspace
    assert not workspace.top_scroll.widget().narrow  # the facts beside A and B
    table = workspace.results
    assert table.viewport().height() >= RESULT_ROWS * table.verticalHeader().defaultSectionSize()
    panel = workspace.model_panel
    for key, value in panel.values.items():
        lines = round(value.height() / value.fontMetrics().lineSpacing())
        assert lines <= 2, (key, value.text(), lines)
    assert squeezed(window) == [] and plots_whole(window) == []


def test_a_message_never_moves_the_controls(qtbot, window: MainWindow, small_model: Path):
    """A message that comes mid-run (a note, a warning) takes a row that is always there:
    the Cancel button and the rest stay where the pointer expects them."""
    open_model(qtbot, window, small_model)
    window.resize(1000, 700)
    QApplication.processEvents()
    workspace = window.workspace
    watched = (
        workspace.progress.cancel_button,
        workspace.panels["A"].run_button,
        workspace.compare.ab_button,
        workspace.tabs,
        workspace.results,
    )

    def places() -> list[tuple[QPoint, QSize]]:
        QApplication.processEvents()
        return [(w.mapTo(window, QPoint(0, 0)), w.size()) for w in watched]

    before = places()
    window.bench.message.emit("Run B: " + "a long note about the run, " * 12, "warning")
    assert window.messages.isVisible() and places() == before
    window.messages.clear()
    assert places() == before


def test_a_tall_window_shows_every_run_of_an_ab(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    window.resize(1400, 900)
    workspace = window.workspace
    window.bench.run_ab(3)
    wait_idle(qtbot, window, 60_000)
    assert len(window.bench.records) == 6
    QApplication.processEvents()
    table = workspace.results
    rows = table.viewport().height() // table.verticalHeader().defaultSectionSize()
    assert rows >= 6 and table.verticalScrollBar().maximum() == 0
    assert plots_whole(window) == []


def test_the_blocks_tab_labels_every_block_of_a_24_layer_model(
    qtbot, window: MainWindow, tmp_path: Path
):
    model = write_safetensors_model(tmp_path / "deep", layers=24, hidden=64, vocab=128)
    open_model(qtbot, window, model)
    window.resize(1000, 700)
    workspace = window.workspace
    tabs = workspace.tabs
    tabs.setCurrentIndex(next(i for i in range(tabs.count()) if tabs.tabText(i) == "Blocks"))
    QApplication.processEvents()
    blocks = workspace.blocks
    names = blocks.axis.names
    assert len(names) >= 24
    height = blocks.axis.geometry().height()
    assert height >= len(names) * LABEL_SPACING_PX
    (_, rows), *_ = blocks.axis.tickValues(-0.6, len(names) - 0.4, height)
    assert rows == [float(row) for row in range(len(names))]


def test_verify_shows_the_checksum_and_runs_sample_as_chosen(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    workspace = window.workspace
    workspace.panels["A"].verify.setChecked(True)
    window.menus.sample_menu.actions[50].trigger()
    workspace.bench.run("A")
    wait_idle(qtbot, window)
    (record,) = workspace.bench.records
    assert record.outcome.interval_s == 0.05
    checksum = record.result.checksum
    assert checksum
    assert f"checksum {checksum}" in workspace.results.results.cell_text(record, STATUS)


def test_exports_start_in_the_last_export_folder_and_follow_the_umask(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path, monkeypatch
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    exports = tmp_path / "exports"
    exports.mkdir()
    assert not window.menus.plot_actions[0].isEnabled()  # no model: no plot to export
    open_model(qtbot, window, small_model)
    assert all(action.isEnabled() for action in window.menus.plot_actions)
    window.bench.run("A")
    wait_idle(qtbot, window)
    offered: list[str] = []
    answers = iter([str(exports / "results.json"), str(exports / "plot.svg")])

    def save_dialog(_parent, _title, start, _filters):
        offered.append(start)
        return next(answers)

    monkeypatch.setattr("modelmon.gui.export_dialogs.save_file", save_dialog)
    old_umask = os.umask(0o027)
    try:
        with qtbot.waitSignal(window.workspace.exporter.finished, timeout=20_000) as done:
            window.menus.json_action.trigger()
        assert done.args[0], done.args[1]
        with qtbot.waitSignal(window.workspace.exporter.finished, timeout=20_000) as done:
            window.menus.plot_actions[0].trigger()
        assert done.args[0], done.args[1]
    finally:
        os.umask(old_umask)
    # The first dialog starts at home (never the model's folder), the next where the last
    # export went; the folder is remembered.
    assert offered == [str(home / "modelmon-results.json"), str(exports / "throughput.png")]
    assert window.settings.export_folder() == str(exports)
    for name in ("results.json", "plot.svg"):
        assert stat.S_IMODE((exports / name).stat().st_mode) == 0o640, name
    svg = (exports / "plot.svg").read_text()
    # Drawn as vectors (no bitmap), every word as outlines named in the file; the heading
    # names model and configs (also the file's description).
    assert "<image" not in svg and svg.count("<!-- ") > 5
    assert small_model.name in svg and "A: sequential" in svg and "<dc:description>" in svg


def test_a_cancelled_ab_keeps_the_earlier_verdict_in_the_exports(
    qtbot, window: MainWindow, slow_model: Path, tmp_path: Path
):
    open_model(qtbot, window, slow_model)
    workspace = window.workspace
    for label, strategy in (("A", "sequential"), ("B", "pread")):
        workspace.panels[label].set_config(strategy, MEDIUM_OPTIONS)
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window, 60_000)
    first = workspace.bench.ab.history.result
    assert first is not None, window.messages.message()
    first_session = workspace.bench.ab.history.session
    start_slow_ab(qtbot, workspace, 2)
    workspace.bench.cancel()
    wait_idle(qtbot, window)
    assert (
        workspace.bench.ab.history.result is None
        and workspace.bench.ab.history.session != first_session
    )
    path = tmp_path / "results.json"
    with qtbot.waitSignal(workspace.exporter.finished, timeout=20_000) as done:
        workspace.exporter.export_results(str(path))
    assert done.args[0], done.args[1]
    document = json.loads(path.read_text())
    assert document["ab"]["verdict"]["text"] == first.verdict.text
    assert document["ab"]["session"] == first_session
    names = [run["run"] for run in document["runs"]]
    assert len(names) == len(set(names)) == 3  # two of the first A/B, one cancelled
    assert names[2].endswith(workspace.bench.ab.history.session)


def test_the_system_theme_follows_the_desktop_and_a_chosen_one_does_not(
    qtbot, window: MainWindow, light_afterwards: None, monkeypatch
):
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication

    import modelmon.gui.theme as theme_module

    # Qt's offscreen platform has no colour scheme of its own: stand in for the desktop.
    desktop = {"dark": False}
    original = theme_module.wants_dark

    def desktop_wants_dark(choice: str = "system") -> bool:
        return desktop["dark"] if choice == "system" else original(choice)

    monkeypatch.setattr(theme_module, "wants_dark", desktop_wants_dark)
    hints = QGuiApplication.styleHints()
    window.menus.theme_menu.choose("system")
    desktop["dark"] = True
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert current_theme().dark
    window.menus.theme_menu.choose("light")  # a choice of the user's wins over the desktop
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Dark)
    assert not current_theme().dark
    window.menus.theme_menu.choose("system")
    assert current_theme().dark
    desktop["dark"] = False
    hints.colorSchemeChanged.emit(Qt.ColorScheme.Light)
    assert not current_theme().dark


def test_no_two_entries_of_a_menu_share_a_keyboard_accelerator(qtbot, window: MainWindow):
    """Walk 20: File's "Open &recent" and "Export &recommended configuration…" both took R,
    so alt+f, r never reached the export. Each menu's accelerators are its own."""
    import re

    from PySide6.QtWidgets import QMenu

    menus = [a.menu() for a in window.menuBar().actions() if a.menu() is not None]
    while menus:
        menu = menus.pop()
        assert isinstance(menu, QMenu)
        keys = [
            m.group(1).lower()
            for a in menu.actions()
            if (m := re.search(r"&([^&])", a.text().replace("&&", ""))) is not None
        ]
        assert len(keys) == len(set(keys)), (menu.title(), keys)
        menus += [a.menu() for a in menu.actions() if a.menu() is not None]
