"""The Blocks figure: when each block (layer) was loaded, first read to last, A against B."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from modelmon.gui.figures.canvas import (
    NO_RUN,
    FigureRuns,
    axes_ranges,
    key_below,
    note,
    plot_over_time,
    run_colour,
    run_name,
)
from modelmon.gui.state.formatting import blocks_ready_text, short_block_name
from modelmon.gui.state.records import WATCH_LABEL

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# A block's row holds a lane for each of A, a watch and B, so none covers another's bar.
BAR_HEIGHT = 0.26
ROW_OFFSETS = {"A": -0.28, WATCH_LABEL: 0.0, "B": 0.28}
ROW_IN = 0.16  # inches per block row: every row keeps a readable label
MAX_LABELS = 80  # more rows than this: every n-th is labelled


def blocks(runs: FigureRuns, heading: Sequence[str]) -> Figure:
    order = list(runs.block_order)
    for record in runs.runs:
        order += [b.name for b in record.blocks if b.name not in order]
    figure, axes = plot_over_time(
        runs, heading, title="Blocks: first to last read", height_in=len(order) * ROW_IN + 1.6
    )
    axes.xaxis.set_ticks_position("top")  # as in the window: a table's header
    axes.xaxis.set_label_position("top")
    row_of = {name: row for row, name in enumerate(order)}
    drawn = 0
    for record in runs.runs:
        timed = record.blocks
        if not timed:
            continue
        colour = run_colour(record.label)
        ready = blocks_ready_text(timed)
        rows = np.array([row_of[b.name] for b in timed], dtype=np.float64)
        axes.barh(
            rows + ROW_OFFSETS.get(record.label, 0.0),
            [max(b.seconds, 0.0) for b in timed],
            left=[b.start for b in timed],
            height=BAR_HEIGHT,
            color=colour,
            label=run_name(record) + (f" ({ready})" if ready else ""),
        )
        first = record.first_block_s
        if first is not None:  # when the run's first block was ready
            axes.axvline(first, color=colour, ls="--", lw=0.8)
        drawn += 1
    step = max(1, -(-len(order) // MAX_LABELS))
    axes.set_yticks(range(0, len(order), step))
    axes.set_yticklabels([short_block_name(name) for name in order[::step]])
    axes.set_ylim(len(order) - 0.4, -0.6)  # the first block at the top, like a table
    axes.grid(axis="y", visible=False)
    axes_ranges(axes, FigureRuns(runs.runs, x_range=runs.x_range))
    if not drawn:
        untimed = [f"{run_name(r)}: {r.untimed}" for r in runs.runs if r.untimed]
        note(axes, "\n".join(untimed) if untimed else NO_RUN)
    key_below(figure, axes, columns=2)
    return figure
