"""A plot to PNG or SVG, headed by what it shows (model and configurations), written atomically.

Both formats are rendered the same way: the heading's lines, then the plot widget painted
below them (PNG into an image at twice the on-screen size; SVG into a QSvgGenerator in SVG
1.1 mode, which keeps the view box's clipping). pyqtgraph 0.14's SVGExporter fails on
Qt 6.11 (it parses path data and chokes on the "Z" that closes a path), hence Qt's generator.

The axes are normally cached as pixmaps (see ``style.cache_axes``); painted from the cache,
an SVG's tick labels would be bitmaps. While a plot is exported its axes are drawn directly,
so tick labels and titles are SVG text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPaintDevice, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QGraphicsItem

from modelmon.gui.plots.style import ThemedPlot
from modelmon.gui.state.export_format import ExportError, write_export
from modelmon.gui.theme import current_theme

FORMATS = {".png": "PNG", ".svg": "SVG"}
PNG_SCALE = 2  # twice the on-screen size: sharp in documents and on high-DPI screens
MARGIN = 6  # px around the heading's lines


@contextmanager
def axes_uncached(plot: ThemedPlot) -> Iterator[None]:
    """Draw the axes directly (not from their pixmap cache) while exporting."""
    axes = [plot.item.getAxis(side) for side in ("left", "bottom", "right", "top")]
    modes = [axis.cacheMode() for axis in axes]
    for axis in axes:
        axis.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    try:
        yield
    finally:
        for axis, mode in zip(axes, modes, strict=True):
            axis.setCacheMode(mode)


def _heading_height(plot: ThemedPlot, heading: list[str]) -> int:
    if not heading:
        return 0
    return len(heading) * QFontMetrics(plot.font()).lineSpacing() + 2 * MARGIN


def _paint(painter: QPainter, plot: ThemedPlot, heading: list[str]) -> None:
    """The heading on the plot's background, then the plot under it."""
    widget = plot.plot
    top = _heading_height(plot, heading)
    theme = current_theme()
    painter.fillRect(QRect(0, 0, widget.width(), top), QColor(theme.background))
    painter.setPen(QColor(theme.foreground))
    painter.setFont(plot.font())
    spacing = QFontMetrics(plot.font()).lineSpacing()
    for row, line in enumerate(heading):
        box = QRect(MARGIN, MARGIN + row * spacing, widget.width() - 2 * MARGIN, spacing)
        painter.drawText(box, int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), line)
    with axes_uncached(plot):
        # QGraphicsView.render: the view's visible scene into the target rectangle.
        target = QRectF(0, top, widget.width(), widget.height())
        widget.render(painter, target, QRect(0, 0, widget.width(), widget.height()))


def _render(device: QPaintDevice, plot: ThemedPlot, heading: list[str], scale: float) -> None:
    painter = QPainter(device)
    try:
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
        painter.scale(scale, scale)
        _paint(painter, plot, heading)
    finally:
        painter.end()


def _size(plot: ThemedPlot, heading: list[str]) -> QSize:
    widget = plot.plot
    return QSize(widget.width(), widget.height() + _heading_height(plot, heading))


def svg_bytes(plot: ThemedPlot, heading: list[str] | None = None) -> bytes:
    heading = list(heading or [])
    size = _size(plot, heading)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator(QSvgGenerator.SvgVersion.Svg11)  # 1.1: clip paths are kept
    generator.setOutputDevice(buffer)
    generator.setSize(size)
    generator.setViewBox(QRect(0, 0, size.width(), size.height()))
    generator.setTitle(plot.title)
    generator.setDescription("modelmon plot" + "".join(f"\n{line}" for line in heading))
    _render(generator, plot, heading, 1.0)
    buffer.close()
    return bytes(data.data())


def png_bytes(plot: ThemedPlot, heading: list[str] | None = None) -> bytes:
    heading = list(heading or [])
    size = _size(plot, heading)
    image = QImage(size * PNG_SCALE, QImage.Format.Format_ARGB32)
    image.fill(QColor(current_theme().background))
    _render(image, plot, heading, PNG_SCALE)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise ExportError("could not encode the plot as PNG")
    buffer.close()
    return bytes(data.data())


def plot_bytes(plot: ThemedPlot, suffix: str, heading: list[str] | None = None) -> bytes:
    return svg_bytes(plot, heading) if suffix == ".svg" else png_bytes(plot, heading)


def export_plot(
    plot: ThemedPlot, path: str, heading: list[str] | None = None, inputs: Iterable[str] = ()
) -> None:
    """Write ``plot`` to ``path`` under ``heading`` (lines saying what it shows), through the
    guard (``inputs``: the open model's files); the suffix (.png or .svg) picks the format."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ExportError(f"{path}: choose a .png or .svg file name")
    write_export(path, plot_bytes(plot, suffix, heading), inputs)
