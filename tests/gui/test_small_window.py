"""At 1000×700, the window of a new user's walk: an A/B's verdict and a ranks answer's Ways
show whole (wrapped where long), none cut at an edge."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication, QStyle, QTableWidget

from modelmon.core import Ceiling, Ceilings
from modelmon.core.measuring import WayMeasured
from modelmon.core.options import LoadOptions
from modelmon.core.runs import SessionResult
from modelmon.core.system import MemoryLimit
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.formatting import CEILING_NAMES
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.recommending import RecommendationShown
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.results_rows import (
    CEILING_COLUMN,
    LIMIT,
    MBPS,
    SECONDS,
    STATUS,
    cell_text,
    cell_tip,
)

from ..core.measuring.records import run
from ..core.output.test_ranks_answer import GiB, MiB, ranks_found, ranks_run
from .conftest import open_model

VERDICTS = (
    "A is 6.3 % faster by the median pair: every one of the 3 pairs agrees (A/B per pair "
    "1.05–1.44×, 2 of the 3 pairs within ±1 % of their median)",
    "B is 6.0 % faster by the median pair; not certain: timed to the watch's samples, no finer "
    "than 20 % (B/A per pair 1.06–1.06×, 2 of the 3 pairs within ±0 % of their median): a larger "
    "model times finer",
)


def small(qtbot, window: MainWindow, model: Path) -> None:
    """The window at 1000×700, a model open in it (its workspace shown)."""
    open_model(qtbot, window, model)
    window.resize(1000, 700)
    qtbot.waitUntil(lambda: window.width() == 1000 and window.height() == 700)
    QApplication.processEvents()


def test_an_ab_verdict_shows_whole_at_1000_px(qtbot, window: MainWindow, small_model: Path) -> None:
    small(qtbot, window, small_model)
    verdict = window.workspace.compare.verdict
    assert verdict.isVisible() and verdict.width() < 700  # beside the A/B controls
    for text in VERDICTS:
        verdict.setText(text)
        shown = super(type(verdict), verdict).text()
        assert shown == text, shown  # not cut: "…" would end it


def cut_cells(table: QTableWidget) -> list[str]:
    """Cells whose text does not fit the room they are drawn in: past the table's right edge,
    or wrapped onto more lines than their row has."""
    cut = []
    right = table.viewport().width()
    # A cell's text is drawn inside its focus frame's margin, on each side (QCommonStyle's).
    margins = 2 * (table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin) + 1)
    for column in range(table.columnCount()):
        left, width = table.columnViewportPosition(column), table.columnWidth(column)
        for row in range(table.rowCount()):
            item = table.item(row, column)
            text = item.text() if item is not None else ""
            room = width - margins
            bold = item is not None and item.font().bold()
            metrics = QFontMetrics(item.font()) if bold else table.fontMetrics()
            flags = int(Qt.TextFlag.TextWordWrap)
            needs = metrics.boundingRect(QRect(0, 0, room, 1 << 20), flags, text)
            if left + width > right or needs.height() > table.rowHeight(row):
                cut.append(f"{row},{column}: {text!r}")
    return cut


def test_a_ranks_answers_ways_show_whole_at_1000_px(
    qtbot, window: MainWindow, small_model: Path
) -> None:
    small(qtbot, window, small_model)
    found = ranks_found(ranks_run(0.13, 192 * MiB, 161 * MiB), limit=256 * MiB)
    slice_way = found.ways[0].way  # slice · sequential
    whole = dataclasses.replace(slice_way, mode="whole")
    refused = WayMeasured(
        whole,
        516 * MiB,
        refused="needs more than 260 MiB: its weights alone, 4 copies of the model's 65 MiB",
    )
    one = dataclasses.replace(
        slice_way, mode="one-reader", strategy="direct", options=LoadOptions(workers=4)
    )
    other = WayMeasured(one, GiB // 3, runs=(ranks_run(0.15, 166 * MiB, 164 * MiB),))
    found = dataclasses.replace(found, ways=(*found.ways, other, refused))
    view = window.workspace.recommendation
    tabs = window.workspace.tabs
    tabs.setCurrentIndex(tabs.indexOf(view))
    view.draw(RecommendationShown("done", ranks_found=found))
    QApplication.processEvents()
    table = view.ranking
    assert table.rowCount() == len(found.ways)
    assert table.horizontalHeader().length() <= table.viewport().width()
    assert cut_cells(table) == []


def ab_run_under_a_limit(label: str, pair: int) -> RunRecord:
    """A run of an A/B as a user's table has them: a long name and spec, a limit, memory."""
    held = MemoryLimit(
        512 * MiB, 300 * MiB, 200 * MiB, 100 * MiB, 0, 200 * MiB, 100 * MiB, 0, False, 0, 0,
        None, "/sys/fs/cgroup/modelmon-run", 2,
    )  # fmt: skip
    result = dataclasses.replace(run(480.0), memory_limit=held, parent_peak_rss=180 * 10**6)
    rss = (np.array([0.1, 0.2]), np.array([90e6, 123.45e6]))
    return RunRecord(
        label,
        "sequential workers=8 threads=2 chunk=64MiB fadvise=sequential readahead=4096 verify=true",
        pair,
        SessionResult(result, 0.1, {}, {"workers_rss": rss}, {}, {}),
        session="A/B 12 at 14:03:55",
    )


