"""Every kind of run the plots show is drawn in the SVG and PDF figures, as the PNG shows
it: modelmon's own load, an A/B, a program run as a configuration (``cmd:``), and a watch
of a command. Each figure holds the run's drawing (its curves in its colour, its name in the
key), never the "nothing to draw" note; the heading and a long command fit the figure."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from xml.dom import minidom

import numpy as np
import pytest

from modelmon.core import (
    Model,
    Watch,
    open_model,
    parse_configuration,
    run_for,
    write_safetensors_model,
)
from modelmon.core.options import LoadOptions
from modelmon.core.runs import Session, arrival_blocks
from modelmon.gui.figures import FigureRuns, drawn
from modelmon.gui.figures.canvas import NO_RUN, styled
from modelmon.gui.state.colours import RUN_COLOURS, worker_colour
from modelmon.gui.state.records import WATCH_LABEL, RunRecord

from .pdf_checks import pdf_texts, stroked_paths
from .svg_checks import cairosvg_png, check_svg, saturated

# Cold 4 KiB reads without readahead: a few tenths of a second here, several throughput
# bins and 50 ms samples.
OPTIONS = LoadOptions(
    workers=2, threads=1, chunk=4096, fadvise="random", cache="cold", discard=True
)
# A load other than modelmon's, watched: the model file given, read in 4 KiB steps without
# readahead, as the load above, and paced to take over a second whatever the disk: the watch
# spaces its page scans to stay within its CPU share (a scan of milliseconds: one every few
# tenths of a second), and the figure needs several of them to draw the reads.
READER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
reads = 0
while os.read(fd, 4096):
    reads += 1
    if reads % 64 == 0:
        time.sleep(0.015)
"""
KINDS = ("load", "ab", "program", "watch")
PLOTS = ("Throughput", "Access pattern", "Memory", "Page cache")
LINE_PLOTS = ("Throughput", "Memory")  # each run is a curve in its colour
NOTHING = "run to draw"  # NO_RUN's words (its "fi" is a ligature in a PDF's text)
HEADING = ["modelmon · test model · exported 2024-01-01 12:00"]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("kinds")
    return open_model(write_safetensors_model(folder, layers=2, hidden=512, vocab=4096))


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("reader") / "read_the_model.py"
    path.write_text(READER)
    return path


def run_of(model: Model, label: str, pair: int | None = None) -> RunRecord:
    outcome = Session(model, "pread", OPTIONS, interval_s=0.05).run()
    assert outcome.result.status == "ok", outcome.result.error
    session = "A/B 1 at 12:00:00" if pair is not None else None
    return RunRecord(label, "pread", pair, outcome, session=session)


@pytest.fixture(scope="module")
def kinds(model: Model, reader: Path) -> dict[str, tuple[RunRecord, ...]]:
    program = parse_configuration(f"cmd: {sys.executable} {reader} {{path}}")
    ran = run_for(model, program, interval_s=0.05).run()
    assert ran.result.status == "ok", ran.result.error
    command = (sys.executable, str(reader), model.path)
    watched = Watch(command, model=model.paths, cache="cold", interval_s=0.05).run()
    assert watched.bytes_read > 0, watched.notes
    return {
        "load": (run_of(model, "A"),),
        "ab": (run_of(model, "A", 0), run_of(model, "B", 0)),
        "program": (RunRecord("B", program.spec, None, ran),),
        "watch": (RunRecord(WATCH_LABEL, " ".join(command), None, watched, number=1),),
    }


def names(records: tuple[RunRecord, ...]) -> list[str]:
    """How the figures name the runs: as the plots' keys do."""
    keys = {"A": "run A", "B": "run B", WATCH_LABEL: "watch"}
    return [
        keys[r.label] + (f" · pair {r.pair + 1}" if r.pair is not None else "") for r in records
    ]


def drawings(plot: str, records: tuple[RunRecord, ...]) -> list[tuple[str, int, int]]:
    """What holds the runs' drawing, as (colour, least vertices of one path, least paths):
    each run's curve (the key's sample line has two vertices), or the latest run's reads as
    segments in its first reader's colour (more than the key's one)."""
    if plot in LINE_PLOTS:
        return [(RUN_COLOURS[r.label], 3, 1) for r in records]
    if plot == "Access pattern":
        latest = records[-1]
        if latest.sampled is not None:
            workers = latest.sampled.reads["worker"]
        else:
            workers = latest.watched.samples.arrivals["worker"]
        return [(worker_colour(int(np.unique(workers)[0])), 2, 2)]
    return []


