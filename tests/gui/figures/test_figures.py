"""The exported figures, drawn from real runs without Qt: every plot, valid SVG and PDF that
other renderers draw alike, the runs' series where the plot puts them, cancelled runs named."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from modelmon.core import Model, open_model, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import Session
from modelmon.gui.figures import DRAWN, FigureRuns, drawn, figure_bytes
from modelmon.gui.state.live import run_rates
from modelmon.gui.state.records import RunRecord

from .svg_checks import bluish, cairosvg_png, check_svg, crop, curve_tops, rsvg_png, saturated

HEADING = ["modelmon · test model · exported 2024-01-01 12:00", "A: sequential", "B: mmap"]
# Cold 64 KiB reads without readahead: long enough for several 50 ms samples.
OPTIONS = LoadOptions(
    workers=2, threads=1, chunk=64 << 10, fadvise="random", cache="cold", discard=True
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("figures")
    return open_model(write_safetensors_model(folder, layers=4, hidden=512, vocab=4096, shards=2))


@pytest.fixture(scope="module")
def runs(model: Model) -> FigureRuns:
    a = Session(model, "pread", OPTIONS, interval_s=0.05).run()
    b = Session(model, "mmap-shared-fd", OPTIONS.with_(workers=3), interval_s=0.05).run()
    assert a.result.status == b.result.status == "ok"
    return FigureRuns(
        (RunRecord("A", "pread", None, a), RunRecord("B", "mmap-shared-fd", None, b)),
        model,
        size_px=(700, 360),
        block_order=tuple(model.blocks()),
    )


@pytest.mark.parametrize("name", DRAWN)
def test_every_plot_is_a_valid_svg_that_two_renderers_draw_alike(name: str, runs: FigureRuns):
    data = figure_bytes(name, runs, "svg", HEADING)
    check_svg(data)
    by_cairo = cairosvg_png(data, 700)
    assert saturated(by_cairo).sum() > 50, "no data drawn"  # the runs' colours are there
    by_rsvg = rsvg_png(data, 700)
    if by_rsvg is not None:  # librsvg draws the same picture (up to anti-aliasing)
        rows = min(len(by_rsvg), len(by_cairo))  # their sizes may round differently
        assert abs(len(by_rsvg) - len(by_cairo)) <= 1 and by_rsvg.shape[1] == by_cairo.shape[1]
        differs = np.abs(by_rsvg[:rows] - by_cairo[:rows]).max(axis=2) > 64
        assert differs.mean() < 0.01


def test_a_pdf_is_written_too(runs: FigureRuns):
    data = figure_bytes("Throughput", runs, "pdf", HEADING)
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")


def test_the_throughput_figure_draws_the_rates_the_plot_shows_where_it_shows_them(
    runs: FigureRuns,
):
    """Run A's curve, read back from the rendered SVG, has the shape of its binned rates."""
    record = runs.runs[0]
    assert record.outcome is not None
    width, rates, _ = run_rates(record.outcome.reads)
    top = float(rates.max()) * 1.1
    only_a = FigureRuns((record,), runs.model, x_range=(0.0, len(rates) * width), y_range=(0, top))
    data, figure = drawn("Throughput", only_a, "svg", HEADING)
    image = cairosvg_png(data, 1400)
    box = figure.axes[0].get_position()  # in figure fractions, from the bottom left
    region = crop(image, (box.x0, 1.0 - box.y1, box.width, box.height))
    centres = (np.arange(len(rates)) + 0.5) / len(rates)  # each bin's middle
    # curve_tops looks at a pixel column either side of each middle: where the line between
    # two middles is steep it is higher there than at the middle, as the drawn line is.
    rows, columns = region.shape[:2]
    around = np.stack([centres - 1 / columns, centres, centres + 1 / columns])
    line = np.interp(around, centres, rates / top).max(axis=0)
    # A stroke of width w along a line of slope s (pixels per pixel) reaches w/2·√(1+s²)
    # above its middle in a column: next to a steep segment that is many pixels.
    px_per_point = image.shape[1] / (figure.get_figwidth() * 72)
    half_stroke = figure.axes[0].lines[0].get_linewidth() * px_per_point / 2 + 1  # + antialias
    steps = np.diff(rates / top) * rows / (columns / len(rates))  # each segment's slope
    steepest = np.maximum(np.append(np.abs(steps), 0), np.insert(np.abs(steps), 0, 0))
    stroke = half_stroke * np.sqrt(1 + steepest**2) / rows
    tops = curve_tops(bluish(region), centres)
    assert np.all(tops >= line - 0.02) and np.all(tops <= line + stroke + 0.02), (tops, line)


def test_series_over_intervals_are_drawn_at_their_middles(runs: FigureRuns):
    outcome = runs.runs[0].outcome
    assert outcome is not None
    _, figure = drawn("Device reads", FigureRuns((runs.runs[0],), runs.model), "svg")
    lines = figure.axes[0].get_lines()
    times = outcome.series["load_mbps"][0]
    starts, ends = outcome.spans
    assert np.allclose(times, (starts + ends) / 2)
    assert any(np.allclose(line.get_xdata(), times) for line in lines)


def test_a_cancelled_run_is_named_as_cancelled(model: Model):
    cancel = threading.Event()

    def on_message(message: object) -> None:
        if type(message).__name__ == "ReadBatch":  # reading: stop it now
            cancel.set()

    slow = OPTIONS.with_(chunk=4096)
    outcome = Session(model, "pread", slow, interval_s=0.05, on_message=on_message, cancel=cancel)
    result = outcome.run()
    assert result.result.status == "cancelled"
    record = RunRecord("A", "pread", 0, result)
    for name in ("Throughput", "Worker CPU", "Access pattern", "Blocks"):
        _, figure = drawn(name, FigureRuns((record,), model), "svg")
        words = [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))]
        assert any("run A · pair 1 (cancelled)" in w for w in words), (name, words)
        assert not any("No finished run" in w for w in words)


def test_no_run_says_so_instead_of_an_empty_frame(model: Model):
    _, figure = drawn("Throughput", FigureRuns((), model), "svg")
    words = [t.get_text() for t in figure.findobj(lambda a: hasattr(a, "get_text"))]
    assert any("No finished run" in w for w in words)


def test_figures_are_the_same_file_each_time(runs: FigureRuns, tmp_path: Path):
    assert figure_bytes("Memory", runs, "svg") == figure_bytes("Memory", runs, "svg")
