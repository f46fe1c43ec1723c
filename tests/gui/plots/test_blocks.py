"""The Blocks plot: a labelled row per block, in the window and in an export of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model
from modelmon.gui import exporter
from modelmon.gui.figures import FigureRuns
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.formatting import short_block_name

from ..conftest import MEDIUM_OPTIONS, open_model, wait_idle
from ..test_export import export


def run_a_and_b(qtbot, window: MainWindow, tmp_path: Path) -> None:
    """A run of A and of B of a sharded Llama-like model: embeddings, layers.0–19 and the
    head, 22 rows. No tab but the first is shown."""
    model = write_safetensors_model(tmp_path / "m", layers=20, hidden=64, vocab=128, shards=2)
    open_model(qtbot, window, model)
    bench = window.bench
    for label in ("A", "B"):
        bench.configs.set(label, "pread", MEDIUM_OPTIONS)
        bench.run(label)
        wait_idle(qtbot, window)
    assert [r.status for r in bench.records] == ["ok", "ok"], window.messages.message()


def test_an_export_of_the_blocks_tab_never_shown_labels_every_block(
    qtbot, window: MainWindow, tmp_path: Path
):
    run_a_and_b(qtbot, window, tmp_path)
    workspace = window.workspace
    blocks = workspace.blocks
    names = [short_block_name(name) for name in blocks.order]
    assert len(names) == 22 and names[0] == "embeddings" and names[-1] == "head", names
    assert not blocks.isVisible()  # the Blocks tab was never shown

    # The labels the export's painting of the axis lays out, as it paints them.
    drawn: list[list[str]] = []
    paint_labels = blocks.axis.drawPicture

    def recorded(painter, axis_spec, tick_specs, text_specs):  # pyqtgraph's arguments
        drawn.append([text for _rect, _flags, text in text_specs])
        paint_labels(painter, axis_spec, tick_specs, text_specs)

    blocks.axis.drawPicture = recorded
    path = tmp_path / "blocks.png"
    ok, text = export(qtbot, window, lambda p: workspace.exporter.export_plot("Blocks", p), path)
    assert ok, text
    assert drawn, "the export painted no block axis"
    assert drawn[0] == names  # every block's row labelled, the first time it is painted
    assert workspace.tabs.currentIndex() == 0  # the export changed no view


def test_a_figure_of_the_blocks_tab_never_shown_spans_the_times_the_tab_shows(
    qtbot, window: MainWindow, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    run_a_and_b(qtbot, window, tmp_path)
    workspace, blocks = window.workspace, window.workspace.blocks
    assert not blocks.isVisible()  # the Blocks tab was never shown
    drawn: list[FigureRuns] = []
    draw = exporter.figure_bytes

    def recorded(name: str, runs: FigureRuns, fmt: str, heading: list[str]) -> bytes:
        drawn.append(runs)
        return draw(name, runs, fmt, heading)

    monkeypatch.setattr(exporter, "figure_bytes", recorded)
    path = tmp_path / "blocks.svg"
    ok, text = export(qtbot, window, lambda p: workspace.exporter.export_plot("Blocks", p), path)
    assert ok, text
    (figure,) = drawn
    tabs = workspace.tabs
    tabs.setCurrentIndex(next(i for i in range(tabs.count()) if tabs.tabText(i) == "Blocks"))
    blocks.plot.grab()  # painted, as on screen
    (start, end), _ = blocks.item.vb.viewRange()
    assert end < 1.0  # the loads took milliseconds: the range is theirs, not a default
    assert figure.x_range == pytest.approx((start, end))  # the times the tab shows
    assert figure.size_px == (blocks.plot.width(), blocks.plot.height())  # at its size
