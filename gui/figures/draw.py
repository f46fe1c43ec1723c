"""Which function draws which plot, and the bytes of the drawn figure."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from modelmon.gui.figures.canvas import FigureRuns, figure_data, styled
from modelmon.gui.state.metric_views import METRIC_VIEWS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Drawer = Callable[[FigureRuns, Sequence[str]], "Figure"]


def _drawers() -> dict[str, Drawer]:
    from modelmon.gui.figures import blocks, metrics, reads

    drawers: dict[str, Drawer] = {
        "Throughput": reads.throughput,
        "Access pattern": reads.access_pattern,
        "Page cache": metrics.page_cache,
        "Blocks": blocks.blocks,
    }
    for title, view in METRIC_VIEWS.items():
        drawers[title] = lambda runs, heading, view=view: metrics.metric(view, runs, heading)
    return drawers


# matplotlib's style settings are global: one figure is drawn at a time.
_DRAWING = threading.Lock()
# The plots a figure can be drawn of, by the names the Export menu shows.
DRAWN = ("Throughput", "Access pattern", *METRIC_VIEWS, "Page cache", "Blocks")


def drawn(
    name: str, runs: FigureRuns, fmt: str, heading: Sequence[str] = ()
) -> tuple[bytes, Figure]:
    """The plot ``name`` drawn from ``runs`` under ``heading``: the file's bytes as ``fmt``
    ("svg" or "pdf"), and the figure laid out as in that file."""
    drawers = _drawers()
    if name not in drawers:
        raise KeyError(f"no figure for the plot {name!r}")
    with _DRAWING, styled():
        try:
            figure = drawers[name](runs, heading)
            return figure_data(figure, fmt), figure
        finally:
            _close_fonts()


def _close_fonts() -> None:
    """Let go of the font files matplotlib opened for this figure.

    matplotlib keeps its open fonts per thread (up to 64 sets): drawn in a new thread each
    time, every export would keep another set of font files open until then. Emptying its
    cache closes them; the next figure opens them again in a millisecond."""
    from matplotlib import font_manager

    clear = getattr(getattr(font_manager, "_get_font", None), "cache_clear", None)
    if clear is not None:
        clear()


def figure_bytes(name: str, runs: FigureRuns, fmt: str, heading: Sequence[str] = ()) -> bytes:
    """The plot ``name`` drawn from ``runs`` as ``fmt`` ("svg" or "pdf"), under ``heading``."""
    return drawn(name, runs, fmt, heading)[0]
