"""The figures drawn from a run's reads: throughput over time, and the access pattern."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from modelmon.gui.figures.canvas import (
    FOREGROUND,
    NO_RUN,
    FigureRuns,
    axes_ranges,
    file_line,
    key_below,
    latest_finished,
    note,
    plot_over_time,
    run_colour,
    run_name,
)
from modelmon.gui.state.colours import worker_colour
from modelmon.gui.state.formatting import CEILING_NAMES, rate_text
from modelmon.gui.state.live import MB, run_rates

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FILL_ALPHA = 0x30 / 255  # the live plot's fill under a run's curve
CEILING_ALPHA = 160 / 255
MAX_SEGMENTS = 40_000  # reads drawn in an access pattern: more makes a file of many MB
MAX_KEYED_WORKERS = 8


def throughput(runs: FigureRuns, heading: Sequence[str]) -> Figure:
    figure, axes = plot_over_time(
        runs, heading, title="Throughput", y_label="read throughput (MB/s)"
    )
    drawn = 0
    for record, trace in runs.traced():
        width, load, prefetch = run_rates(trace.reads)
        times = (np.arange(len(load)) + 0.5) * width
        colour = run_colour(record.label)
        axes.plot(times, load, color=colour, label=run_name(record))
        axes.fill_between(times, load, 0.0, color=colour, alpha=FILL_ALPHA, linewidth=0)
        if prefetch.any():
            axes.plot(
                times, prefetch, color=colour, ls="--", label=f"{record.label} warm-up prefetch"
            )
        drawn += 1
    _ceilings(axes, runs)
    axes_ranges(axes, runs, bottom=0.0)
    if not drawn:
        note(axes, NO_RUN)
    key_below(figure, axes)
    return figure


def _ceilings(axes: Axes, runs: FigureRuns) -> None:
    """Dashed grey lines at the measured ceilings, named at alternate ends (as on screen)."""
    items = sorted(runs.ceilings.items if runs.ceilings is not None else (), key=lambda c: c.mbps)
    transform = axes.get_yaxis_transform()  # x in axes fractions, y in data
    for index, ceiling in enumerate(items):
        axes.axhline(
            ceiling.mbps,
            color=FOREGROUND,
            ls="--",
            lw=0.8,
            alpha=CEILING_ALPHA,
            label="ceilings measured on this model" if index == 0 else None,
        )
        right = index % 2 == 0
        axes.text(
            0.98 if right else 0.02,
            ceiling.mbps,
            f"{CEILING_NAMES.get(ceiling.name, ceiling.name)} ceiling {rate_text(ceiling.mbps)}",
            transform=transform,
            ha="right" if right else "left",
            va="bottom",
            fontsize=7.0,
            clip_on=True,
        )


def access_pattern(runs: FigureRuns, heading: Sequence[str]) -> Figure:
    from matplotlib.collections import LineCollection
    from matplotlib.lines import Line2D

    figure, axes = plot_over_time(runs, heading, y_label="model offset (MB)")
    latest = latest_finished(runs)
    files = runs.model.files if runs.model is not None else ()
    bases = np.concatenate([[0.0], np.cumsum([f.size for f in files], dtype=np.float64)]) / MB
    words = [runs.extra.get("spec", ""), runs.extra.get("caption", "")]
    keys: list[Artist] = []
    if latest is None:
        axes.set_title("Access pattern", loc="left")
        note(axes, NO_RUN)
    else:
        record, trace = latest
        axes.set_title(f"Access pattern — {run_name(record)}", loc="left")
        reads = trace.reads
        count = len(reads["start"])
        stride = max(1, -(-count // MAX_SEGMENTS))
        kept = np.arange(0, count, stride)
        if stride > 1:
            words.append(f"every {stride}th read drawn ({len(kept):,} of {count:,})")
        y0 = trace.file_base_mb[reads["file"][kept]] + reads["offset"][kept] / MB
        y1 = y0 + reads["length"][kept] / MB
        workers = reads["worker"][kept]
        for worker in np.unique(workers):
            mine = workers == worker
            segments = np.stack(
                (
                    np.column_stack((reads["start"][kept][mine], y0[mine])),
                    np.column_stack((reads["end"][kept][mine], y1[mine])),
                ),
                axis=1,
            )
            colour = worker_colour(int(worker))
            axes.add_collection(LineCollection(segments, colors=colour, linewidths=0.8))
            if len(keys) < MAX_KEYED_WORKERS:  # "w0", or a watched program's "p0", "shared"
                name = f"{trace.reader[0]}{int(worker)}" if worker >= 0 else "shared"
                keys.append(Line2D([], [], color=colour, label=name))
        hidden = len(np.unique(workers)) - len(keys)
        if hidden > 0:
            keys.append(Line2D([], [], color="none", label=f"+{hidden} workers"))
    for file, start in zip(files, bases, strict=False):
        if len(files) > 1:
            file_line(axes, start, file.path)
    if runs.y_range is None and len(bases) > 1:
        axes.set_ylim(0.0, max(float(bases[-1]), 1e-6))
    axes_ranges(axes, runs)
    key_below(figure, axes, " · ".join(w for w in words if w), columns=9, handles=keys)
    return figure
