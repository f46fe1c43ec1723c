"""MB/s over time, binned from the reads, one curve per configuration (A and B)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QWidget

from modelmon.core import Ceiling, Ceilings
from modelmon.gui.plots.style import ThemedPlot, pen, text_line
from modelmon.gui.state.formatting import CEILING_NAMES, ceiling_label
from modelmon.gui.state.live import LiveUpdate
from modelmon.gui.state.records import run_key
from modelmon.gui.theme import current_theme

# The bounds a cold load is held against (the storage's, and the memory fill's when it is the
# lower) and the cold read ceilings: the y range always takes them in. The warm and memcpy
# ceilings are often 10× higher and would flatten every curve: their lines are drawn, and seen
# once a warm load gets near them.
# The plot's range reaches these lines: the read ceilings and both bounds of a load.
IN_RANGE_CEILINGS = ("sequential_read", "parallel_read", "storage", "memory_fill")
# Ceilings within 15 % of each other share one label: a plot a few hundred pixels tall
# draws lines closer than that within a label's height of each other.
CLOSE = 1.15
LABEL_MARGIN_PX = 8  # between a ceiling label and the middle of the plot


class ThroughputPlot(ThemedPlot):
    """The last run of A and the last run of B on one time axis (seconds since load start)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            "Throughput", "time since load start (s)", "read throughput (MB/s)", parent=parent
        )
        self.set_tip(
            "Tensor bytes read per time bin (10–100 ms, coarser for longer "
            "loads), as MB/s; a read spanning bins counts in each by its "
            "overlap. Dashed in a run's colour: warm-up prefetch reads. Dashed "
            "grey: the bounds and ceilings measured on this model by plain readers "
            "(Run ▸ Measure ceilings): 'storage' bounds a load that discards or maps "
            "its bytes, the lower of 'storage' and 'memory fill' one that keeps them."
        )
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.prefetch_curves: dict[str, pg.PlotDataItem] = {}
        self.ceiling_lines: dict[str, pg.InfiniteLine] = {}
        self.anchor_mbps = 0.0  # the cold ceilings: the y range always takes them in
        self.extents: dict[str, tuple[float, float]] = {}  # label -> (last time, peak MB/s)
        self.endings: dict[str, str] = {}  # label -> how its run ended, when not "ok"
        self.follower = self.follow()
        self.item.setLimits(xMin=0, yMin=0)
        # The labelled line of each group of ceilings and the group's (name, MB/s).
        self.ceiling_labels: list[tuple[pg.InfiniteLine, list[tuple[str, float]]]] = []
        self.item.vb.sigResized.connect(self._fit_ceiling_labels)

    def _curve(self, label: str, prefetch: bool) -> pg.PlotDataItem:
        curves = self.prefetch_curves if prefetch else self.curves
        if label not in curves:
            colour = current_theme().run_colour(label)
            name = f"{label} warm-up prefetch" if prefetch else self.key_name(label)
            fill = None if prefetch else pg.mkBrush(colour + "30")
            # fillLevel 0 also makes the auto range include 0: rates are never shown zoomed.
            curve = pg.PlotDataItem(
                pen=pen(colour, dashed=prefetch),
                name=name,
                fillLevel=None if prefetch else 0.0,
                brush=fill,
            )
            curve.setSkipFiniteCheck(True)
            self.plot.addItem(curve)
            curves[label] = curve
            self._retitle()
        return curves[label]

    def _retitle(self) -> None:
        theme = current_theme()
        keys = [(self.key_name(label), theme.run_colour(label)) for label in sorted(self.curves)]
        if self.prefetch_curves:
            keys.append(("dashed: warm-up prefetch", theme.foreground))
        self.set_title("Throughput", keys)
        captions = []
        if self.ceiling_lines:
            captions.append("dashed grey lines: ceilings measured on this model")
        if self.prefetch_curves:
            captions.append("dashed in a run's colour: warm-up prefetch reads")
        self.set_caption(" · ".join(captions))

    def key_name(self, label: str) -> str:
        """ "run A", "run B (cancelled)", "watch": a run that did not end well says so."""
        name = run_key(label)
        ending = self.endings.get(label)
        return f"{name} ({ending})" if ending else name

    def mark_run(self, label: str, ending: str) -> None:
        """``label``'s run ended ``ending`` ("cancelled", "failed"): its key says so."""
        self.endings[label] = ending
        self._retitle()

    def set_ceilings(self, ceilings: Ceilings | None) -> None:
        """Dashed horizontal lines at the measured ceilings (None: remove them)."""
        for line in self.ceiling_lines.values():
            self.item.removeItem(line)
        self.ceiling_lines.clear()
        theme = current_theme()
        anchored = []
        items = sorted(ceilings.items if ceilings is not None else (), key=lambda c: c.mbps)
        # Ceilings within CLOSE of each other share one label (their lines stay apart): two
        # labels that close in MB/s would be written over each other.
        groups: list[list[Ceiling]] = []
        for ceiling in items:
            if groups and ceiling.mbps <= groups[-1][0].mbps * CLOSE:
                groups[-1].append(ceiling)
            else:
                groups.append([ceiling])
        self.ceiling_labels = []
        for index, group in enumerate(groups):
            # Labels alternate between the right and the left end of their lines, each at
            # most half the plot wide (``_fit_ceiling_labels``): neither cut nor overlapping.
            right = index % 2 == 0
            names = [(CEILING_NAMES.get(c.name, c.name), c.mbps) for c in group]
            for ceiling in group:
                # One label per group, on its highest line.
                text = " " if ceiling is group[-1] else None
                line = text_line(
                    pg.InfiniteLine(
                        ceiling.mbps,
                        angle=0,
                        pen=pen(theme.foreground, dashed=True, alpha=160),
                        label=text,
                        labelOpts={
                            "position": 0.98 if right else 0.02,
                            "color": theme.foreground,
                            # Above its line, but below it when the line is in the upper
                            # half of the plot: a line near the top keeps its label in view.
                            "anchors": [(1, 0), (1, 1)] if right else [(0, 0), (0, 1)],
                        },
                    ),
                    alpha=160,
                )
                line.setToolTip(ceiling.spec)
                # Not in the auto range (the anchor below decides which ceilings are).
                self.item.addItem(line, ignoreBounds=True)
                self.ceiling_lines[ceiling.name] = line
                if text is not None:
                    self.ceiling_labels.append((line, names))
                if ceiling.name in IN_RANGE_CEILINGS:
                    anchored.append(ceiling.mbps)
        self._fit_ceiling_labels()
        self.anchor_mbps = max(anchored, default=0.0)
        self._refit()
        self._retitle()

    def _fit_ceiling_labels(self) -> None:
        """Each ceiling label in the longest words that fit half the data area's width."""
        room = self.item.vb.width() / 2 - LABEL_MARGIN_PX
        for line, names in self.ceiling_labels:
            metrics = QFontMetrics(line.label.textItem.font())
            text = ceiling_label(
                names, lambda words, metrics=metrics: metrics.horizontalAdvance(words) <= room
            )
            if line.label.format != text:
                line.label.setFormat(text)

    def _refit(self) -> None:
        x_end = max((x for x, _ in self.extents.values()), default=0.0)
        peak = max((y for _, y in self.extents.values()), default=0.0)
        self.follower.show(max(x_end, 0.1), max(peak, self.anchor_mbps, 1.0))

    def start_run(self, label: str) -> None:
        """A new run of ``label`` replaces its previous curve."""
        self.endings.pop(label, None)
        self._curve(label, prefetch=False).setData([], [])
        self._retitle()
        if label in self.prefetch_curves:
            self.prefetch_curves[label].setData([], [])
        self.extents.pop(label, None)
        self.follower.restart()
        self._refit()

    def show_update(self, label: str, update: LiveUpdate) -> None:
        rates = update.load_mbps
        times = (np.arange(len(rates)) + 0.5) * update.bin_s
        self._curve(label, prefetch=False).setData(times, rates)
        peak = float(rates.max()) if len(rates) else 0.0
        if update.prefetch_mbps.any():
            self._curve(label, prefetch=True).setData(times, update.prefetch_mbps)
            peak = max(peak, float(update.prefetch_mbps.max()))
        self.extents[label] = (len(rates) * update.bin_s, peak)
        self._refit()

    def point_count(self, label: str) -> int:
        curve = self.curves.get(label)
        return 0 if curve is None or curve.yData is None else len(curve.yData)

    def clear(self) -> None:
        """No runs at all (a new model, a new A/B): curves and their keys go, ceilings stay."""
        for curve in (*self.curves.values(), *self.prefetch_curves.values()):
            self.plot.removeItem(curve)
        self.curves.clear()
        self.prefetch_curves.clear()
        self.extents.clear()
        self.endings.clear()
        self.follower.restart()
        self._refit()
        self._retitle()

    @property
    def run_labels(self) -> list[str]:
        """The runs the plot has a curve (and a key) for."""
        return sorted(self.curves)
