"""Page-cache residency of the model's files, filling up as the load runs.

Time runs along x (seconds since the load started, like every plot) and the model's offset
along y (MB, files stacked, like the access pattern), so the two plots read side by side:
a sequential load paints diagonal bands as each worker's range comes in, a cold mmap load
fills in patches where pages were faulted. Colour goes from the background (not cached) to
the run's colour (all cached). One image per file, rebuilt only when a new map arrives, from
the bounded grids of ``modelmon.gui.state.residency_grid``.
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPen, QShowEvent
from PySide6.QtWidgets import QGraphicsRectItem, QWidget

from modelmon.core import Model
from modelmon.gui.plots.style import ThemedPlot, file_line
from modelmon.gui.state.live import MB
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.records import run_key
from modelmon.gui.state.residency_grid import Maps, looks_text, picture, resident_share
from modelmon.gui.theme import current_theme

CACHE_KEY = "background colour: not cached → the run's colour: fully cached"


class ResidencyPlot(ThemedPlot):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(
            "Page cache",
            "time since load start (s)",
            "model offset (MB)",
            parent=parent,
        )
        self.set_tip(
            "How much of each stretch of the model's files sat in the page "
            "cache over time (cachestat or mincore), for the current or last "
            "run: background colour = not cached, the run's colour = cached."
        )
        self.set_caption(CACHE_KEY)
        self.item.setLimits(xMin=0)
        self.follower = self.follow(follow_y=False)  # y: the whole model, fixed per model
        self.files: list[tuple[str, float, float]] = []  # path, base MB, size MB
        self.images: dict[str, pg.ImageItem] = {}
        self.file_lines: list[pg.InfiniteLine] = []
        # Hatched under the picture: it shows where no look at the page cache was near (the
        # picture's cells there are NaN, drawn transparent), unlike a cell not cached.
        self.unlooked = QGraphicsRectItem()
        self.unlooked.setPen(QPen(Qt.PenStyle.NoPen))
        self.unlooked.setZValue(-20)
        self.unlooked.setVisible(False)
        self.item.addItem(self.unlooked)
        self.label = ""
        self.shown_maps = 0
        self.pending: MetricSnapshot | None = None  # the latest, while on a hidden tab

    def set_model(self, model: Model) -> None:
        self.start_run("", "")
        for line in self.file_lines:
            self.item.removeItem(line)
        self.file_lines.clear()
        self.files.clear()
        base = 0.0
        for file in model.files:
            self.files.append((file.path, base, file.size / MB))
            if len(model.files) > 1:  # where it begins (the first at 0), as in Access pattern
                line = file_line(base, file.path)
                self.item.addItem(line)
                self.file_lines.append(line)
            base += file.size / MB
        self.item.setYRange(0, max(base, 1e-6), padding=0.02)

    def start_run(self, label: str, spec: str) -> None:
        for image in self.images.values():
            self.item.removeItem(image)
        self.images.clear()
        self.unlooked.setVisible(False)
        self.set_caption(CACHE_KEY)
        self.label, self.shown_maps, self.pending = label, 0, None
        self.follower.restart()
        self.set_note(None)
        self._retitle(math.nan)

    def _retitle(self, resident: float) -> None:
        if not self.label:
            self.set_title("Page cache")
            return
        text = f"Page cache — {run_key(self.label)}"
        if math.isfinite(resident):
            text += f": {resident:.0%} resident"
        self.set_title(text, [(run_key(self.label), current_theme().run_colour(self.label))])

    def show_snapshot(self, snapshot: MetricSnapshot) -> None:
        if snapshot.label != self.label:
            return
        if not self.isVisible():  # on a hidden tab: drawn when shown, from the latest maps
            self.pending = snapshot
            return
        reason = snapshot.unavailable.get("residency")
        self.set_note(f"No residency maps here: {reason}" if reason else None)
        if len(snapshot.maps) == self.shown_maps and not snapshot.final:
            return
        self.shown_maps = len(snapshot.maps)
        resident = snapshot.resident_fraction
        if snapshot.maps:
            # The newest map says what the picture ends with; the series may be older.
            resident = resident_share(snapshot.maps[-1][1], self.files)
            self._draw(snapshot.maps, snapshot.end_s)
        self._retitle(resident)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self.pending is not None:
            snapshot, self.pending = self.pending, None
            self.show_snapshot(snapshot)

    def _draw(self, maps: Maps, end_s: float) -> None:
        """The maps as a picture; of a finished load (``end_s``), up to its end only."""
        theme = current_theme()
        colours = pg.ColorMap([0.0, 1.0], [theme.background, theme.run_colour(self.label)])
        shown = picture(maps, self.files, end_s)
        self.set_caption(f"{CACHE_KEY} · {looks_text(maps)}")
        hatch = QColor(theme.foreground)
        hatch.setAlpha(90)
        self.unlooked.setBrush(QBrush(hatch, Qt.BrushStyle.BDiagPattern))
        total = self.files[-1][1] + self.files[-1][2] if self.files else 0.0
        self.unlooked.setRect(QRectF(shown.start_s, 0.0, shown.width_s, total))
        self.unlooked.setVisible(True)
        for grid in shown.grids:
            image = self.images.get(grid.path)
            if image is None:
                image = pg.ImageItem(axisOrder="col-major")
                image.setColorMap(colours)
                image.setZValue(-10)  # under the file boundary lines
                self.item.addItem(image)
                self.images[grid.path] = image
            image.setImage(grid.cells, levels=(0.0, 1.0), autoLevels=False)
            image.setRect(QRectF(shown.start_s, grid.base_mb, shown.width_s, grid.size_mb))
        self.follower.show(max(shown.end_s, 0.1))

    @property
    def run_labels(self) -> list[str]:
        return [self.label] if self.label else []

    def clear(self) -> None:
        self.start_run("", "")
