"""File ▸ Export plot as SVG from the real window: a figure drawn from the runs the plot
shows, rendered by another SVG renderer, has its data where the PNG of the plot has it."""

from __future__ import annotations

from pathlib import Path
from xml.dom import minidom

import numpy as np

from modelmon.gui.figures import drawn
from modelmon.gui.main_window import MainWindow
from modelmon.gui.plots.image_export import PNG_SCALE, caption_of, heading_height, png_bytes
from modelmon.gui.state.live import run_rates

from .conftest import MEDIUM_OPTIONS, open_model, start_slow_ab, wait_idle
from .figures.svg_checks import (
    bluish,
    cairosvg_png,
    check_svg,
    crop,
    curve_top_spans,
    curve_tops,
    occupancy,
    pixels,
    rsvg_png,
    saturated,
)
from .test_export import export

PEN_REACH = 0.004  # of the plot's width: about three pixels of a PNG or a rendered figure
HEADING = ["modelmon · test · exported 2024-01-01 12:00", "A: one", "B: two"]


def png_region(window: MainWindow, name: str) -> np.ndarray:
    """The plot's data area in its PNG export (the heading's lines above the plot, its
    caption under it)."""
    plot = window.workspace.plots[name]
    image = pixels(png_bytes(plot, HEADING))
    top = heading_height(plot, HEADING)
    under = heading_height(plot, caption_of(plot))
    rect = plot.item.vb.sceneBoundingRect()
    width, height = plot.plot.width(), plot.plot.height() + top + under
    assert image.shape[:2] == (height * PNG_SCALE, width * PNG_SCALE)
    box = (
        rect.x() / width,
        (rect.y() + top) / height,
        rect.width() / width,
        rect.height() / height,
    )
    return crop(image, box)


def svg_region(window: MainWindow, name: str, path: Path) -> np.ndarray:
    """The figure's data area in the SVG the window exported, as cairosvg renders it."""
    data = path.read_bytes()
    check_svg(data)
    plot = window.workspace.plots[name]
    # The same runs, ranges, size and heading give the same layout: where its axes are. The
    # heading (the runs' lines, wrapped) is the file's description.
    (description,) = minidom.parseString(data).getElementsByTagName("dc:description")
    heading = description.firstChild.data.split("\n")
    _, figure = drawn(name, window.workspace.exporter.figure_runs(plot), "svg", heading)
    box = figure.axes[0].get_position()
    image = cairosvg_png(data, 2 * plot.plot.width())
    by_rsvg = rsvg_png(data, 2 * plot.plot.width())
    if by_rsvg is not None:
        rows = min(len(image), len(by_rsvg))
        assert np.abs(image[:rows] - by_rsvg[:rows]).max(axis=2).__gt__(64).mean() < 0.01
    return crop(image, (box.x0, 1.0 - box.y1, box.width, box.height))


def test_svg_figures_put_the_data_where_the_png_of_the_plot_has_it(
    qtbot, window: MainWindow, slow_model: Path, tmp_path: Path
):
    open_model(qtbot, window, slow_model)
    workspace, exporter = window.workspace, window.workspace.exporter
    bench = window.bench
    # A few tenths of a second: a curve of several bins.
    bench.configs.set("A", "pread", MEDIUM_OPTIONS)
    bench.configs.set("B", "mmap-shared-fd", MEDIUM_OPTIONS)
    bench.run_ab(1)
    wait_idle(qtbot, window)
    assert bench.ab.result is not None, window.messages.message()

    # Throughput: run A's curve at each bin's middle, as high in both pictures.
    path = tmp_path / "throughput.svg"
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Throughput", p), path)
    assert ok and "SVG" in text, text
    a_run, b_run = bench.records
    width, rates, _ = run_rates(a_run.outcome.reads)
    middles = (np.arange(len(rates)) + 0.5) * width
    (x0, x1), _ = workspace.throughput.item.vb.viewRange()
    at = (middles - x0) / (x1 - x0)
    png_mask = bluish(png_region(window, "Throughput"))
    svg_mask = bluish(svg_region(window, "Throughput", path))
    from_png, from_svg = curve_tops(png_mask, at), curve_tops(svg_mask, at)
    # Within a pen's reach either side: next to a steep segment the top a column shows is
    # the stroke's edge, higher the thicker the pen, and the figure's pen is not the plot's.
    png_low, png_high = curve_top_spans(png_mask, at, PEN_REACH)
    svg_low, svg_high = curve_top_spans(svg_mask, at, PEN_REACH)
    assert len(rates) >= 5 and from_png.max() > 0.1  # a curve was found at all
    # Compared where A's top is drawn alike in both: not where B's line crosses A's height
    # near it (B's line, drawn over A's and thicker in the figure, hides A's line there and
    # B's fill turns A's fill from blue), nor at the curve's two ends (a pixel either way
    # decides whether its line is in those columns).
    b_width, b_rates, _ = run_rates(b_run.outcome.reads)
    b_middles = (np.arange(len(b_rates)) + 0.5) * b_width
    near = np.stack(
        [np.interp(middles + d, b_middles, b_rates, 0.0, 0.0) for d in (-width, 0.0, width)]
    )
    clear = (rates > near.max(axis=0)) | (rates < near.min(axis=0))
    clear[[0, -1]] = False
    assert clear.sum() >= 3, (rates, near)
    apart = np.maximum(svg_low - png_high, png_low - svg_high)  # > 0: the spans miss
    assert np.all(apart[clear] <= 0.03), (from_png[clear], from_svg[clear], apart[clear])

    # Access pattern: the reads' segments cover the same parts of the plot.
    path = tmp_path / "access.svg"
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Access pattern", p), path)
    assert ok, text
    in_png = occupancy(saturated(png_region(window, "Access pattern")))
    in_svg = occupancy(saturated(svg_region(window, "Access pattern", path)))
    assert in_png.sum() > 5
    assert (in_png == in_svg).mean() > 0.85, (in_png.astype(int), in_svg.astype(int))

    path = tmp_path / "memory.pdf"
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Memory", p), path)
    assert ok and path.read_bytes().startswith(b"%PDF-"), text


def test_a_figure_is_refused_while_a_run_is_in_progress(
    qtbot, window: MainWindow, slow_model: Path, tmp_path: Path
):
    open_model(qtbot, window, slow_model)
    start_slow_ab(qtbot, window.workspace, 1)
    exporter = window.workspace.exporter
    path = tmp_path / "throughput.svg"
    ok, text = export(qtbot, window, lambda p: exporter.export_plot("Throughput", p), path)
    assert not ok and "run is in progress" in text and not path.exists()
    window.bench.cancel()
    wait_idle(qtbot, window)


def test_a_pngs_caption_says_what_its_line_styles_mean(qtbot, window: MainWindow) -> None:
    """On screen the caption is a label under the plot, not the plot: a PNG painted from the
    plot had no word of what its solid and dashed lines are. It has, under the plot."""
    from modelmon.gui.state.metric_views import DEVICE

    plot = window.workspace.plots["Device reads"]
    caption = caption_of(plot)
    assert caption and caption[0].startswith(DEVICE.key)
    image = pixels(png_bytes(plot, HEADING))
    under = heading_height(plot, caption)
    assert under > 0
    assert image.shape[0] == (plot.plot.height() + heading_height(plot, HEADING) + under) * (
        PNG_SCALE
    )
