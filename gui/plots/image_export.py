"""A plot to PNG as it is on screen, headed by what it shows (model and configurations),
written atomically.

The heading's lines (wrapped to the plot's width), then the plot widget painted below them
into an image at twice the on-screen size, then its caption whole (what its line styles
mean: on screen a label under the plot, not part of the widget painted). The axes are
normally cached as pixmaps (see ``style.cache_axes``); while a plot is exported they are
drawn directly, at the image's resolution.

Vector figures (SVG, PDF) are not painted from the screen: Qt's SVG generator writes the
plot's paths in a way several renderers draw wrongly. They are drawn again from the runs'
data with matplotlib (``gui/figures``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPaintDevice, QPainter
from PySide6.QtWidgets import QGraphicsItem

from modelmon.gui.plots.style import ThemedPlot
from modelmon.gui.state.export_format import ExportError, write_export
from modelmon.gui.state.text_wrap import wrap_to
from modelmon.gui.theme import current_theme

FORMATS = {".png": "PNG"}
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


def heading_lines(plot: ThemedPlot, heading: list[str]) -> list[str]:
    """The heading's lines wrapped to the plot's width: a long command is shown whole, on as
    many lines as it takes, never cut at the image's edge nor mid-number."""
    metrics = QFontMetrics(plot.font())
    room = max(1, plot.plot.width() - 2 * MARGIN - 2)  # 2 px for hinting at twice the size
    return [
        part
        for line in heading
        for part in wrap_to(line, lambda text: metrics.horizontalAdvance(text) <= room)
    ]


def heading_height(plot: ThemedPlot, heading: list[str]) -> int:
    if not heading:
        return 0
    lines = heading_lines(plot, heading)
    return len(lines) * QFontMetrics(plot.font()).lineSpacing() + 2 * MARGIN


def caption_of(plot: ThemedPlot) -> list[str]:
    """The plot's caption (what its styles mean) as the lines under the image, or none."""
    text = plot.caption.text() if plot.caption.isVisibleTo(plot) else ""
    return [text] if text else []


def _lines(
    painter: QPainter, plot: ThemedPlot, lines: list[str], top: int, align: Qt.AlignmentFlag
) -> None:
    width, spacing = plot.plot.width(), QFontMetrics(plot.font()).lineSpacing()
    for row, line in enumerate(heading_lines(plot, lines)):
        box = QRect(MARGIN, top + MARGIN + row * spacing, width - 2 * MARGIN, spacing)
        painter.drawText(box, int(align | Qt.AlignmentFlag.AlignVCenter), line)


def _paint(painter: QPainter, plot: ThemedPlot, heading: list[str]) -> None:
    """The heading on the plot's background, then the plot under it, then its caption."""
    widget = plot.plot
    top = heading_height(plot, heading)
    caption = caption_of(plot)
    theme = current_theme()
    bottom = top + widget.height()
    painter.fillRect(QRect(0, 0, widget.width(), top), QColor(theme.background))
    painter.fillRect(
        QRect(0, bottom, widget.width(), heading_height(plot, caption)), QColor(theme.background)
    )
    painter.setPen(QColor(theme.foreground))
    painter.setFont(plot.font())
    _lines(painter, plot, heading, 0, Qt.AlignmentFlag.AlignLeft)
    _lines(painter, plot, caption, bottom, Qt.AlignmentFlag.AlignHCenter)
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
    under = heading_height(plot, caption_of(plot))
    return QSize(widget.width(), widget.height() + heading_height(plot, heading) + under)


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


def export_plot(
    plot: ThemedPlot, path: str, heading: list[str] | None = None, inputs: Iterable[str] = ()
) -> None:
    """Write ``plot`` as PNG to ``path`` under ``heading`` (lines saying what it shows),
    through the guard (``inputs``: the open model's files)."""
    if Path(path).suffix.lower() not in FORMATS:
        raise ExportError(f"{path}: choose a .png, .svg or .pdf file name")
    write_export(path, png_bytes(plot, heading), inputs)
