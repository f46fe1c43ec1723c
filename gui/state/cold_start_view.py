"""A server's cold start as the app draws it: one lane per rank (from its first model byte to
its last, with what it read and held), a lane for the server's own phase lines (each span,
and the stretches in no line), the phases shaded behind them (before the weights, the
weights, after them), and ready as a line. An A/B of two servers draws both timelines on one
time axis, A's lanes above B's, each with its phases as a lane of its own. Qt-free: the plot
draws the same ``ColdStartShown``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from modelmon.core import ColdStart
from modelmon.core.output import human_bytes
from modelmon.gui.state.colours import worker_colour
from modelmon.gui.state.records import RunRecord, run_key

PHASE_NAMES = {"before": "before the weights", "weights": "the weights", "after": "after them"}
# Shades of the phases, light enough for lanes drawn over them on either theme.
PHASE_COLOURS = {"before": "#8c8c8c", "weights": "#3d8bfd", "after": "#f28e2b"}
PHASE_ALPHA = 40  # of 255
LINE_COLOUR = "#59a14f"  # a span of the server's own lines
GAP_COLOUR = "#b07aa1"  # a stretch in no line
MARK_SHARE = 0.004  # of the time to ready: how wide a mark (a moment) is drawn


@dataclass(frozen=True, slots=True)
class Bar:
    """A stretch of a lane: from ``start_s`` to ``end_s``, ``words`` written after it."""

    start_s: float
    end_s: float
    colour: str
    words: str = ""
    tip: str = ""


@dataclass(frozen=True, slots=True)
class Lane:
    label: str  # "rank 2 · pid 4242", "its own lines", "B · phases"
    bars: tuple[Bar, ...]


@dataclass(frozen=True, slots=True)
class ColdStartShown:
    title: str  # "watch 1: ready in 9.5 s (pid 28314 listened on :42707)"
    lanes: tuple[Lane, ...]
    phases: tuple[tuple[str, float, float], ...]  # shaded behind: one timeline's (name, s, s)
    readies: tuple[tuple[str, float], ...]  # ("ready", 9.5); an A/B's ("A ready", ...), ...
    caption: str  # the phases in one line

    @property
    def ready_s(self) -> float | None:
        return self.readies[0][1] if self.readies else None


def _rank_lanes(cold: ColdStart, prefix: str = "") -> list[Lane]:
    return [
        Lane(
            f"{prefix}rank {rank.rank} · pid {rank.pid}",
            (
                Bar(
                    rank.start_s,
                    rank.end_s,
                    worker_colour(index),
                    f"{human_bytes(rank.model_bytes)} read, {human_bytes(rank.held_bytes)} held",
                ),
            ),
        )
        for index, rank in enumerate(cold.ranks)
        if rank.start_s is not None and rank.end_s is not None
    ]


def _line_lane(cold: ColdStart, prefix: str = "") -> list[Lane]:
    """The server's own lines (and the stretches in none), as one lane; none without lines."""
    if not cold.lines:
        return []
    mark = max(0.01, MARK_SHARE * (cold.ready_s or 1.0))
    bars = [
        Bar(
            line.start_s,
            line.end_s if not line.mark else line.start_s + mark,
            LINE_COLOUR,
            line.name if not line.mark else "",
            f"{line.text} ({line.start_s:.1f} → {line.end_s:.1f} s)",
        )
        for line in cold.lines
    ]
    bars += [
        Bar(
            gap.start_s,
            gap.end_s,
            GAP_COLOUR,
            "in no line",
            f"{gap.seconds:.1f} s between {gap.after} and {gap.before} is in no line",
        )
        for gap in cold.gaps
    ]
    return [Lane(f"{prefix}its own lines", tuple(bars))]


def _phase_lane(cold: ColdStart, prefix: str) -> Lane:
    return Lane(
        f"{prefix}phases",
        tuple(
            Bar(
                p.start_s,
                p.end_s,
                PHASE_COLOURS[p.name],
                "",
                f"{PHASE_NAMES[p.name]}: {p.start_s:.1f} → {p.end_s:.1f} s",
            )
            for p in cold.phases
            if p.seconds > 0
        ),
    )


def _caption(cold: ColdStart) -> str:
    return " · ".join(
        f"{PHASE_NAMES[p.name]} {p.seconds:.1f} s" for p in cold.phases if p.seconds > 0
    )


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
        lanes=tuple(_rank_lanes(cold) + _line_lane(cold)),
        phases=tuple((p.name, p.start_s, p.end_s) for p in cold.phases if p.seconds > 0),
        readies=(("ready", cold.ready_s),) if cold.ready_s is not None else (),
        caption=_caption(cold),
    )


def ab_cold_starts(records: Sequence[RunRecord]) -> ColdStartShown | None:
    """An A/B of two servers: its last A and B runs seen ready, side by side on one time axis
    (None unless both are)."""
    last: dict[str, tuple[RunRecord, ColdStart]] = {}
    for record in records:
        watched = record.watched
        cold = watched.cold_start if watched is not None else None
        if record.label in ("A", "B") and cold is not None and cold.ready_s is not None:
            last[record.label] = (record, cold)
    if set(last) != {"A", "B"} or last["A"][0].session != last["B"][0].session:
        return None
    lanes: list[Lane] = []
    readies = []
    for side in ("A", "B"):
        _, cold = last[side]
        prefix = f"{side} · "
        lanes += [_phase_lane(cold, prefix), *_rank_lanes(cold, prefix), *_line_lane(cold, prefix)]
        readies.append((f"{side} ready", cold.ready_s or 0.0))
    a, b = (last[side][1] for side in ("A", "B"))
    return ColdStartShown(
        title=f"A ready in {a.ready_s or 0:.1f} s, B in {b.ready_s or 0:.1f} s (their last runs)",
        lanes=tuple(lanes),
        phases=(),
        readies=tuple(readies),
        caption=f"A: {_caption(a)}   B: {_caption(b)}",
    )


def _ready_words(cold: ColdStart) -> str:
    if cold.ready_s is None:
        return "never seen ready" if cold.asked else "not a server (nothing listened)"
    if cold.lazy:
        return f"ready at {cold.ready_s:.1f} s before any weight arrived (a lazy server)"
    return f"ready in {cold.ready_s:.1f} s ({cold.ready_detail or cold.ready_by})"