def svg_comments(data: bytes) -> list[str]:
    """The figure's text: matplotlib writes each text drawn as outlines with its words."""
    return [c.decode().strip() for c in re.findall(rb"<!--(.*?)-->", data, re.S)]


def svg_stroked_paths(data: bytes, colour: str) -> list[int]:
    """The vertices of each path stroked in ``colour``, the key's lines left out."""

    def in_key(node) -> bool:
        while node is not None and node.nodeType == node.ELEMENT_NODE:
            if node.getAttribute("id").startswith("legend"):
                return True
            node = node.parentNode
        return False

    return [
        len(re.findall(r"[ML]", path.getAttribute("d")))
        for path in minidom.parseString(data).getElementsByTagName("path")
        if f"stroke: {colour}" in path.getAttribute("style") and not in_key(path)
    ]


def assert_drawn(paths: list[int], vertices: int, count: int, what: str) -> None:
    assert len([p for p in paths if p >= vertices]) >= count, (what, paths)


@pytest.mark.parametrize("plot", PLOTS)
@pytest.mark.parametrize("kind", KINDS)
def test_an_svg_figure_draws_every_kind_of_run(kind: str, plot: str, kinds, model: Model):
    records = kinds[kind]
    data, _ = drawn(plot, FigureRuns(records, model, size_px=(700, 360)), "svg", HEADING)
    check_svg(data)
    words = " ".join(svg_comments(data))
    assert NO_RUN not in words and NOTHING not in words, words
    shown = names(records) if plot in LINE_PLOTS else names(records)[-1:]
    assert all(name in words for name in shown), (shown, words)
    for colour, vertices, count in drawings(plot, records):
        assert_drawn(svg_stroked_paths(data, colour), vertices, count, f"{plot} in {colour}")
    if plot == "Page cache":
        assert minidom.parseString(data).getElementsByTagName("image"), "no page-cache picture"
    assert saturated(cairosvg_png(data, 700)).sum() > 50, "no data drawn"


