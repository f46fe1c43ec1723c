"""The house style of every plot: palette colours, width-1 pens, bounded drawing work."""

from __future__ import annotations

import html
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFontMetrics, QPen
from PySide6.QtWidgets import QGraphicsItem, QVBoxLayout, QWidget

from modelmon.gui.state.formatting import nice_ceiling
from modelmon.gui.theme import current_theme
from modelmon.gui.widgets.elided_label import ElidedLines


def pen(colour: str, dashed: bool = False, alpha: int = 255, dotted: bool = False) -> QPen:
    """Width 1 and cosmetic: thicker pens make Qt's raster engine many times slower.

    A lower ``alpha`` makes the thin, secondary lines (one per worker) recede behind totals.
    """
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
    if dotted:
        style = Qt.PenStyle.DotLine
    qpen = pg.mkPen(colour, width=1, style=style)
    if alpha < 255:
        colour_with_alpha = qpen.color()
        colour_with_alpha.setAlpha(alpha)
        qpen.setColor(colour_with_alpha)
    return qpen


THEMED = "themed_alpha"  # on a line drawn in the text colour: follows light and dark


def text_line(line: pg.InfiniteLine, alpha: int = 255) -> pg.InfiniteLine:
    """``line`` (dashed, in the text colour, its label too) follows the theme when the
    desktop switches between light and dark: in the old colour it would vanish."""
    setattr(line, THEMED, alpha)
    return line


def file_line(base_mb: float, path: str) -> pg.InfiniteLine:
    """The dashed line where a model's file begins on an offset axis, named by the file (in
    the text colour, following the theme): the access pattern and the page cache draw the
    same ones."""
    foreground = current_theme().foreground
    return text_line(
        pg.InfiniteLine(
            base_mb,
            angle=0,
            pen=pen(foreground, dashed=True),
            label=path.rsplit("/", 1)[-1],
            labelOpts={"position": 0.02, "color": foreground, "anchors": [(0, 1), (0, 1)]},
        )
    )


FOLLOW_HINT = " Drag or scroll to zoom; double-click to follow the data again."
# Below this a plot's title, axis labels and tick labels no longer fit beside its data.
PLOT_MIN_HEIGHT = 180
CAPTION_POINTS = 8.0
TITLE_POINTS = 10.0
TITLE_MARGIN_PX = 12  # the title's room short of the data area's width
START_S = 0.1  # the time axis of a plot without data: a run's first tenth of a second


def cache_axes(item: pg.PlotItem) -> None:
    """Keep each axis (labels and grid lines) as a pixmap, redrawn only when its range or
    size changes: replaying the axes' drawing is most of a pyqtgraph repaint otherwise."""
    for side in ("left", "bottom", "right", "top"):
        item.getAxis(side).setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)


class RangeFollower:
    """Keeps a live plot's range just above its data, in steps (see ``nice_ceiling``).

    pyqtgraph's auto range moves with every new point, and each move redraws the axes
    (tick text, grid), the costliest part of a repaint; in steps, the axes change a few
    times per run. Panning or zooming hands the range to the user until ``resume``
    (a new run) or a double click.
    """

    def __init__(self, item: pg.PlotItem, follow_y: bool = True) -> None:
        self.vb: pg.ViewBox = item.vb
        self.follow_y = follow_y
        self.following = True
        self.shown: tuple[float, float | None] | None = None
        self.last: tuple[float, float | None] = (0.0, None)  # the data's extent, last shown
        self.vb.disableAutoRange()
        item.hideButtons()  # its "A" button would switch the per-point auto range back on
        self.vb.sigRangeChangedManually.connect(self._taken)

    def _taken(self, *_: object) -> None:
        self.following = False

    def resume(self) -> None:
        """Follow the data again (a double click after zooming)."""
        self.following = True
        self.shown = None
        self.show(*self.last)

    def restart(self) -> None:
        """A new run (or none, on a new model): follow its data from nothing, from the
        range of a run just begun (not the last run's, nor another model's)."""
        self.following = True
        self.shown = None
        self.show(START_S, 1.0 if self.follow_y else None)
        self.last = (0.0, None)

    def show(self, x_max: float, y_max: float | None = None) -> None:
        """The data reach ``x_max`` (and ``y_max``): widen the range if they got past it."""
        self.last = (x_max, y_max)
        if not self.following:
            return
        x = nice_ceiling(x_max)
        y = nice_ceiling(y_max * 1.05) if self.follow_y and y_max is not None else None
        if (x, y) == self.shown:
            return
        self.shown = (x, y)
        if y is None:
            self.vb.setRange(xRange=(0.0, x), padding=0.0, disableAutoRange=False)
        else:
            self.vb.setRange(xRange=(0.0, x), yRange=(0.0, y), padding=0.0, disableAutoRange=False)


