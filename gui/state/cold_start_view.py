"""A watched server's cold start as the app draws it: one lane per rank (from its first model
byte to its last, with what it read and held), the phases shaded behind them (before the
weights, the weights, after them), and ready as a line. Qt-free: the plot and an export draw
the same ``ColdStartShown``."""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.core import ColdStart
from modelmon.core.output import human_bytes
from modelmon.gui.state.colours import worker_colour
from modelmon.gui.state.records import RunRecord, run_key

PHASE_NAMES = {"before": "before the weights", "weights": "the weights", "after": "after them"}
# Shades of the phases, light enough for lanes drawn over them on either theme.
PHASE_COLOURS = {"before": "#8c8c8c", "weights": "#3d8bfd", "after": "#f28e2b"}
PHASE_ALPHA = 40  # of 255


@dataclass(frozen=True, slots=True)
class Lane:
    """One rank's reading: a bar from ``start_s`` to ``end_s``."""

    label: str  # "rank 2 · pid 4242"
    start_s: float
    end_s: float
    words: str  # "2.20 GB read, 2.21 GB held"
    colour: str


@dataclass(frozen=True, slots=True)
class ColdStartShown:
    title: str  # "watch 1: ready in 9.5 s (pid 28314 listened on :42707)"
    lanes: tuple[Lane, ...]
    phases: tuple[tuple[str, float, float], ...]  # (name, start s, end s)
    ready_s: float | None
    caption: str  # the phases in one line


def cold_start_shown(record: RunRecord) -> ColdStartShown | None:
    """What the Cold start tab draws of a finished run, or None: a run that was not watched,
    or a watch that saw no start (attached)."""
    watched = record.watched
    cold = watched.cold_start if watched is not None else None
    if cold is None:
        return None
    name = run_key(record.label) if not record.number else f"watch {record.number}"
    return ColdStartShown(
        title=f"{name}: {_ready_words(cold)}",
        lanes=tuple(
            Lane(
                f"rank {rank.rank} · pid {rank.pid}",
                rank.start_s,
                rank.end_s,
                f"{human_bytes(rank.model_bytes)} read, {human_bytes(rank.held_bytes)} held",
                worker_colour(index),
            )
            for index, rank in enumerate(cold.ranks)
            if rank.start_s is not None and rank.end_s is not None
        ),
        phases=tuple((p.name, p.start_s, p.end_s) for p in cold.phases if p.seconds > 0),
        ready_s=cold.ready_s,
        caption=" · ".join(
            f"{PHASE_NAMES[p.name]} {p.seconds:.1f} s" for p in cold.phases if p.seconds > 0
        ),
    )


def _ready_words(cold: ColdStart) -> str:
    if cold.ready_s is None:
        return "never seen ready" if cold.asked else "not a server (nothing listened)"
    if cold.lazy:
        return f"ready at {cold.ready_s:.1f} s before any weight arrived (a lazy server)"
    return f"ready in {cold.ready_s:.1f} s ({cold.ready_detail or cold.ready_by})"
