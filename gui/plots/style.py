"""The house style of every plot: palette colours, width-1 pens, bounded drawing work."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QWidget

from modelmon.gui.theme import current_theme


def pen(colour: str, dashed: bool = False) -> QPen:
    """Width 1 and cosmetic: thicker pens make Qt's raster engine many times slower."""
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
    return pg.mkPen(colour, width=1, style=style)


def make_plot(title: str, x_label: str, y_label: str,
              parent: QWidget | None = None) -> pg.PlotWidget:
    """A PlotWidget in the palette's colours with axis titles (units in the title)."""
    theme = current_theme()
    widget = pg.PlotWidget(parent=parent, background=theme.background)
    item = widget.getPlotItem()
    # Peak downsampling keeps spikes visible; clip-to-view draws only what is on screen.
    item.setDownsampling(auto=True, mode="peak")
    item.setClipToView(True)
    item.showGrid(x=True, y=True, alpha=theme.grid_alpha)
    set_title(widget, title)
    for side, text in (("bottom", x_label), ("left", y_label)):
        axis = item.getAxis(side)
        axis.setPen(pg.mkPen(theme.foreground, width=1))
        axis.setTextPen(pg.mkPen(theme.foreground, width=1))
        axis.enableAutoSIPrefix(False)  # "MB/s" must not become "kMB/s"
        item.setLabel(side, text, color=theme.foreground)
    item.setMenuEnabled(False)
    widget.setMinimumHeight(180)
    return widget


def set_title(widget: pg.PlotWidget, title: str,
              keys: list[tuple[str, str]] | None = None) -> None:
    """The plot's title, followed by a colour key ("━ run A", "━ worker 0"...).

    A key in the title never covers data, unlike a legend inside the plot area.
    """
    theme = current_theme()
    text = html.escape(title)
    if keys:
        text += "&nbsp;&nbsp;" + "&nbsp;&nbsp;".join(
            f"<span style='color:{colour}'>■ {html.escape(name)}</span>" for name, colour in keys)
    widget.getPlotItem().setTitle(text, color=theme.foreground, size="10pt")