def test_the_runs_tables_limit_and_status_show_at_1000_px(
    qtbot, window: MainWindow, small_model: Path
) -> None:
    small(qtbot, window, small_model)
    table = window.workspace.results
    records = [ab_run_under_a_limit(label, pair) for pair in range(2) for label in "AB"]
    for record in records:
        table.add(record)
    QApplication.processEvents()
    room = table.viewport().width()
    assert table.horizontalHeader().length() <= room  # no scrolling sideways
    for column in (SECONDS, MBPS, CEILING_COLUMN, LIMIT):  # the figures and the limit whole
        assert table.columnWidth(column) >= table.sizeHintForColumn(column), column
    assert cell_text(records[0], LIMIT) == "512 MiB"
    status = table.columnViewportPosition(STATUS)
    assert room - status >= 10 * table.fontMetrics().averageCharWidth()  # the status in sight
    # A word narrowed to "…" is whole in its tooltip.
    narrowed = [
        column
        for column in range(STATUS)
        if table.columnWidth(column) < table.sizeHintForColumn(column)
    ]
    assert narrowed
    for column in narrowed:
        tip = cell_tip(records[0], column)
        assert tip is not None and tip.startswith(cell_text(records[0], column)), column
    # Wider again, the words get their room back.
    window.resize(1600, 700)
    qtbot.waitUntil(lambda: table.viewport().width() > room + 400)
    QApplication.processEvents()
    assert all(
        table.columnWidth(column) >= table.sizeHintForColumn(column) for column in range(STATUS)
    )


def test_the_memory_plots_key_shows_whole_at_1000_px(
    qtbot, window: MainWindow, small_model: Path
) -> None:
    small(qtbot, window, small_model)
    plot, tabs = window.workspace.memory, window.workspace.tabs
    tabs.setCurrentIndex(next(i for i in range(tabs.count()) if tabs.widget(i).isAncestorOf(plot)))
    QApplication.processEvents()
    caption = plot.caption

    def shown() -> str:
        return super(type(caption), caption).text()

    assert shown() == caption.text() and "workers' RSS" in shown(), shown()
    # Under a memory limit: its lines are drawn, and named, whole too.
    times = np.array([0.1, 0.2])
    names = ("workers_rss", "mem_available", "limit_bytes", "cgroup_bytes", "cgroup_anon_bytes")
    series = {name: (times, np.array([1e8, 2e8])) for name in names}
    plot.show_snapshot(MetricSnapshot("A", series, {}, {}))
    QApplication.processEvents()
    # Whole, or said shorter: never cut (the label's own layout wraps a word early).
    assert "limit" in caption.text() and shown() in plot.view.key_forms(names), shown()
    assert "…" not in shown() and shown().endswith("cache (light)"), shown()
    plot.clear()  # no run: no limit's words
    assert "limit" not in caption.text()


# A local disk's set, as Measure ceilings leaves it: every figure four digits.
CEILINGS = (
    ("storage", 1234.0),
    ("memory_fill", 3641.0),
    ("sequential_read", 1187.0),
    ("parallel_read", 1234.0),
    ("parallel_read_warm", 9876.0),
    ("memcpy", 12345.0),
)


def measured(names: tuple[tuple[str, float], ...]) -> Ceilings:
    when = time.time()
    return Ceilings(
        "m",
        tuple(Ceiling(name, mbps, (mbps,), f"{name} readers", True, when) for name, mbps in names),
    )


def test_the_ceilings_beside_the_ab_bar_fit_at_1000_px(
    qtbot, window: MainWindow, small_model: Path
) -> None:
    small(qtbot, window, small_model)
    window.workspace.compare.show_ceilings(measured(CEILINGS))
    QApplication.processEvents()
    label = window.workspace.compare.ceilings_label
    shown = super(type(label), label).text()
    assert not shown.endswith("…"), shown  # its words fit the room it has
    assert "storage 1,234 MB/s" in shown and "memory fill 3,641 MB/s" in shown, shown
    tip = label.toolTip()
    assert all(f"{CEILING_NAMES[name]}: " in tip for name, _ in CEILINGS), tip  # the whole set


def test_a_ceiling_near_the_top_of_the_throughput_plot_keeps_its_label_in_view(
    qtbot, window: MainWindow, small_model: Path
) -> None:
    small(qtbot, window, small_model)
    plot = window.workspace.throughput
    # Memory fill is the highest bound in range: its line is near the plot's top.
    plot.set_ceilings(measured(CEILINGS))
    QApplication.processEvents()
    view = plot.item.vb
    top = view.viewRange()[1][1]
    area = view.sceneBoundingRect()
    labelled = {names[-1][0]: line for line, names in plot.ceiling_labels}
    line = labelled["memory fill"]
    assert 0.8 * top < line.value() < top  # near the top, in view
    label = line.label
    assert label.isVisible() and label.toPlainText().startswith("memory fill"), label.toPlainText()
    assert area.contains(label.sceneBoundingRect()), (area, label.sceneBoundingRect())
    # Every label of a line in view is in view.
    for line, _ in plot.ceiling_labels:
        if line.value() < top:
            assert area.contains(line.label.sceneBoundingRect()), line.label.toPlainText()