@pytest.mark.parametrize("plot", PLOTS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_pdf_figure_draws_every_kind_of_run(kind: str, plot: str, kinds, model: Model):
    records = kinds[kind]
    data, _ = drawn(plot, FigureRuns(records, model, size_px=(700, 360)), "pdf", HEADING)
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    texts = pdf_texts(data)
    assert not any(NOTHING in t for t in texts), texts
    shown = names(records) if plot in LINE_PLOTS else names(records)[-1:]
    assert all(any(name in t for t in texts) for name in shown), (shown, texts)
    for colour, vertices, count in drawings(plot, records):
        assert_drawn(stroked_paths(data, colour), vertices, count, f"{plot} in {colour}")
    if plot == "Page cache":
        assert b"/Subtype /Image" in data, "no page-cache picture"


def test_a_figure_of_nothing_says_so_in_both_formats(model: Model):
    """The checks above can fail: a figure without runs holds the note, no run's colour."""
    empty = FigureRuns((), model)
    svg, _ = drawn("Throughput", empty, "svg")
    assert NO_RUN in " ".join(svg_comments(svg))
    assert not svg_stroked_paths(svg, RUN_COLOURS["A"])
    pdf, _ = drawn("Throughput", empty, "pdf")
    assert any(NOTHING in t for t in pdf_texts(pdf))
    assert not stroked_paths(pdf, RUN_COLOURS["A"])


def test_a_watchs_blocks_are_drawn_from_its_arrivals_or_said_missing(
    kinds, model: Model, reader: Path
):
    """A watch's blocks are when their bytes arrived (``arrival_blocks``), drawn in the
    watch's colour; a watch that saw none arrive (a bucket's bytes come over sockets) says
    so in the figure rather than drawing an empty frame."""
    command = (sys.executable, str(reader), model.path)
    watch = Watch(command, model=model.paths, cache="cold", interval_s=0.05)
    watched = watch.run()
    arrivals = arrival_blocks(model, watch, watched)
    assert [b.name for b in arrivals] == model.blocks(), arrivals
    assert all(0 <= b.start <= b.end <= (watched.seconds or 0) + 0.5 for b in arrivals)
    timed = RunRecord(WATCH_LABEL, " ".join(command), None, watched, number=1, arrivals=arrivals)
    data, _ = drawn("Blocks", FigureRuns((timed,), model), "svg", HEADING)
    words = " ".join(svg_comments(data))
    assert "watch (first block" in words and NOTHING not in words, words
    assert saturated(cairosvg_png(data, 700)).sum() > 50, "no bar drawn"
    (untimed,) = kinds["watch"]  # made without its arrivals
    data, _ = drawn("Blocks", FigureRuns((untimed,), model), "svg", HEADING)
    words = " ".join(svg_comments(data))
    assert "watch: no byte of the model was seen arriving in the page cache" in words, words


def test_a_watch_that_saw_part_of_the_model_arrive_says_why_it_has_no_blocks(kinds) -> None:
    """The record's words for a watch without blocks are the engine's reason
    (``untimed_reason``, tests/core/runs/test_arrivals.py), and a run that did not finish
    says that, not that no block loaded."""
    watched = kinds["watch"][0].outcome
    warm = dataclasses.replace(watched.cache, resident_before=0.6, cold=False)
    record = RunRecord(WATCH_LABEL, "w", None, dataclasses.replace(watched, cache=warm))
    assert record.untimed is not None
    assert record.untimed.startswith("60% of the model was in the page cache before it")
    cancelled = dataclasses.replace(watched, ended_by="cancel")
    record = RunRecord(WATCH_LABEL, "w", None, cancelled)
    assert record.untimed == "cancelled: blocks are timed only for a run that finished"


def test_a_long_command_is_in_the_heading_whole_and_within_the_figure(kinds, model: Model):
    from matplotlib import font_manager
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    record = kinds["program"][0]
    command = record.spec + " --note=" + "/a-rather-long-argument" * 8 + " --size=1234567890"
    heading = [HEADING[0], f"B: {command} — 1,234 MB/s in 0.52 s"]
    data, figure = drawn(
        "Throughput", FigureRuns((record,), model, size_px=(450, 300)), "svg", heading
    )
    title = figure.get_suptitle()
    lines = title.split("\n")
    assert len(lines) > len(heading) and "…" not in title
    assert "".join(lines).replace(" ", "") == "".join(heading).replace(" ", "")
    assert any("1234567890" in line for line in lines)  # a number is never cut
    assert any("1,234 MB/s" in line for line in lines)
    (text,) = [t for t in figure.texts if t.get_text() == title]
    with styled():
        try:
            right = text.get_window_extent(FigureCanvasAgg(figure).get_renderer()).x1
        finally:
            font_manager._get_font.cache_clear()  # as the figures do: no font file left open
    assert right <= figure.bbox.x1
    (description,) = minidom.parseString(data).getElementsByTagName("dc:description")
    assert description.firstChild.data == title


@pytest.mark.parametrize("fmt", ["svg", "pdf"])
def test_an_engine_run_is_drawn_as_a_command_run_is(fmt: str, model: Model):
    """An ``engine:`` side is a program run too: its figure has its run, never the note."""
    engine = parse_configuration("engine: safetensors")
    ran = run_for(model, engine, interval_s=0.05).run()
    assert ran.result.status == "ok" and ran.watch is not None, ran.result.error
    record = RunRecord("A", engine.spec, None, ran)
    data, figure = drawn("Throughput", FigureRuns((record,), model), fmt, HEADING)
    texts = svg_comments(data) if fmt == "svg" else pdf_texts(data)
    assert not any(NOTHING in t for t in texts) and any("run A" in t for t in texts), texts
    (line,) = [line for line in figure.axes[0].get_lines() if line.get_label() == "run A"]
    assert np.nansum(line.get_ydata()) > 0  # the bytes that arrived, as MB/s


def test_a_sharded_models_file_lines_are_named_in_both_pictures(tmp_path: Path):
    """The dashed lines where each file begins carry the file's name in the page cache's
    picture as in the access pattern's: a line nothing names reads as a boundary of the
    cache."""
    sharded = open_model(write_safetensors_model(tmp_path, layers=2, hidden=256, shards=2))
    record = run_of(sharded, "A")
    names = [file.path.rsplit("/", 1)[-1] for file in sharded.files]
    for plot in ("Page cache", "Access pattern"):
        data, _ = drawn(plot, FigureRuns((record,), sharded, size_px=(700, 360)), "svg", HEADING)
        said = " ".join(svg_comments(data))
        assert all(name in said for name in names), plot  # the first, at offset 0, too
