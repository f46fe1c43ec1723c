"""File ▸ Export plot draws the runs its heading names, for every plot, whichever tab is on
screen: after a load, after a watch (which clears the plots), and after a later run that
joins the watch. No tab is shown between the runs and the exports, as a user who exports
from the menu without looking at the plot first."""

from __future__ import annotations

import sys
from pathlib import Path
from xml.dom import minidom

import numpy as np
import pytest

from modelmon.core import write_safetensors_model
from modelmon.gui.figures.canvas import NO_RUN
from modelmon.gui.main_window import MainWindow
from modelmon.gui.plots.image_export import PNG_SCALE, heading_height
from modelmon.gui.state.colours import RUN_COLOURS
from modelmon.gui.state.export_format import plot_heading
from modelmon.gui.state.records import WATCH_LABEL, RunRecord, run_key
from modelmon.gui.state.watch_job import WatchInput, watch_request

from .conftest import open_model, wait_idle
from .figures.svg_checks import check_svg, pixels
from .figures.test_run_kinds import OPTIONS, READER, svg_comments
from .test_export import export

# Blocks too: a load's as it read them, a watch's as they arrived.
EACH = ("Throughput", "IO wait", "Worker CPU", "Memory", "Device reads", "Blocks")
ONE = ("Access pattern", "Page cache")  # the last run only
PLOTS = (*EACH, *ONE)
LINE_PLOTS = ("Throughput", "Memory")  # each run a curve in its colour, on screen and off
W = WATCH_LABEL


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("agree"), layers=2, hidden=512, vocab=4096
    )


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reader") / "read_the_model.py"
    path.write_text(READER)
    return path


def latest(window: MainWindow, label: str) -> RunRecord:
    return [r for r in window.bench.records if r.label == label][-1]


def flat(text: str) -> str:
    return "".join(text.split())


def named(heading: str, record: RunRecord) -> bool:
    """The heading has ``record``'s line (wrapped anywhere: compared without spaces)."""
    return flat(f"{record.run_name}: {record.spec}") in flat(heading)


def figure_words(data: bytes) -> tuple[str, list[str]]:
    """The SVG's heading (its description), and every other text the figure holds."""
    check_svg(data)
    (description,) = minidom.parseString(data).getElementsByTagName("dc:description")
    heading = description.firstChild.data
    return heading, [c for c in svg_comments(data) if flat(c) != flat(heading)]


def keyed(words: list[str], label: str) -> bool:
    """The figure names ``label``'s run in its key ("run A", "watch (cancelled)") or its
    title ("Access pattern — run B")."""
    key = run_key(label)
    return any(t == key or t.startswith(f"{key} ") or f"— {key}" in t for t in words)


def check_svg_export(window: MainWindow, name: str, data: bytes, expected: set[str]) -> None:
    """The heading names the last run of each expected label and no other run; the figure
    draws those (their keys or titles) and no other label's."""
    heading, words = figure_words(data)
    labels = {r.label for r in window.bench.records}
    for label in labels:
        assert named(heading, latest(window, label)) == (label in expected), (name, label, heading)
    for label in labels - expected:
        assert not keyed(words, label), (name, label, words)
    # A plot without data on this machine (no device counters) says so instead.
    unavailable = any("counters here" in t for t in words)
    if expected and not unavailable:
        assert NO_RUN not in words, (name, words)
        assert all(keyed(words, label) for label in expected), (name, expected, words)
    elif not expected:
        assert NO_RUN in words, (name, words)


def check_png_export(window: MainWindow, name: str, data: bytes, expected: set[str]) -> None:
    """The plot painted is the plot drawn from the expected runs: its own runs are those,
    and a line plot has each one's curve in its colour."""
    plot = window.workspace.plots[name]
    assert set(plot.run_labels) == expected, (name, plot.run_labels, expected)
    if name not in LINE_PLOTS:
        return
    runs = [latest(window, label) for label in sorted(expected)]
    top = heading_height(plot, plot_heading(window.bench.info.name, runs, "x")) * PNG_SCALE
    image = pixels(data)[top:]
    for label in expected:
        colour = np.array([int(RUN_COLOURS[label][i : i + 2], 16) for i in (1, 3, 5)])
        near = np.abs(image - colour).max(axis=2) < 40
        assert near.sum() > 20, f"{name}: no curve of {run_key(label)} in the PNG"


def check_every_plot(qtbot, window, tmp_path: Path, stage: str, each: set[str], one: set[str]):
    """Export every plot as SVG and PNG: ``each`` are the runs the overlaying plots show,
    ``one`` the run the access pattern and the page cache show."""
    shown = window.workspace.tabs.currentIndex()
    exporter = window.workspace.exporter
    for name in PLOTS:
        expected = each if name in EACH else one
        for fmt in ("svg", "png"):
            path = tmp_path / f"{stage}-{name.replace(' ', '-')}.{fmt}"
            ok, text = export(qtbot, window, lambda p, n=name: exporter.export_plot(n, p), path)
            assert ok, text
            if fmt == "svg":
                check_svg_export(window, name, path.read_bytes(), expected)
            else:
                check_png_export(window, name, path.read_bytes(), expected)
        assert window.workspace.tabs.currentIndex() == shown  # the export changed no view


def test_every_plot_exports_the_runs_its_heading_names(
    qtbot, window: MainWindow, one_file: Path, reader: Path, tmp_path: Path
):
    open_model(qtbot, window, one_file)
    bench = window.bench
    bench.configs.set("A", "pread", OPTIONS)
    bench.configs.set("B", "pread", OPTIONS)
    bench.run("A")
    wait_idle(qtbot, window)
    assert bench.records[-1].status == "ok", window.messages.message()
    check_every_plot(qtbot, window, tmp_path, "load", {"A"}, {"A"})

    line = f"{sys.executable} {reader} {{path}}"
    bench.watch(watch_request(WatchInput(line, None, "", "cold", None), bench.info.model))
    wait_idle(qtbot, window)
    assert bench.records[-1].label == W and bench.records[-1].status == "ok"
    check_every_plot(qtbot, window, tmp_path, "watch", {W}, {W})

    bench.run("B")
    wait_idle(qtbot, window)
    assert bench.records[-1].status == "ok", window.messages.message()
    check_every_plot(qtbot, window, tmp_path, "later", {W, "B"}, {"B"})
