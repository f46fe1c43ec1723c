"""A/B × n and the ceilings in the window: verdict, % of ceiling, cancel, closing mid-A/B."""

from __future__ import annotations

import re
from pathlib import Path

from PySide6.QtCore import Qt

from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.results_rows import CEILING_COLUMN, STATUS

from .conftest import (
    SLOW_OPTIONS,
    empty_home_discovery,
    open_model,
    start_slow_ab,
    wait_idle,
    wait_loading,
    worker_processes,
)

VERDICT = re.compile(
    r"^([AB] is [\d.]+( %|×) faster|[AB] was [\d.]+( %|×) faster|A and B are as fast)"
)


def test_ab_times_two_shows_a_verdict_and_every_run(qtbot, window: MainWindow, small_model: Path):
    open_model(qtbot, window, small_model)
    workspace = window.workspace
    workspace.compare.pairs.setValue(2)
    assert workspace.compare.ab_button.text() == "Run A/B × 2"
    workspace.compare.ab_button.click()
    assert workspace.bench.running and not workspace.compare.ab_button.isEnabled()
    wait_idle(qtbot, window)
    ab = workspace.bench.ab.history.result
    assert ab is not None, window.messages.message()
    session = workspace.bench.ab.history.session
    assert [r.run_name for r in workspace.bench.records] == [
        f"A · pair 1 · {session}",
        f"B · pair 1 · {session}",
        f"A · pair 2 · {session}",
        f"B · pair 2 · {session}",
    ]
    assert all(
        r.status == "ok" and r.result.cache.requested == "cold" for r in workspace.bench.records
    )
    text = workspace.compare.verdict.text()
    assert VERDICT.match(text), text
    if ab.verdict.text != "within noise":
        assert text.startswith(ab.verdict.text.split()[0] + " is")
    assert window.menus.ab_config_action.isEnabled() and window.menus.json_action.isEnabled()
    # Both sides are on the throughput plot, in their colours.
    assert workspace.throughput.point_count("A") > 0 and workspace.throughput.point_count("B")


def test_ceilings_fill_the_dashed_lines_and_the_percent_column(
    qtbot, window: MainWindow, small_model: Path
):
    open_model(qtbot, window, small_model)
    workspace = window.workspace
    workspace.bench.run("A")
    wait_idle(qtbot, window)
    model = workspace.results.results
    assert model.cell_text(workspace.bench.records[0], CEILING_COLUMN) == "–"
    workspace.bench.ceiling_repeats = 1
    window.menus.ceilings_action.trigger()
    wait_idle(qtbot, window)
    ceilings = workspace.bench.ceilings.current
    assert ceilings is not None, window.messages.message()
    assert {c.name for c in ceilings.items} == {
        "sequential_read",
        "parallel_read",
        "parallel_read_warm",
        "storage",
        "memory_fill",
        "memcpy",
        "keeping_read",
    }
    # One run each; the sweep's best setting three (the bound their median: the engine's
    # BOUND_RUNS). A named read shares its setting's runs: one, three where it was the best,
    # two where a second run took it under another setting's median.
    swept = ("storage", "sequential_read", "parallel_read")
    assert all(len(c.runs) == 1 for c in ceilings.items if c.name not in swept)
    runs = {c.name: len(c.runs) for c in ceilings.items if c.name in swept}
    assert runs["storage"] == 3 and set(runs.values()) <= {1, 2, 3}, runs
    assert set(workspace.throughput.ceiling_lines) == {c.name for c in ceilings.items}
    cell = model.cell_text(workspace.bench.records[0], CEILING_COLUMN)
    assert re.fullmatch(r"\d+%|above its bound", cell), cell
    assert workspace.compare.ceilings_label.text().startswith("ceilings: storage ")


def test_escape_cancels_an_ab_at_once(qtbot, window: MainWindow, slow_model: Path):
    """At once: on the cancel, not when the load ends. The workers are frozen (SIGSTOP)
    before Escape, so the load can never end by itself: a window that waited for it would
    never go idle (``wait_idle`` fails it), and one that does was cancelled."""
    open_model(qtbot, window, slow_model)
    workspace = window.workspace
    start_slow_ab(qtbot, workspace, 3)
    workers = worker_processes()
    assert workers
    for worker in workers:
        worker.suspend()
    qtbot.keyClick(window, Qt.Key.Key_Escape)  # the Cancel action's shortcut
    wait_idle(qtbot, window)
    assert worker_processes() == []
    assert workspace.bench.ab.history.result is None
    assert workspace.compare.verdict.text() == (
        "A/B cancelled after 0 of 3 pairs: no verdict · its 1 run stays in the results"
    )
    (record,) = workspace.bench.records
    assert workspace.results.results.cell_text(record, STATUS).startswith("cancelled")
    assert workspace.compare.ab_button.isEnabled()


def test_closing_mid_ab_leaves_no_worker(qtbot, settings, tmp_path, slow_model: Path):
    window = MainWindow(settings=settings, discover=empty_home_discovery(tmp_path))
    qtbot.addWidget(window)
    window.show()
    open_model(qtbot, window, slow_model)
    for label in ("A", "B"):
        window.workspace.panels[label].set_config("mmap-shared-fd", SLOW_OPTIONS)
    window.bench.run_ab(3)
    wait_loading(qtbot, window.workspace)
    window.close()
    assert not window.bench.running
    assert worker_processes() == []
