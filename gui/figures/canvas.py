"""The figure every plot is drawn on: house style, the heading, legends that never cover
data, and the bytes of an SVG or a PDF."""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelmon.gui.state.colours import RUN_COLOURS
from modelmon.gui.state.metric_views import X_LABEL
from modelmon.gui.state.records import run_key
from modelmon.gui.state.run_trace import RunTrace, run_trace
from modelmon.gui.state.text_wrap import wrap_to

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from modelmon.core import Ceilings, Model
    from modelmon.gui.state.records import RunRecord

VECTOR_FORMATS = {".svg": "svg", ".pdf": "pdf"}
FOREGROUND = "#222222"
GRID = "#d0d0d0"
DPI = 100  # a plot of W × H px on screen becomes a figure of W/100 × H/100 inches
MIN_SIZE_IN = (4.0, 2.6)
NO_RUN = "No finished run to draw: run A, B, an A/B or a watch first."
HEADING_POINTS = 7.0  # the heading's and the key's words
MARGIN = 0.01  # of the figure's width, either side of the heading

STYLE = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib: the same glyphs everywhere
    "font.enable_last_resort": False,  # DejaVu has every glyph the figures use
    "font.size": 8.0,
    "axes.titlesize": 9.0,
    "axes.labelsize": 8.0,
    "axes.edgecolor": FOREGROUND,
    "axes.labelcolor": FOREGROUND,
    "text.color": FOREGROUND,
    "xtick.color": FOREGROUND,
    "ytick.color": FOREGROUND,
    "axes.grid": True,
    "grid.color": GRID,
    "grid.linewidth": 0.5,
    "legend.fontsize": 7.5,
    "legend.frameon": False,
    "lines.linewidth": 1.0,
    "svg.fonttype": "path",  # glyphs as outlines: no viewer substitutes another font
    "svg.hashsalt": "modelmon",  # the same figure gives the same file
    "pdf.fonttype": 42,
}


@dataclass(frozen=True)
class FigureRuns:
    """What a figure draws: the runs the plot shows and how it shows them."""

    runs: tuple[RunRecord, ...]  # one per label the plot shows (the latest of each)
    model: Model | None = None
    ceilings: Ceilings | None = None
    x_range: tuple[float, float] | None = None  # the plot's visible range; None: the data's
    y_range: tuple[float, float] | None = None
    size_px: tuple[int, int] = (800, 400)  # the plot on screen
    block_order: tuple[str, ...] = ()  # the Blocks plot's rows, top to bottom
    extra: dict[str, str] = field(default_factory=dict)  # words the plot shows (captions)

    def traced(self) -> list[tuple[RunRecord, RunTrace]]:
        """The runs with what each left to draw (modelmon's load or a watched program's)."""
        found = [(record, run_trace(record, self.model)) for record in self.runs]
        return [(record, trace) for record, trace in found if trace is not None]


def run_name(record: RunRecord) -> str:
    """ "run A", "run B · pair 2", "watch" (as the plots' keys name them) and, for a run
    that did not finish, what became of it."""
    pair = f" · pair {record.pair + 1}" if record.pair is not None else ""
    name = run_key(record.label) + pair
    status = record.status
    return name if status == "ok" else f"{name} ({status})"


def run_colour(label: str) -> str:
    return RUN_COLOURS.get(label, FOREGROUND)


@contextmanager
def styled() -> Iterator[None]:
    import matplotlib

    with matplotlib.rc_context(STYLE):
        yield


