"""Where in the model each read landed, and when: file offset (MB) against time (s).

Each read is a segment from (start time, offset) to (end time, offset + length), coloured by
worker. Sequential reading draws diagonal stripes (one per worker); mmap through a shared
descriptor with round-robin tensors draws a scatter over the whole file.
The caption says how the readers used descriptors, measured from the reads ("4 readers share
1 descriptor"): sharing one is what causes that scatter.

Bounded work per tick: segments go into per-worker numpy buffers, drawn by curve items of at
most CHUNK_SEGMENTS segments each. Only the newest item of a worker gets new data, so Qt
rebuilds one bounded path per worker per tick; full items keep their cached paths. Past
MAX_SEGMENTS, every other read is dropped (and from then on only every stride-th read is
kept), so the plot stays an even sample of the whole run.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from modelmon.core import Model
from modelmon.core.runs import DescriptorTally
from modelmon.gui.plots.style import ThemedPlot, file_line, pen
from modelmon.gui.state.live import MB, AccessPoints
from modelmon.gui.theme import Theme, current_theme

CHUNK_SEGMENTS = 16_384
MAX_SEGMENTS = 200_000
MAX_LEGEND_WORKERS = 8
READS_TIP = (
    "Each read as a short segment at its file offset and time, one colour per worker: "
    "diagonal stripes are sequential streams, a scatter is random access."
)


class _WorkerTrace:
    """The kept segments of one worker and the curve items that draw them."""

    def __init__(self, plot: pg.PlotItem, colour: str) -> None:
        self.plot = plot
        self.pen = pen(colour)
        self.x = np.empty(2 * CHUNK_SEGMENTS, dtype=np.float64)  # start, end, start, end...
        self.y = np.empty(2 * CHUNK_SEGMENTS, dtype=np.float64)
        self.count = 0  # segments kept
        self.seen = 0  # reads received (for the stride)
        self.items: list[pg.PlotCurveItem] = []

    def append(
        self, t0: np.ndarray, t1: np.ndarray, y0: np.ndarray, y1: np.ndarray, stride: int
    ) -> None:
        keep = (self.seen + np.arange(len(t0))) % stride == 0
        self.seen += len(t0)
        if not keep.all():
            t0, t1, y0, y1 = t0[keep], t1[keep], y0[keep], y1[keep]
        added = len(t0)
        if not added:
            return
        old = self.count
        self._reserve(old + added)
        self.x[2 * old : 2 * (old + added) : 2] = t0
        self.x[2 * old + 1 : 2 * (old + added) : 2] = t1
        self.y[2 * old : 2 * (old + added) : 2] = y0
        self.y[2 * old + 1 : 2 * (old + added) : 2] = y1
        self.count += added
        self._redraw(first_chunk=old // CHUNK_SEGMENTS)

    def halve(self) -> None:
        """Keep every other segment (and read, from now on: the caller doubles the stride)."""
        pairs = self.count // 2 + self.count % 2
        self.x[: 2 * pairs] = self.x[: 2 * self.count].reshape(-1, 2)[::2].ravel()
        self.y[: 2 * pairs] = self.y[: 2 * self.count].reshape(-1, 2)[::2].ravel()
        self.count = pairs
        self._redraw(first_chunk=0)

    def _reserve(self, segments: int) -> None:
        if 2 * segments > len(self.x):
            size = max(2 * segments, 2 * len(self.x))
            self.x = np.resize(self.x, size)  # a new buffer: items keep views of the old one
            self.y = np.resize(self.y, size)

    def _redraw(self, first_chunk: int) -> None:
        chunks = -(-self.count // CHUNK_SEGMENTS)
        while len(self.items) > chunks:
            self.plot.removeItem(self.items.pop())
        for chunk in range(first_chunk, chunks):
            lo, hi = chunk * CHUNK_SEGMENTS, min(self.count, (chunk + 1) * CHUNK_SEGMENTS)
            if chunk == len(self.items):
                item = pg.PlotCurveItem(pen=self.pen, connect="pairs", skipFiniteCheck=True)
                self.plot.addItem(item)
                self.items.append(item)
            # Copies: the buffer's live region is rewritten by the next append and halve.
            self.items[chunk].setData(
                self.x[2 * lo : 2 * hi].copy(), self.y[2 * lo : 2 * hi].copy()
            )

    def remove(self) -> None:
        for item in self.items:
            self.plot.removeItem(item)
        self.items.clear()


class AccessPatternPlot(ThemedPlot):
    """The reads of the current run; cleared when the next run starts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            "Access pattern",
            "time since load start (s)",
            "model offset (MB)",
            parent=parent,
        )
        self.set_tip(READS_TIP)
        self.item.setLimits(xMin=0)
        self.follower = self.follow(follow_y=False)  # y: the whole model, fixed per model
        self.last_end_s = 0.0
        self.traces: dict[int, _WorkerTrace] = {}
        self.stride = 1
        self.run_title = "Access pattern"
        self.run_label = ""  # of the run shown ("A", "B"); "" when none
        self.run_spec = ""
        self.reader = "worker"
        self.descriptors = DescriptorTally()
        self.sharing_text = ""  # "4 readers share 1 descriptor" once reads say so
        self.file_lines: list[pg.InfiniteLine] = []

    @property
    def segment_count(self) -> int:
        return sum(t.count for t in self.traces.values())

    def set_model(self, model: Model) -> None:
        """Mark where each file starts, and fix the offset range to the whole model."""
        self.start_run("")
        for line in self.file_lines:
            self.item.removeItem(line)
        self.file_lines.clear()
        base = 0.0
        for file in model.files:
            if len(model.files) > 1:
                line = file_line(base, file.path)
                self.item.addItem(line)
                self.file_lines.append(line)
            base += file.size / MB
        # Limits first: the range is clamped to the limits in force, and those of a smaller
        # model before would cut this model's range down to theirs.
        self.item.setLimits(yMin=-0.05 * base, yMax=1.05 * base)
        self.item.setYRange(0, max(base, 1e-6), padding=0.02)

    def start_run(
        self, title: str, spec: str = "", label: str = "", reader: str = "worker"
    ) -> None:
        """Clear for a new run (of configuration ``label``): ``title`` ("run B · pair 2/3")
        heads the plot, ``spec`` is in its tooltip (the title keeps room for the worker
        colours, the caption under it for how the readers used descriptors); ``reader``:
        what one colour stands for ("process" for a watched program)."""
        self.reader = reader
        for trace in self.traces.values():
            trace.remove()
        self.traces.clear()
        self.stride = 1
        self.run_title = f"Access pattern — {title}" if title else "Access pattern"
        self.set_title(self.run_title)
        self.run_spec, self.run_label = spec, label
        self.set_tip(f"{title}: {spec}. {READS_TIP}" if title and spec else READS_TIP)
        self.descriptors = DescriptorTally()
        self.sharing_text = ""
        self._caption()
        self.last_end_s = 0.0
        self.follower.restart()

    def add_reads(self, reads: AccessPoints) -> None:
        if not len(reads):
            return
        theme = current_theme()
        for worker in np.unique(reads.worker):
            mine = reads.worker == worker
            trace = self._trace(int(worker), theme)
            trace.append(
                reads.t_start[mine],
                reads.t_end[mine],
                reads.y_start[mine],
                reads.y_end[mine],
                self.stride,
            )
        while self.segment_count > MAX_SEGMENTS:
            self.stride *= 2
            for trace in self.traces.values():
                trace.halve()
        self.descriptors.add(reads.file, reads.reader, reads.descriptor)
        sharing = self.descriptors.sharing()
        if sharing is not None and sharing.text() != self.sharing_text:
            self.sharing_text = sharing.text()
            self._caption()
        self.last_end_s = max(self.last_end_s, float(reads.t_end.max()))
        self.follower.show(max(self.last_end_s, 0.01))

    @property
    def run_labels(self) -> list[str]:
        return [self.run_label] if self.run_label else []

    def _caption(self) -> None:
        each = f"one colour per {self.reader}" if self.run_spec else ""
        parts = [self.sharing_text, each]
        self.set_caption(" · ".join(p for p in parts if p) or None)

    def _trace(self, worker: int, theme: Theme) -> _WorkerTrace:
        if worker not in self.traces:
            colour = theme.worker_colour(worker)
            self.traces[worker] = _WorkerTrace(self.item, colour)
            workers = sorted(self.traces)
            keys = [
                (f"{self.reader[0]}{w}" if w >= 0 else "shared", theme.worker_colour(w))
                for w in workers[:MAX_LEGEND_WORKERS]
            ]
            if len(workers) > MAX_LEGEND_WORKERS:
                keys.append((f"+{len(workers) - MAX_LEGEND_WORKERS} workers", theme.foreground))
            self.set_title(self.run_title, keys)
        return self.traces[worker]
