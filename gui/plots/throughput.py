"""MB/s over time, binned from the reads, one curve per configuration (A and B)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from modelmon.gui.live import LiveUpdate
from modelmon.gui.plots.style import ThemedPlot, pen
from modelmon.gui.theme import current_theme


class ThroughputPlot(ThemedPlot):
    """The last run of A and the last run of B on one time axis (seconds since load start)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("Throughput", "time since load start (s)", "read throughput (MB/s)",
                         parent=parent)
        self.plot.setToolTip("Tensor bytes read per 100 ms bin, as MB/s; a read spanning bins "
                             "counts in each by its overlap. Dashed: warm-up prefetch reads.")
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.prefetch_curves: dict[str, pg.PlotDataItem] = {}
        self.item.setLimits(xMin=0, yMin=0)

    def _curve(self, label: str, prefetch: bool) -> pg.PlotDataItem:
        curves = self.prefetch_curves if prefetch else self.curves
        if label not in curves:
            colour = current_theme().run_colour(label)
            name = f"{label} warm-up prefetch" if prefetch else f"run {label}"
            fill = None if prefetch else pg.mkBrush(colour + "30")
            # fillLevel 0 also makes the auto range include 0: rates are never shown zoomed.
            curve = pg.PlotDataItem(pen=pen(colour, dashed=prefetch), name=name,
                                    fillLevel=None if prefetch else 0.0, brush=fill)
            curve.setSkipFiniteCheck(True)
            self.plot.addItem(curve)
            curves[label] = curve
            self._retitle()
        return curves[label]

    def _retitle(self) -> None:
        theme = current_theme()
        keys = [(f"run {label}", theme.run_colour(label)) for label in sorted(self.curves)]
        if self.prefetch_curves:
            keys.append(("dashed: warm-up prefetch", theme.foreground))
        self.set_title("Throughput", keys)

    def start_run(self, label: str) -> None:
        """A new run of ``label`` replaces its previous curve."""
        self._curve(label, prefetch=False).setData([], [])
        if label in self.prefetch_curves:
            self.prefetch_curves[label].setData([], [])

    def show_update(self, label: str, update: LiveUpdate) -> None:
        rates = update.load_mbps
        times = (np.arange(len(rates)) + 0.5) * update.bin_s
        self._curve(label, prefetch=False).setData(times, rates)
        if update.prefetch_mbps.any():
            self._curve(label, prefetch=True).setData(times, update.prefetch_mbps)

    def point_count(self, label: str) -> int:
        curve = self.curves.get(label)
        return 0 if curve is None or curve.yData is None else len(curve.yData)

    def clear(self) -> None:
        for curve in (*self.curves.values(), *self.prefetch_curves.values()):
            curve.setData([], [])