def wrapped(text: str, width_in: float, points: float = HEADING_POINTS) -> list[str]:
    """``text`` in lines no wider than ``width_in`` inches at ``points`` (as the figure
    measures its words): a long command wraps whole, never elided, never cut mid-number."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font, measure = FontProperties(size=points), TextToPath()
    room = width_in * 72.0  # points

    def fits(line: str) -> bool:
        return measure.get_text_width_height_descent(line, font, ismath=False)[0] <= room

    return wrap_to(text, fits)


def new_figure(runs: FigureRuns, heading: Sequence[str], height_in: float | None = None) -> Figure:
    """A figure the size of the plot on screen (or ``height_in`` tall), the heading's lines
    above the plot, wrapped to its width; constrained layout keeps labels, legend and
    heading apart."""
    from matplotlib.figure import Figure

    width = max(MIN_SIZE_IN[0], runs.size_px[0] / DPI)
    height = max(MIN_SIZE_IN[1], height_in or runs.size_px[1] / DPI)
    room = width * (1.0 - 2 * MARGIN)
    lines = [part for line in heading for part in wrapped(line, room)]
    figure = Figure(figsize=(width, height + 0.14 * len(lines)), dpi=DPI, layout="constrained")
    if lines:
        figure.suptitle(
            "\n".join(lines),
            x=MARGIN,
            ha="left",
            fontsize=HEADING_POINTS,
            color="#555555",
            parse_math=False,  # a command's "$HOME" is words, not mathematics
        )
    return figure


def plot_over_time(
    runs: FigureRuns,
    heading: Sequence[str],
    *,
    title: str | None = None,
    y_label: str | None = None,
    height_in: float | None = None,
) -> tuple[Figure, Axes]:
    """A new figure (``new_figure``) with one plot whose x axis is the run's time: the frame
    every figure is drawn in. ``title`` over it and ``y_label`` up its side where known yet."""
    figure = new_figure(runs, heading, height_in)
    axes = figure.add_subplot()
    if title is not None:
        axes.set_title(title, loc="left")
    axes.set_xlabel(X_LABEL)
    if y_label is not None:
        axes.set_ylabel(y_label)
    return figure, axes


def latest_finished(runs: FigureRuns) -> tuple[RunRecord, RunTrace] | None:
    """The last of the runs that left something to draw (the figures that show one run)."""
    traced = runs.traced()
    return traced[-1] if traced else None


def axes_ranges(axes: Axes, runs: FigureRuns, bottom: float | None = None) -> None:
    """The plot's visible ranges, when it gave them; else from the data (from ``bottom``)."""
    if runs.x_range is not None:
        axes.set_xlim(*runs.x_range)
    else:
        axes.set_xlim(left=0.0)
    if runs.y_range is not None:
        axes.set_ylim(*runs.y_range)
    elif bottom is not None:
        axes.set_ylim(bottom=bottom)
    axes.margins(x=0)


def key_below(
    figure: Figure,
    axes: Axes,
    words: str = "",
    columns: int = 4,
    handles: Sequence[Artist] | None = None,
) -> None:
    """The key under the plot (never over its data): the runs' (or ``handles``') entries
    under a line of words that says what the styles mean (the plot's caption)."""
    labels: list[str] = []
    if handles is None:
        found: list[Artist] = []
        for each in figure.axes:
            more, names = each.get_legend_handles_labels()
            found, labels = found + list(more), labels + names
        handles = found
    else:
        labels = [str(h.get_label()) for h in handles]
    width = float(figure.get_figwidth()) * (1.0 - 2 * MARGIN)
    words = "\n".join(wrapped(words, width)) if words else ""
    if handles:
        legend = figure.legend(
            handles,
            labels,
            loc="outside lower center",
            ncols=min(columns, len(labels)),
            title=words or None,
            title_fontsize=HEADING_POINTS,
        )
        legend.get_title().set_parse_math(False)
        for text in legend.get_texts():
            text.set_parse_math(False)
    elif words:
        figure.supxlabel(words, fontsize=HEADING_POINTS, color="#555555", parse_math=False)


def file_line(axes: Axes, base_mb: float, path: str) -> None:
    """The dashed line where a model's file begins on an offset axis, named by the file, as
    the access pattern and the page cache draw it on screen (``plots.style.file_line``)."""
    axes.axhline(base_mb, color=FOREGROUND, ls="--", lw=0.6)
    name = path.rsplit("/", 1)[-1]
    axes.text(0.01, base_mb, name, transform=axes.get_yaxis_transform(), va="bottom", fontsize=7.0)


def note(axes: Axes, text: str) -> None:
    """Why the plot has nothing to show, in words across it (never a flat line)."""
    from matplotlib.figure import Figure

    figure = axes.get_figure()  # the words take the middle 60 % of the figure's width
    width = 0.6 * float(figure.get_figwidth()) if isinstance(figure, Figure) else MIN_SIZE_IN[0]
    axes.text(
        0.5,
        0.5,
        "\n".join(wrapped(text, width, 8.0)),
        transform=axes.transAxes,
        ha="center",
        va="center",
        color="#a05a00",
        parse_math=False,
    )


def figure_data(figure: Figure, fmt: str) -> bytes:
    buffer = io.BytesIO()
    # No creation date: the same figure gives the same file.
    title = figure.get_suptitle()
    words: dict[str, str | None] = {"Title": "modelmon figure", "Description": title}
    metadata = {"Date": None, **words} if fmt == "svg" else {"CreationDate": None, "Title": title}
    figure.savefig(buffer, format=fmt, metadata=metadata, facecolor="white")
    return buffer.getvalue()
