"""The house style of every plot: palette colours, width-1 pens, bounded drawing work."""

from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPen
from PySide6.QtWidgets import QVBoxLayout, QWidget

from modelmon.gui.theme import current_theme


def pen(colour: str, dashed: bool = False) -> QPen:
    """Width 1 and cosmetic: thicker pens make Qt's raster engine many times slower."""
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
    return pg.mkPen(colour, width=1, style=style)


class ThemedPlot(QWidget):
    """A PlotWidget in the palette's colours, with axis titles (units in the titles).

    Follows palette changes (the desktop switching between dark and light) while it lives.
    """

    def __init__(self, title: str, x_label: str, y_label: str,
                 axis_items: dict[str, pg.AxisItem] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget(axisItems=axis_items)
        self.item: pg.PlotItem = self.plot.getPlotItem()
        # Peak downsampling keeps spikes visible; clip-to-view draws only what is on screen.
        self.item.setDownsampling(auto=True, mode="peak")
        self.item.setClipToView(True)
        self.item.setMenuEnabled(False)
        self.axis_labels = {"bottom": x_label, "left": y_label}
        for side in self.axis_labels:
            self.item.getAxis(side).enableAutoSIPrefix(False)  # "MB/s" must not become "kMB/s"
        self.title, self.keys = title, []
        self.plot.setMinimumHeight(180)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self.apply_theme()

    def apply_theme(self) -> None:
        theme = current_theme()
        self.plot.setBackground(theme.background)
        self.item.showGrid(x=True, y=True, alpha=theme.grid_alpha)
        for side, text in self.axis_labels.items():
            axis = self.item.getAxis(side)
            axis.setPen(pg.mkPen(theme.foreground, width=1))
            axis.setTextPen(pg.mkPen(theme.foreground, width=1))
            if text:
                self.item.setLabel(side, text, color=theme.foreground)
        self.set_title(self.title, self.keys)

    def set_title(self, title: str, keys: list[tuple[str, str]] | None = None) -> None:
        """The title, followed by a colour key ("■ run A", "■ w0"...): a key in the title
        never covers data, unlike a legend inside the plot area."""
        self.title, self.keys = title, list(keys or [])
        text = html.escape(title)
        if self.keys:
            text += "&nbsp;&nbsp;" + "&nbsp;&nbsp;".join(
                f"<span style='color:{colour}'>■ {html.escape(name)}</span>"
                for name, colour in self.keys)
        self.item.setTitle(text, color=current_theme().foreground, size="10pt")

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme()
        super().changeEvent(event)
