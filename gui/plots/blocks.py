"""When each block (layer, embeddings, head) was loaded: one bar per block from its first read
to its last, for the last run of A and of B, so their timelines can be compared row by row."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QWidget

from modelmon.core.runs import BlockTiming
from modelmon.gui.figures.blocks import BAR_HEIGHT, ROW_OFFSETS
from modelmon.gui.plots.style import PLOT_MIN_HEIGHT, ThemedPlot, pen
from modelmon.gui.state.formatting import blocks_ready_text, short_block_name
from modelmon.gui.state.records import RunRecord, run_key
from modelmon.gui.theme import current_theme

LABEL_SPACING_PX = 16  # at least this much height per shown label, so labels never overlap
# Room around the rows (title, time axis and its label): with it, the plot's minimum height
# gives every block a labelled row; the Blocks tab scrolls when the window is shorter.
CHROME_PX = 80


class BlockAxis(pg.AxisItem):
    """Row numbers labelled with block names, thinned to what fits the axis' height.

    As wide as its widest name from the moment the names are set: pyqtgraph widens an axis to
    its labels only as it paints them, and leaves out each label wider than the axis is then.
    Its first painting (an export of a tab never shown) would label only the narrow rows.
    """

    def __init__(self) -> None:
        super().__init__("left")
        self.names: list[str] = []

    def set_names(self, names: list[str]) -> None:
        """The rows' block names, in row order; the axis made wide enough for each."""
        self.names = list(names)
        # Measured as pyqtgraph measures a label before it places it.
        metrics = QFontMetricsF(self.style["tickFont"] or QFont())
        room = QRectF(0, 0, 100, 100)
        widest = max(
            (
                metrics.boundingRect(room, Qt.AlignmentFlag.AlignCenter, name).width()
                for name in map(short_block_name, self.names)
            ),
            default=0.0,
        )
        # The labels, their gap to the ticks and the ticks; 1 px against rounding.
        offset = self.style["tickTextOffset"][0] + max(0, self.style["tickLength"])
        self.setWidth(math.ceil(widest) + offset + 1)
        self.picture = None  # names changed: redraw the labels
        self.update()

    def tickValues(self, minVal: float, maxVal: float, size: float) -> list:  # Qt names
        if not self.names:
            return []
        low, high = sorted((minVal, maxVal))  # an inverted axis passes them swapped
        first, last = max(0, math.ceil(low)), min(len(self.names) - 1, math.floor(high))
        visible = max(1, last - first + 1)
        step = max(1, math.ceil(visible * LABEL_SPACING_PX / max(size, 1.0)))
        return [(float(step), [float(row) for row in range(first, last + 1, step)])]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        return [
            short_block_name(self.names[int(v)]) if 0 <= int(v) < len(self.names) else ""
            for v in values
        ]


class BlockTimelinePlot(ThemedPlot):
    def __init__(self, parent: QWidget | None = None) -> None:
        axis = BlockAxis()
        super().__init__(
            "Blocks: first to last read",
            "time since load start (s)",
            "",
            axis_items={"left": axis},
            parent=parent,
            caption_lines=1,  # when each run's first block and half its blocks were ready
            # The time axis on top, like a table's header: in sight above the first rows when
            # a model of many blocks makes the tab scroll.
            x_side="top",
        )
        self.axis = axis
        self.plot.setToolTip(
            "Each block's load time, from its first read to its last, for "
            "the last finished run of A and of B (shown when a run ends). The dashed line is "
            "when the run's first block (in use order) was ready: what a loader that uses "
            "layers as they arrive would wait."
        )
        self.item.invertY(True)  # first block at the top, like a table
        self.item.setLimits(xMin=0)
        self.blocks: dict[str, tuple[BlockTiming, ...]] = {}
        self.ready: dict[str, str] = {}  # per run: when its first and half of its blocks were
        self.ready_at: dict[str, float | None] = {}  # per run: its first block's time
        self.untimed: dict[str, str] = {}  # per run without a block: why
        self.ready_lines: list[pg.InfiniteLine] = []
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.order: list[str] = []

    def set_block_order(self, names: list[str]) -> None:
        """The model's blocks in load order; clears every bar (a new model)."""
        self.order = list(names)
        self.blocks.clear()
        self.ready.clear()
        self.ready_at.clear()
        self.untimed.clear()
        self._redraw()
        self.set_plot_min_height(
            max(PLOT_MIN_HEIGHT, len(self.order) * LABEL_SPACING_PX + CHROME_PX)
        )

    def show_record(self, record: RunRecord) -> None:
        """A finished run's blocks (a load's reads, a watch's arrivals), or why it has none;
        they replace those of the last run of its label."""
        label, blocks = record.label, record.blocks
        self.blocks[label] = blocks
        self.ready[label] = blocks_ready_text(blocks)
        self.ready_at[label] = record.first_block_s
        self.untimed.pop(label, None)
        if record.untimed is not None:
            self.untimed[label] = record.untimed
        for block in blocks:
            if block.name not in self.order:
                self.order.append(block.name)
        self._redraw()

    def _redraw(self) -> None:
        for bar in self.bars.values():
            self.item.removeItem(bar)
        self.bars.clear()
        for line in self.ready_lines:
            self.item.removeItem(line)
        self.ready_lines.clear()
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
                y=rows + ROW_OFFSETS.get(label, 0.0),
                height=BAR_HEIGHT,
                brush=pg.mkBrush(colour),
                pen=pen(colour),
            )
            self.item.addItem(bar)
            self.bars[label] = bar
            first = self.ready_at.get(label)
            if first is not None:  # a dashed line where the run's first block was ready
                line = pg.InfiniteLine(first, angle=90, pen=pen(colour, dashed=True))
                self.item.addItem(line)
                self.ready_lines.append(line)
        self.set_title(
            "Blocks: first to last read",
            [(run_key(label), theme.run_colour(label)) for label in sorted(self.bars)],
        )
        self.set_caption(
            " · ".join(
                f"{run_key(label)}: {self.ready[label]}"
                for label in sorted(self.bars)
                if self.ready.get(label)
            )
        )
        untimed = [f"{run_key(label)}: {why}" for label, why in sorted(self.untimed.items())]
        self.set_note("\n".join(untimed) or None)
        self.axis.set_names(self.order)
        if self.order:
            self.item.setYRange(-0.6, len(self.order) - 0.4, padding=0)
        self.item.enableAutoRange(axis="x")

    @property
    def run_labels(self) -> list[str]:
        return sorted(label for label, timings in self.blocks.items() if timings)

    def clear(self) -> None:
        self.set_block_order([])
