"""The figures drawn from a run's sampled series: the metric plots, and the page cache."""

from __future__ import annotations

import math
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
from modelmon.gui.state.formatting import nice_ceiling
from modelmon.gui.state.live import MB
from modelmon.gui.state.metric_views import MetricView, series_names
from modelmon.gui.state.residency_grid import looks_text, picture, resident_share

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from modelmon.gui.state.records import RunRecord

# Over the axes' spines (2.5): a series at zero lies on the bottom spine, and drawn under it a
# run that waited on nothing would look as if it had no line.
LINE_ZORDER = 2.6
FAINT_ALPHA = 90 / 255  # the live plot's faint per-worker lines
AREA_ALPHA = 45 / 255  # each area of a run's memory cgroup, as the live plot's
LINE_STYLES = {"dashed": "--", "dotted": ":"}
PLACEMENT = "each rate at the middle of the sample interval it covers"


def metric(view: MetricView, runs: FigureRuns, heading: Sequence[str]) -> Figure:
    figure, axes = plot_over_time(runs, heading, title=view.title, y_label=view.y_label)
    right = None
    if view.right_label is not None:
        right = axes.twinx()
        right.set_ylabel(view.right_label)
        right.grid(False)
    reasons, drawn, right_peak = [], 0, 0.0
    names: set[str] = set()  # the series drawn: the key names their lines, no others
    for record, outcome in runs.traced():
        reason = outcome.unavailable.get(view.requires) if view.requires else None
        if reason:
            reasons.append(f"No {view.requires} counters here: {reason}")
        colour, named = run_colour(record.label), False
        for trace in view.traces:
            target = right if trace.right and right is not None else axes
            for name in series_names(trace, outcome.series):
                times, values = outcome.series[name]
                shown = values * trace.scale
                faint = trace.style in ("faint", "area")
                few = np.isfinite(shown).sum() < 3  # a line needs points to join: mark them
                if trace.style == "area":  # filled to zero under the lines, as on screen
                    target.fill_between(times, shown, color=colour, alpha=AREA_ALPHA, lw=0)
                target.plot(
                    times,
                    shown,
                    color=colour,
                    ls=LINE_STYLES.get(trace.style, "-"),
                    lw=0.6 if faint else 1.0,
                    alpha=FAINT_ALPHA if faint else 1.0,
                    marker="o" if few else None,
                    ms=2.5,
                    zorder=LINE_ZORDER,
                    label=None if named else run_name(record),
                )
                named, drawn = True, drawn + 1
                names.add(name)
                if target is right and np.isfinite(shown).any():
                    right_peak = max(right_peak, float(np.nanmax(shown)))
    axes_ranges(axes, runs, bottom=0.0)
    if right is not None:
        right.set_ylim(0.0, nice_ceiling(right_peak * 1.05))  # in steps, as on screen
    if not drawn:
        note(axes, reasons[0] if reasons else NO_RUN)
    key = view.key_for(names)
    key_below(figure, axes, " · ".join([key, PLACEMENT, *(reasons if drawn else [])]))
    return figure


def ended_at(record: RunRecord) -> float:
    """Where ``record``'s run ended (s), as the live picture stops there: a watch's end, a
    completed load's time; NaN for a load stopped before its end."""
    watched = record.watched
    if watched is not None:
        return watched.wall_seconds
    result = record.result
    return result.seconds if result is not None and result.status == "ok" else math.nan


def page_cache(runs: FigureRuns, heading: Sequence[str]) -> Figure:
    from matplotlib.colors import LinearSegmentedColormap
    from matplotlib.patches import Rectangle

    figure, axes = plot_over_time(runs, heading, y_label="model offset (MB)")
    axes.grid(False)  # grid lines over the picture would read as cache boundaries
    model_files = runs.model.files if runs.model is not None else ()
    files, base = [], 0.0
    for file in model_files:
        files.append((file.path, base, file.size / MB))
        base += file.size / MB
    latest = latest_finished(runs)
    title = "Page cache"
    if latest is None:
        note(axes, NO_RUN)
    elif not latest[1].residency_maps:
        record, trace = latest
        reason = trace.unavailable.get("residency")
        note(axes, f"No residency maps here: {reason}" if reason else "No residency maps taken.")
        title = f"Page cache — {run_name(record)}"
    else:
        record, trace = latest
        maps = trace.residency_maps
        colours = LinearSegmentedColormap.from_list(
            "cached", ["white", run_colour(record.label)]
        ).with_extremes(bad=(0.0, 0.0, 0.0, 0.0))  # not measured: no colour at all
        shown = picture(maps, files, ended_at(record))
        # Hatched under the picture: where no look at the page cache was near (NaN cells,
        # transparent), unlike a cell not cached.
        axes.add_patch(
            Rectangle(
                (shown.start_s, 0.0),
                shown.width_s,
                base,
                facecolor="none",
                edgecolor=FOREGROUND,
                alpha=0.35,
                hatch="////",
                linewidth=0.0,
                zorder=0.5,
            )
        )
        for grid in shown.grids:
            axes.imshow(
                np.ma.masked_invalid(grid.cells.T),
                origin="lower",
                extent=(shown.start_s, shown.end_s, grid.base_mb, grid.base_mb + grid.size_mb),
                aspect="auto",
                cmap=colours,
                vmin=0.0,
                vmax=1.0,
                interpolation="nearest",
                zorder=1,
            )
        title = f"Page cache — {run_name(record)}"
        resident = resident_share(maps[-1][1], files)
        if np.isfinite(resident):
            title += f": {resident:.0%} resident"
    axes.set_title(title, loc="left")
    for path, start, _ in files if len(files) > 1 else ():  # each file's start, as Access
        file_line(axes, start, path)  # pattern names them, the first at offset 0 too
    if runs.y_range is None:
        axes.set_ylim(0.0, max(base, 1e-6))
    axes_ranges(axes, runs)
    key = "white: not cached → the run's colour: fully cached"
    if latest is not None and latest[1].residency_maps:
        key += f" · {looks_text(latest[1].residency_maps)}"
    key_below(figure, axes, key, handles=[])
    return figure
