"""When each block (layer, embeddings, head) was loaded: one bar per block from its first read
to its last, for the last run of A and of B, so their timelines can be compared row by row."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from modelmon.core.result import BlockTiming, LoadResult
from modelmon.gui.plots.style import make_plot, pen, set_title
from modelmon.gui.theme import current_theme

MAX_TICK_LABELS = 24
BAR_HEIGHT = 0.4
ROW_OFFSETS = {"A": -0.21, "B": 0.21}  # A in the upper half of a block's row, B in the lower


class BlockTimelinePlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.plot = make_plot("Blocks", "time since load start (s)", "block")
        self.plot.setToolTip("Each block's load time, from its first read to its last, for "
                             "the last finished run of A and of B (shown when a run ends).")
        self.item = self.plot.getPlotItem()
        self.item.invertY(True)  # first block at the top, like a table
        self.item.setLimits(xMin=0)
        self.blocks: dict[str, tuple[BlockTiming, ...]] = {}
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.order: list[str] = []
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)

    def set_block_order(self, names: list[str]) -> None:
        """The model's blocks in load order; clears every bar (a new model)."""
        self.order = list(names)
        self.blocks.clear()
        self._redraw()

    def show_result(self, label: str, result: LoadResult) -> None:
        self.blocks[label] = result.blocks
        for block in result.blocks:
            if block.name not in self.order:
                self.order.append(block.name)
        self._redraw()

    def _redraw(self) -> None:
        for bar in self.bars.values():
            self.item.removeItem(bar)
        self.bars.clear()
        row_of = {name: row for row, name in enumerate(self.order)}
        theme = current_theme()
        for label, timings in sorted(self.blocks.items()):
            if not timings:
                continue
            colour = theme.run_colour(label)
            rows = np.array([row_of[t.name] for t in timings], dtype=np.float64)
            bar = pg.BarGraphItem(
                x0=np.array([t.start for t in timings]),
                width=np.array([max(t.seconds, 0.0) for t in timings]),
                y=rows + ROW_OFFSETS.get(label, 0.0), height=BAR_HEIGHT,
                brush=pg.mkBrush(colour), pen=pen(colour))
            self.item.addItem(bar)
            self.bars[label] = bar
        set_title(self.plot, "Blocks: first to last read",
                  [(f"run {label}", theme.run_colour(label)) for label in sorted(self.bars)])
        step = max(1, math.ceil(len(self.order) / MAX_TICK_LABELS))
        ticks = [(row, name) for row, name in enumerate(self.order) if row % step == 0]
        self.item.getAxis("left").setTicks([ticks, []])
        if self.order:
            self.item.setYRange(-0.6, len(self.order) - 0.4, padding=0)
        self.item.enableAutoRange(axis="x")

    def clear(self) -> None:
        self.set_block_order([])
