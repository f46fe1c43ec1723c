"""Run ▸ Memory limit… in the app: the limit is asked (a wrong one refused in the dialog), the
next run really runs under it, and the Memory plot draws the limit and the cgroup's split."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer

from modelmon.core.system import max_memory_limit
from modelmon.gui.figures.metrics import AREA_ALPHA
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.colours import RUN_COLOURS
from modelmon.gui.state.results_rows import LIMIT, PEAK_RSS
from modelmon.gui.state.workbench import k8s_text

from ..core.system.test_memory_cgroup import REAL
from .conftest import empty_home_discovery, open_model, wait_idle
from .test_export import export
from .test_watch import answer_watch, quoted

MiB = 1 << 20
GiB = 1 << 30
# Reads every file the index names, as a loader would, and keeps nothing.
READ_ALL = """
import json, pathlib, sys
index = pathlib.Path(sys.argv[1])
for name in sorted(set(json.loads(index.read_text())["weight_map"].values())):
    with open(index.parent / name, "rb") as f:
        while f.read(1 << 20):
            pass
"""


def answer_limit_dialog(window: MainWindow, *answers: str) -> list[str]:
    """Run ▸ Memory limit…, each of ``answers`` typed and OK pressed in turn; what the dialog
    said after each (empty once it closed), then Cancel if it stays open."""
    said: list[str] = []

    def answer() -> None:
        dialog = window.dialog
        assert dialog is not None
        for text in answers:
            dialog.field.setText(text)
            dialog.accept()
            said.append(dialog.error.text() if dialog.isVisible() else "")
        if dialog.isVisible():
            dialog.reject()

    QTimer.singleShot(0, answer)
    window.menus.memory_limit_action.trigger()
    return said


def test_a_limit_is_refused_in_one_line_then_taken_and_cleared(qtbot, window: MainWindow):
    bench = window.bench
    said = answer_limit_dialog(window, "lots", "100k", "256Mi")
    assert said[0] == "Not a memory limit: lots (write 16Gi or 512Mi)"
    assert said[1].startswith("The memory limit must be from 1 MiB to ") and "not 100k" in said[1]
    assert said[2] == "" and bench.memory_limit == 256 * MiB
    assert window.menus.memory_limit_action.text() == "Memory &limit: 256 MiB…"
    answer_limit_dialog(window, "")
    assert bench.memory_limit is None
    assert window.menus.memory_limit_action.text() == "Memory &limit: none…"
    assert k8s_text(max_memory_limit()) != ""  # every limit it takes has a text to show


def test_the_limit_is_checked_as_it_is_typed(qtbot, window: MainWindow):
    """Walk 25: "Not a memory limit: garbage! (write 16Gi or 512Mi)" stayed under the field
    while it held "999Ti", then "4Gi": the field is checked as it is typed, OK greyed while it
    holds no limit modelmon takes, and nothing is set until OK."""
    seen: list[tuple[str, bool]] = []

    def answer() -> None:
        dialog = window.dialog
        assert dialog is not None
        for text in ("garbage!", "999Ti", "4Gi", ""):
            dialog.field.setText(text)
            shown = dialog.error.text() if not dialog.error.isHidden() else ""
            seen.append((shown, dialog.ok.isEnabled()))
        dialog.reject()

    QTimer.singleShot(0, answer)
    window.menus.memory_limit_action.trigger()
    assert seen[0] == ("Not a memory limit: garbage! (write 16Gi or 512Mi)", False)
    assert seen[1][0].startswith("The memory limit must be from 1 MiB to ") and not seen[1][1]
    assert seen[2] == ("", True) and seen[3] == ("", True)
    assert window.bench.memory_limit is None  # typed, never taken


@REAL
def test_a_run_under_the_limit_is_measured_in_its_cgroup_and_plotted(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    open_model(qtbot, window, small_model)
    assert answer_limit_dialog(window, "512Mi") == [""]
    assert "512 MiB memory limit" in window.messages.message()
    bench = window.bench
    bench.run("A")
    wait_idle(qtbot, window)
    record = bench.records[-1]
    result = record.outcome.result
    assert result.status == "ok", result.error
    limited = result.memory_limit
    assert limited is not None and limited.limit_bytes == 512 * MiB
    assert 0 < limited.peak_bytes <= 512 * MiB and not Path(limited.cgroup).exists()
    table = window.workspace.results.results
    assert table.cell_text(record, LIMIT) == "512 MiB"  # the run's own column says it
    cell = table.index(table.records.index(record), PEAK_RSS)
    tip = table.data(cell, Qt.ItemDataRole.ToolTipRole)
    assert "Its memory limit 512 MiB" in tip and "anonymous" in tip
    # The plot: the limit as a line at 512 MiB, the charge and its anonymous part as areas.
    plot, tabs = window.workspace.memory, window.workspace.tabs
    tab = next(i for i in range(tabs.count()) if tabs.widget(i).isAncestorOf(plot))
    tabs.setCurrentIndex(tab)  # a plot on a tab not shown draws when it shows
    qtbot.waitUntil(lambda: ("A", "limit_bytes") in plot.curves, timeout=10_000)
    curves = {name: curve for (label, name), curve in plot.curves.items() if label == "A"}
    _, limit = curves["limit_bytes"].getData()
    assert len(limit) and np.allclose(limit, 512 * MiB / GiB)
    _, charged = curves["cgroup_bytes"].getData()
    _, anon = curves["cgroup_anon_bytes"].getData()
    assert charged.max() > 0 and charged.max() <= 512 * MiB / GiB
    assert np.all(anon <= charged + 1e-9)
    assert curves["cgroup_bytes"].opts["fillLevel"] == 0.0
    # The exported figure draws the same: the areas filled in the run's colour, see-through.
    path = tmp_path / "memory.svg"
    exporter = window.workspace.exporter
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Memory", p), path)
    assert ok, text
    colour = RUN_COLOURS["A"].lower()
    svg = path.read_text()
    assert f"fill: {colour}; fill-opacity: {AREA_ALPHA:.6f}" in svg or (
        f"fill: {colour}; opacity: {AREA_ALPHA:.6f}" in svg
    ), "no area of the run's cgroup in the exported figure"


@REAL
def test_a_watched_command_runs_under_the_limit(
    qtbot, window: MainWindow, small_model: Path, monkeypatch
):
    open_model(qtbot, window, small_model)
    assert answer_limit_dialog(window, "256Mi") == [""]
    line = f"{sys.executable} -c {quoted(READ_ALL)} {{path}}"
    shown = answer_watch(monkeypatch, lambda dialog: dialog.command.setText(line))
    window.menus.watch_command_action.trigger()
    assert shown
    wait_idle(qtbot, window)
    (record,) = window.bench.records
    assert record.watched is not None, record.error
    limited = record.watched.memory_limit
    assert limited is not None and limited.limit_bytes == 256 * MiB
    assert window.workspace.results.results.cell_text(record, LIMIT) == "256 MiB"
    assert 0 < limited.peak_bytes <= 256 * MiB and not Path(limited.cgroup).exists()


def test_the_limit_is_kept_across_restarts_and_said_at_start(qtbot, settings, tmp_path: Path):
    """Walks 26/27: a limit set in one session was gone in the next, with nothing said. It
    is kept as written, named in the menu and said when the window opens; cleared, it stays
    cleared; a kept limit this machine no longer takes is dropped, and said so."""

    def reopened() -> MainWindow:
        window = MainWindow(settings=settings, discover=empty_home_discovery(tmp_path / "home"))
        qtbot.addWidget(window)
        window.show()
        return window

    first = reopened()
    assert first.bench.memory_limit is None
    answer_limit_dialog(first, "256Mi")
    first.close()
    second = reopened()
    assert second.bench.memory_limit == 256 * MiB
    assert second.menus.memory_limit_action.text() == "Memory &limit: 256 MiB…"
    assert second.messages.message().startswith("The next runs run under a 256 MiB memory limit")
    answer_limit_dialog(second, "")
    second.close()
    third = reopened()
    assert third.bench.memory_limit is None
    assert third.menus.memory_limit_action.text() == "Memory &limit: none…"
    third.close()
    settings.setValue("measure/memory_limit", "999Ti")  # more RAM than this machine has
    fourth = reopened()
    assert fourth.bench.memory_limit is None
    said = fourth.messages.message()
    assert said.startswith("The last session's memory limit is not kept: the memory limit must")
    assert "not 999Ti" in said
    fourth.close()
