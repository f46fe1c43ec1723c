"""The sampler's series, live: IO wait, worker CPU, memory, device reads. A and B overlaid.

Each plot shows the last run of A and the last run of B in their colours, on the time axis
of the throughput plot (seconds since the load started). Totals are solid, one thin faint
line per worker, and a second quantity (available memory, the load's own MB/s) dashed.
Work per update is bounded: one ``setData`` per curve, at most MAX_WORKER_CURVES workers.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import QWidget

from modelmon.gui.plots.style import ThemedPlot, pen
from modelmon.gui.state.formatting import nice_ceiling
from modelmon.gui.state.metric_views import (
    CPU,
    DEVICE,
    IOWAIT,
    MEMORY,
    PLACEMENT_TIP,
    X_LABEL,
    MetricView,
    Trace,
    series_names,
)
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.records import run_key
from modelmon.gui.theme import current_theme

FAINT_ALPHA = 90
# Each area of a run's memory cgroup: two overlap, so what is anonymous shows darker.
AREA_ALPHA = 45


class MetricPlot(ThemedPlot):
    """Curves of a few series per run label; optionally a second y axis on the right."""

    def __init__(
        self,
        title: str,
        y_label: str,
        traces: tuple[Trace, ...],
        key: str,
        right_label: str | None = None,
        requires: str | None = None,
        parent: QWidget | None = None,
        keys_when: tuple[tuple[str, str], ...] = (),
        shorter: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(title, X_LABEL, y_label, parent=parent)
        self.base_title = title
        self.traces = traces
        # What solid / dashed / faint mean here, below the plot: the words of the lines drawn.
        self.view = MetricView(
            title, y_label, traces, key, right_label, requires, keys_when, shorter
        )
        self.key = key
        self.drawn_series: dict[str, set[str]] = {}  # label -> the series its run has
        self.requires = requires  # the metric source without which the plot has no data
        self.curves: dict[tuple[str, str], pg.PlotDataItem] = {}
        # label -> (last time, peak left, peak right): what the ranges must take in.
        self.extents: dict[str, tuple[float, float, float]] = {}
        self.item.setLimits(xMin=0, yMin=0)
        self.follower = self.follow()
        self.right_box: pg.ViewBox | None = None
        self.right_top: float | None = None
        self.pending: dict[str, MetricSnapshot] = {}  # for when it is shown again
        self.unavailable_note: str | None = None
        self.short_runs: dict[str, str] = {}  # label -> why its finished run drew no line
        if right_label is not None:
            self._add_right_axis(right_label)
        self._described = False
        self.set_caption(self.view.key_forms(()))
        self._retitle()

    def _add_right_axis(self, label: str) -> None:
        box = pg.ViewBox()
        self.item.showAxis("right")
        self.item.scene().addItem(box)
        axis = self.item.getAxis("right")
        axis.linkToView(box)
        axis.enableAutoSIPrefix(False)
        box.setXLink(self.item)
        box.setLimits(yMin=0)
        box.disableAutoRange()  # set in steps, like the left axis (see RangeFollower)
        self.axis_labels["right"] = label
        self.right_box = box
        self.item.vb.sigResized.connect(self._sync_right)
        self.apply_theme()

    def _sync_right(self) -> None:
        if self.right_box is not None:
            self.right_box.setGeometry(self.item.vb.sceneBoundingRect())
            self.right_box.linkedViewChanged(self.item.vb, self.right_box.XAxis)

    def _retitle(self) -> None:
        theme = current_theme()
        labels = sorted(self.extents)
        keys = [(run_key(label), theme.run_colour(label)) for label in labels]
        self.set_title(self.base_title, keys)

    def _curve(self, label: str, name: str, trace: Trace) -> pg.PlotDataItem:
        key = (label, name)
        curve = self.curves.get(key)
        if curve is None:
            colour = current_theme().run_colour(label)
            alpha = FAINT_ALPHA if trace.style in ("faint", "area") else 255
            line = pen(
                colour, dashed=trace.style == "dashed", alpha=alpha, dotted=trace.style == "dotted"
            )
            # connect="finite": a failed sample (NaN) is a gap, not a drop to zero.
            curve = pg.PlotDataItem(pen=line, connect="finite")
            if trace.style == "area":  # filled to zero, under the lines
                fill = QColor(colour)
                fill.setAlpha(AREA_ALPHA)
                curve.setFillLevel(0.0)
                curve.setBrush(fill)
                curve.setZValue(-1)
            if trace.right and self.right_box is not None:
                curve.setDownsampling(auto=True, method="peak")
                curve.setClipToView(True)
                self.right_box.addItem(curve)
            else:
                self.item.addItem(curve)  # the PlotItem applies its downsampling and clipping
            self.curves[key] = curve
        return curve

    def _rekey(self) -> None:
        drawn = [name for names in self.drawn_series.values() for name in names]
        key = self.view.key_for(drawn)
        if key != self.key:
            self.key = key
            self.set_caption(self.view.key_forms(drawn))

    def start_run(self, label: str) -> None:
        """A new run of ``label`` replaces its curves. They are emptied, not removed: making
        curves costs more than keeping an empty one (of a worker the new run lacks)."""
        self.pending.pop(label, None)
        if self.drawn_series.pop(label, None) is not None:
            self._rekey()
        if self.short_runs.pop(label, None) is not None:
            self._show_note()
        for (run, _), curve in self.curves.items():
            if run == label:
                curve.setData([], [])
        if self.extents.pop(label, None) is not None:
            self._retitle()
        self.follower.restart()
        self._refit()

    def show_snapshot(self, snapshot: MetricSnapshot) -> None:
        if not self.isVisible():
            # On a tab not shown: drawn when it is (snapshots are whole series, so only the
            # latest of each run matters). Saves the GUI thread most of the metrics' cost.
            self.pending[snapshot.label] = snapshot
            return
        self._draw(snapshot)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        pending, self.pending = self.pending, {}
        for snapshot in pending.values():
            self._draw(snapshot)

    def _draw(self, snapshot: MetricSnapshot) -> None:
        self._describe(snapshot)
        if self.requires is not None:
            reason = snapshot.unavailable.get(self.requires)
            missing = f"No {self.requires} counters here: {reason}" if reason else None
            self.unavailable_note = missing
        drawn = [(trace, name) for trace in self.traces for name in self._names(trace, snapshot)]
        self.drawn_series[snapshot.label] = {name for _, name in drawn}
        self._rekey()
        short = snapshot.too_short([name for _, name in drawn])
        if short is None:
            self.short_runs.pop(snapshot.label, None)
        else:
            self.short_runs[snapshot.label] = f"{run_key(snapshot.label)} {short}"
        self._show_note()
        x_end = peak_left = peak_right = 0.0
        for trace, name in drawn:
            times, values = snapshot.series[name]
            shown = values * trace.scale if trace.scale != 1.0 else values
            self._curve(snapshot.label, name, trace).setData(times, shown)
            finite = shown[np.isfinite(shown)]
            top = float(finite.max()) if len(finite) else 0.0
            if trace.right:
                peak_right = max(peak_right, top)
            else:
                peak_left = max(peak_left, top)
            if len(times):
                x_end = max(x_end, float(times[-1]))
        known = snapshot.label in self.extents
        self.extents[snapshot.label] = (x_end, peak_left, peak_right)
        if not known:
            self._retitle()
        self._refit()

    def _show_note(self) -> None:
        """Why nothing is drawn: no counters here, or a run too short for two samples."""
        notes = [self.unavailable_note] if self.unavailable_note else []
        notes += [self.short_runs[label] for label in sorted(self.short_runs)]
        self.set_note("\n".join(notes) if notes else None)

    def _refit(self) -> None:
        if not self.extents:
            return
        x_end = max(x for x, _, _ in self.extents.values())
        peak = max(y for _, y, _ in self.extents.values())
        self.follower.show(max(x_end, 0.1), peak if peak > 0 else 1.0)
        if self.right_box is not None:
            top = nice_ceiling(max(r for _, _, r in self.extents.values()) * 1.05)
            if top != self.right_top:
                self.right_top = top
                self.right_box.setYRange(0.0, top, padding=0.0)

    @staticmethod
    def _names(trace: Trace, snapshot: MetricSnapshot) -> list[str]:
        return series_names(trace, snapshot.series)

    def _describe(self, snapshot: MetricSnapshot) -> None:
        """The tooltip says what each series is, in the sampler's own words (once)."""
        if self._described or not snapshot.specs:
            return
        lines = []
        for trace in self.traces:
            name = trace.series.replace(".*", ".0")
            spec = snapshot.specs.get(name)
            if spec is not None:
                what = "per worker (faint)" if trace.per_worker else trace.style
                lines.append(
                    f"{html.escape(trace.series)} ({what}): {html.escape(spec.description)}"
                )
        if lines:
            lines.append(PLACEMENT_TIP)
            self.set_tip("<br>".join(lines))
            self._described = True

    @property
    def run_labels(self) -> list[str]:
        return sorted(self.extents)

    def point_count(self, label: str) -> int:
        counts = [
            0 if c.yData is None else int(np.isfinite(c.yData).sum())
            for (run, _), c in self.curves.items()
            if run == label
        ]
        return sum(counts)

    def clear(self) -> None:
        self.pending.clear()
        self.drawn_series.clear()
        self._rekey()
        for curve in self.curves.values():
            curve.setData([], [])
        self.extents.clear()
        self.right_top = None
        self.follower.restart()
        self._retitle()
        self.unavailable_note = None
        self.short_runs.clear()
        self.set_note(None)


def plot_of(view: MetricView) -> MetricPlot:
    return MetricPlot(
        view.title,
        view.y_label,
        view.traces,
        view.key,
        right_label=view.right_label,
        requires=view.requires,
        keys_when=view.keys_when,
        shorter=view.shorter,
    )


def iowait_plot() -> MetricPlot:
    return plot_of(IOWAIT)


def cpu_plot() -> MetricPlot:
    return plot_of(CPU)


def memory_plot() -> MetricPlot:
    return plot_of(MEMORY)


def device_plot() -> MetricPlot:
    return plot_of(DEVICE)
