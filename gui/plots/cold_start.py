"""A watched server's cold start: one lane per rank (a bar from its first model byte to its
last), a lane of the server's own phase lines, the phases shaded behind them (before the
weights, the weights, after them) and ready as a dashed line: which rank the server waited
for, and for what. An A/B of two servers: both timelines, A's lanes above B's."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from modelmon.gui.plots.style import PLOT_MIN_HEIGHT, ThemedPlot, pen, text_line
from modelmon.gui.state.cold_start_view import (
    PHASE_ALPHA,
    PHASE_COLOURS,
    PHASE_NAMES,
    ColdStartShown,
)

TITLE = "Cold start: ranks and phases"
LANE_HEIGHT = 0.6
LANE_PX = 22  # per lane: its label stays readable
CHROME_PX = 90
EMPTY = (
    "No cold start to draw: File ▸ Watch a command that loads its model and serves; its ranks "
    "(the processes that read the model) are drawn here when it is ready or ends."
)


class LaneAxis(pg.AxisItem):
    """Lane numbers labelled with their rank and pid."""

    def __init__(self) -> None:
        super().__init__("left")
        self.names: list[str] = []

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # Qt names
        if not self.names:
            return []
        low, high = sorted((minVal, maxVal))
        rows = range(max(0, math.ceil(low)), min(len(self.names) - 1, math.floor(high)) + 1)
        return [(1.0, [float(row) for row in rows])]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [self.names[int(v)] if 0 <= int(v) < len(self.names) else "" for v in values]


class ColdStartPlot(ThemedPlot):
    def __init__(self, parent: QWidget | None = None) -> None:
        self.axis = LaneAxis()
        super().__init__(
            TITLE,
            "time since the command started (s)",
            "",
            axis_items={"left": self.axis},
            parent=parent,
            caption_lines=1,
        )
        self.plot.setToolTip(
            "Each rank (a process that read the model) as a bar from its first model byte to "
            "its last, with what it read and held; the server's own phase lines, and the "
            "stretches in no line; shaded behind: before the weights, the weights, after "
            "them; the dashed line is when the server was ready."
        )
        self.item.invertY(True)  # rank 0 at the top
        self.item.setLimits(xMin=0)
        self.shown: ColdStartShown | None = None
        self._items: list[pg.GraphicsObject] = []
        self.set_note(EMPTY)

    def show(self, shown: ColdStartShown | None) -> None:
        """Draw a cold start (None: nothing to draw)."""
        self.shown = shown
        for item in self._items:
            self.item.removeItem(item)
        self._items.clear()
        if shown is None:
            self.axis.names = []
            self.set_title(TITLE)
            self.set_caption(None)
            self.set_note(EMPTY)
            return
        self.set_note(None if shown.lanes else "No process of the command read the model.")
        for name, start, end in shown.phases:
            region = pg.LinearRegionItem(
                (start, end),
                movable=False,
                brush=pg.mkBrush(_with_alpha(PHASE_COLOURS[name])),
                pen=pen(PHASE_COLOURS[name], alpha=0),
            )
            region.setZValue(-10)
            region.setToolTip(f"{PHASE_NAMES[name]}: {start:.1f} → {end:.1f} s")
            self._add(region)
        for row, lane in enumerate(shown.lanes):
            for bar in lane.bars:
                drawn = pg.BarGraphItem(
                    x0=[bar.start_s],
                    width=[max(bar.end_s - bar.start_s, 0.0)],
                    y=[row],
                    height=LANE_HEIGHT,
                    brush=pg.mkBrush(bar.colour),
                    pen=pen(bar.colour),
                )
                drawn.setToolTip(f"{lane.label}: {bar.tip or bar.words}")
                self._add(drawn)
                if bar.words:
                    words = pg.TextItem(bar.words, anchor=(0, 0.5), color=bar.colour)
                    words.setPos(bar.end_s, row)
                    self._add(words)
        for name, at in shown.readies:
            line = pg.InfiniteLine(at, angle=90, label=name, labelOpts={"position": 0.95})
            self._add(text_line(line))
        self.axis.names = [lane.label for lane in shown.lanes]
        self.axis.picture = None
        self.axis.update()
        self.set_title(shown.title)
        self.set_caption(shown.caption)
        self.apply_theme()
        self.set_plot_min_height(max(PLOT_MIN_HEIGHT, len(shown.lanes) * LANE_PX + CHROME_PX))
        self.item.setYRange(-0.6, max(len(shown.lanes), 1) - 0.4, padding=0)
        self.item.enableAutoRange(axis="x")

    def _add(self, item: pg.GraphicsObject) -> None:
        self.item.addItem(item)
        self._items.append(item)

    def clear(self) -> None:
        self.show(None)


def _with_alpha(colour: str) -> tuple[int, int, int, int]:
    value = colour.lstrip("#")
    return (int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16), PHASE_ALPHA)
