"""File ▸ Export of a plot from the window, for every kind of run it plots: modelmon's own
load, an A/B, a program run as configuration B (``cmd:``) and a watch of a command, each as
PNG, SVG and PDF. Each file holds the run's drawing (never the "nothing to draw" note while
the message says it was written), a command whole (never elided), and a heading within the
picture's width."""

from __future__ import annotations

import sys
from pathlib import Path
from xml.dom import minidom

import numpy as np
import pytest
from PySide6.QtGui import QFontMetrics

from modelmon.core import write_safetensors_model
from modelmon.gui.figures.canvas import NO_RUN
from modelmon.gui.main_window import MainWindow
from modelmon.gui.plots.image_export import PNG_SCALE, heading_height, heading_lines
from modelmon.gui.state.colours import RUN_COLOURS
from modelmon.gui.state.export_format import plot_heading
from modelmon.gui.state.programs import PROGRAM_OPTIONS
from modelmon.gui.state.records import WATCH_LABEL
from modelmon.gui.state.watch_job import WatchInput, watch_request

from .conftest import open_model, wait_idle
from .figures.pdf_checks import pdf_texts, stroked_paths
from .figures.svg_checks import check_svg, pixels
from .figures.test_run_kinds import (
    NOTHING,
    OPTIONS,
    READER,
    assert_drawn,
    svg_comments,
    svg_stroked_paths,
)
from .test_export import export

FORMATS = ("png", "svg", "pdf")
# Words the reader ignores: its command is wider than the plot, and longer than a status
# line's 80 characters.
TAIL = "--note=" + "a-long-argument-" * 6 + "end --size=1234567890"


@pytest.fixture(scope="module")
def one_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("kinds"), layers=2, hidden=512, vocab=4096
    )


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reader") / "read_the_model.py"
    path.write_text(READER)
    return path


def exported(qtbot, window: MainWindow, tmp_path: Path, fmt: str) -> bytes:
    """The Throughput plot exported as ``fmt`` through File ▸ Export's exporter."""
    path = tmp_path / f"throughput.{fmt}"
    exporter = window.workspace.exporter
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Throughput", p), path)
    assert ok and str(path) in text, text
    return path.read_bytes()


def ink_bands(region: np.ndarray, background: np.ndarray) -> int:
    """Rows of text in ``region``: runs of pixel rows that differ from the background."""
    inked = (np.abs(region - background).max(axis=2) > 60).any(axis=1)
    return int(np.count_nonzero(inked[1:] & ~inked[:-1]) + inked[0])


def check_png(window: MainWindow, data: bytes, labels: list[str]) -> None:
    """The plot's picture: the runs' curves in their colours below a heading whose lines,
    wrapped to the plot's width, are all there."""
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    plot = window.workspace.throughput
    image = pixels(data)
    heading = plot_heading(window.bench.info.name, list(window.bench.shown_runs.values()), "x")
    top = heading_height(plot, heading) * PNG_SCALE
    assert image.shape[:2] == (plot.plot.height() * PNG_SCALE + top, plot.plot.width() * 2)
    for label in labels:
        colour = np.array([int(RUN_COLOURS[label][i : i + 2], 16) for i in (1, 3, 5)])
        near = np.abs(image[top:] - colour).max(axis=2) < 40
        assert near.sum() > 20, f"no curve of run {label} in the PNG"
    lines = heading_lines(plot, heading)
    assert ink_bands(image[:top], image[0, 0]) == len(lines)
    metrics = QFontMetrics(plot.font())
    if any(metrics.horizontalAdvance(line) > plot.plot.width() for line in heading):
        assert len(lines) > len(heading)  # a line wider than the plot wraps: never cut off


def check_svg_file(data: bytes, names: list[str], labels: list[str]) -> str:
    """The figure: the runs named, their curves in their colours, no note; its heading."""
    check_svg(data)
    words = " ".join(svg_comments(data))
    assert NO_RUN not in words and all(name in words for name in names), words
    for label in labels:  # its curve: more vertices than the key's sample line
        assert_drawn(svg_stroked_paths(data, RUN_COLOURS[label]), 3, 1, f"run {label}")
    (description,) = minidom.parseString(data).getElementsByTagName("dc:description")
    return description.firstChild.data


def check_pdf_file(data: bytes, names: list[str], labels: list[str]) -> None:
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    texts = pdf_texts(data)
    assert not any(NOTHING in t for t in texts), texts
    assert all(any(name in t for t in texts) for name in names), (names, texts)
    for label in labels:
        assert_drawn(stroked_paths(data, RUN_COLOURS[label]), 3, 1, f"run {label}")


def check_export(qtbot, window, tmp_path, fmt: str, names: list[str], labels: list[str]):
    data = exported(qtbot, window, tmp_path, fmt)
    if fmt == "png":
        check_png(window, data, labels)
    elif fmt == "svg":
        heading = check_svg_file(data, names, labels)
        assert "…" not in heading  # every command whole
        for record in window.bench.shown_runs.values():
            assert record.spec.replace(" ", "") in heading.replace("\n", "").replace(" ", "")
    else:
        check_pdf_file(data, names, labels)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_load_of_modelmon_is_exported(qtbot, window, one_file, tmp_path, fmt):
    open_model(qtbot, window, one_file)
    window.bench.configs.set("A", "pread", OPTIONS)
    window.bench.run("A")
    wait_idle(qtbot, window)
    assert window.bench.records[-1].status == "ok", window.messages.message()
    check_export(qtbot, window, tmp_path, fmt, ["run A"], ["A"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_ab_is_exported(qtbot, window, one_file, tmp_path, fmt):
    open_model(qtbot, window, one_file)
    for label in ("A", "B"):
        window.bench.configs.set(label, "pread", OPTIONS)
    window.bench.run_ab(1)
    wait_idle(qtbot, window)
    assert window.bench.ab.result is not None, window.messages.message()
    names = ["run A · pair 1", "run B · pair 1"]
    check_export(qtbot, window, tmp_path, fmt, names, ["A", "B"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_program_run_of_a_command_is_exported(qtbot, window, one_file, reader, tmp_path, fmt):
    open_model(qtbot, window, one_file)
    spec = f"cmd: {sys.executable} {reader} {{path}} {TAIL}"
    window.bench.configs.set("B", spec, PROGRAM_OPTIONS)
    window.bench.run("B")
    wait_idle(qtbot, window)
    record = window.bench.records[-1]
    assert record.status == "ok" and record.watched is not None, window.messages.message()
    assert record.spec == spec
    check_export(qtbot, window, tmp_path, fmt, ["run B"], ["B"])


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_watch_of_a_command_is_exported(qtbot, window, one_file, reader, tmp_path, fmt):
    open_model(qtbot, window, one_file)
    line = f"{sys.executable} {reader} {{path}} {TAIL}"
    given = WatchInput(line, None, "", "cold", None)
    window.bench.watch(watch_request(given, window.bench.info.model))
    wait_idle(qtbot, window)
    record = window.bench.records[-1]
    assert record.label == WATCH_LABEL and record.status == "ok", window.messages.message()
    assert record.spec == f"{sys.executable} {reader} {one_file} {TAIL}"  # whole: > 80 chars
    check_export(qtbot, window, tmp_path, fmt, ["watch"], [WATCH_LABEL])