class ThemedPlot(QWidget):
    """A PlotWidget in the palette's colours, with axis titles (units in the titles).

    Follows palette changes (the desktop switching between dark and light) while it lives.
    Its minimum height is the plot's plus the lines its note and caption wrap onto at its
    width, so that a caption never sits over the time axis' label.
    """

    min_height_changed = Signal()

    def __init__(
        self,
        title: str,
        x_label: str,
        y_label: str,
        axis_items: dict[str, pg.AxisItem] | None = None,
        parent: QWidget | None = None,
        caption_lines: int = 2,
        x_side: str = "bottom",
    ) -> None:
        super().__init__(parent)
        self.plot = pg.PlotWidget(axisItems=axis_items)
        self.item: pg.PlotItem = self.plot.getPlotItem()
        # Peak downsampling keeps spikes visible; clip-to-view draws only what is on screen.
        self.item.setDownsampling(auto=True, mode="peak")
        self.item.setClipToView(True)
        self.item.setMenuEnabled(False)
        cache_axes(self.item)
        self.axis_labels = {x_side: x_label, "left": y_label}
        if x_side != "bottom":  # the time axis there instead (the Blocks plot: on top)
            self.item.showAxis(x_side)
            self.item.hideAxis("bottom")
        for side in self.axis_labels:
            self.item.getAxis(side).enableAutoSIPrefix(False)  # "MB/s" must not become "kMB/s"
        self.title, self.keys = title, []
        self._shown_title: tuple[str, tuple[tuple[str, str], ...], int] | None = None
        self.follower: RangeFollower | None = None  # set by live plots
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.item.vb.sigResized.connect(self._data_area_resized)
        self.plot_min_height = PLOT_MIN_HEIGHT
        self.plot.setMinimumHeight(PLOT_MIN_HEIGHT)
        # Why the plot has nothing to show (e.g. no block device under a FUSE mount): said in
        # words above it, never as a flat zero line that would read as "idle".
        self.note = ElidedLines(2)
        self.note.setContentsMargins(8, 4, 8, 4)
        self.note.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        # A key below the plot (what solid, dashed and faint mean): like the title's colour
        # key, it never covers data. Always two lines tall, with or without words: a plot's
        # height never changes with its key, nor with the window's width.
        self.caption = ElidedLines(caption_lines)
        self.caption.setVisible(caption_lines > 0)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption.setContentsMargins(4, 0, 4, 2)
        small = self.caption.font()
        small.setPointSizeF(CAPTION_POINTS)
        self.caption.setFont(small)
        layout.addWidget(self.note)
        layout.addWidget(self.plot, 1)
        layout.addWidget(self.caption)
        self.apply_theme()
        self.fit_height()

    @property
    def run_labels(self) -> list[str]:
        """The runs the plot shows, by label ("A", "B"): an exported figure draws the latest
        run of each."""
        return []

    def set_caption(self, text: str | Sequence[str] | None) -> None:
        """The key under the plot: a text, or its forms, the whole first (``ElidedLines``)."""
        self.caption.set_forms([text or ""] if text is None or isinstance(text, str) else text)

    def set_plot_min_height(self, height: int) -> None:
        """The least height the plot itself needs (the Blocks plot: a row per block)."""
        self.plot_min_height = height
        self.plot.setMinimumHeight(height)
        self.fit_height()

    def fit_height(self) -> None:
        """Need the plot's height, the caption's lines and the note's when it shows."""
        need = self.plot_min_height
        if not self.caption.isHidden():
            need += self.caption.line_height()
        if not self.note.isHidden():
            need += self.note.line_height()
        if need != self.minimumHeight():
            self.setMinimumHeight(need)
            self.min_height_changed.emit()

    def follow(self, follow_y: bool = True) -> RangeFollower:
        """Make this a live plot whose range follows its data in steps."""
        self.follower = RangeFollower(self.item, follow_y)
        self.set_tip(self.plot.toolTip())
        return self.follower

    def set_tip(self, text: str) -> None:
        """The plot's tooltip; a live plot's also says how to get its range back."""
        hint = FOLLOW_HINT if self.follower is not None else ""
        self.plot.setToolTip(text + hint if text and not text.endswith(hint) else text)

    def _clicked(self, event: object) -> None:
        double = getattr(event, "double", None)
        if self.follower is not None and callable(double) and double():
            self.follower.resume()

    def set_note(self, text: str | None) -> None:
        self.note.setText(text or "")
        self.note.setVisible(bool(text))
        self.fit_height()

    def apply_theme(self) -> None:
        theme = current_theme()
        self.plot.setBackground(theme.background)
        self.note.setStyleSheet(f"color: {theme.warning}; background: {theme.background};")
        self.caption.setStyleSheet(f"color: {theme.foreground}; background: {theme.background};")
        self.item.showGrid(x=True, y=True, alpha=theme.grid_alpha)
        for side, text in self.axis_labels.items():
            axis = self.item.getAxis(side)
            axis.setPen(pg.mkPen(theme.foreground, width=1))
            axis.setTextPen(pg.mkPen(theme.foreground, width=1))
            if text:
                self.item.setLabel(side, text, color=theme.foreground)
        for item in self.item.items:
            alpha = getattr(item, THEMED, None)
            if isinstance(item, pg.InfiniteLine) and alpha is not None:
                item.setPen(pen(theme.foreground, dashed=True, alpha=alpha))
                label = getattr(item, "label", None)  # pyqtgraph sets it only with a label
                if label is not None:
                    label.setColor(theme.foreground)
        self.set_title(self.title, self.keys)

    def set_title(self, title: str, keys: list[tuple[str, str]] | None = None) -> None:
        """The title, followed by a colour key ("■ run A", "■ w0"...): a key in the title
        never covers data, unlike a legend inside the plot area."""
        self.title, self.keys = title, list(keys or [])
        self._shown_title = None
        self._draw_title()

    def _draw_title(self) -> None:
        """The title and as many keys as fit the plot's width ("run A" shortened to "A"
        first); the others as "+n" (in the tooltip): the title never runs past the plot's
        edge."""
        font = self.font()
        font.setPointSizeF(TITLE_POINTS)
        metrics = QFontMetrics(font)
        # The title sits over the data area. A plot not shown has not been laid out: every
        # key, until it is (the view box's resize draws the title again).
        room = self.item.vb.width() - TITLE_MARGIN_PX if self.isVisible() else float("inf")

        def width(keys: list[tuple[str, str]], hidden: int) -> int:
            words = [self.title, *(f"■ {name}" for name, _ in keys)]
            return metrics.horizontalAdvance("  ".join(words + ([f"+{hidden}"] if hidden else [])))

        keys = list(self.keys)
        if width(keys, 0) > room:
            keys = [(name.removeprefix("run "), colour) for name, colour in keys]
        hidden: list[tuple[str, str]] = []
        while keys and width(keys, len(hidden)) > room:
            hidden.insert(0, keys.pop())
        shown = (self.title, tuple(keys), len(hidden))
        if shown == self._shown_title:
            return
        self._shown_title = shown
        theme = current_theme()
        text = html.escape(self.title)
        parts = [
            f"<span style='color:{colour}'>■ {html.escape(name)}</span>" for name, colour in keys
        ]
        if hidden:
            parts.append(f"+{len(hidden)}")
        if parts:
            text += "&nbsp;&nbsp;" + "&nbsp;&nbsp;".join(parts)
        self.item.setTitle(text, color=theme.foreground, size=f"{TITLE_POINTS:g}pt")
        # pyqtgraph makes the title's width the plot's minimum: past its tab, the plot would be
        # cut off. The title shows the keys that fit instead.
        self.item.titleLabel.setMinimumWidth(0)
        self.item.titleLabel.setToolTip(
            "Not shown for want of room: " + ", ".join(name for name, _ in hidden) if hidden else ""
        )

    def _data_area_resized(self) -> None:
        if self.keys:
            self._draw_title()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme()
        super().changeEvent(event)
