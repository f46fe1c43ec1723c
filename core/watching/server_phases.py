"""A server's own phase lines on its cold-start timeline: each as a span (or a mark) beside
what the watch measured in it, and the time no line accounts for.

A line that states a duration ("Loading weights took 11.38 seconds") is placed as a span
ending where it was read; a mark ("Starting to load model", "Application startup complete")
as a moment, and a closing line that states none (SGLang's "Load weight end.") as a span from
its opening mark. Each span carries the tree's figures over it, cut from the same evidence
as the watch's phases (``cold_start.Phase``). The gaps are the stretches from the command's
start to ready that no span covers, longer than ``GAP_MIN_S`` and ``GAP_SHARE`` of the time
to ready, named by the lines either side.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.watching.server_lines import ServerLine

GAP_MIN_S = 1.0
GAP_SHARE = 0.1  # of the time to ready
MAX_GAPS = 3  # the longest, in order of time
# A closing line that states no duration, and the mark that opens its span.
OPENED_BY = {
    ("sglang", "Load weight"): "Load weight begin",
    ("transformers", "Loading weights"): "Loading model",
}


@dataclass(frozen=True, slots=True)
class Window:
    """What the tree did over a stretch of the cold start (``cold_start.Phase``'s figures)."""

    cpu_s: float
    model_bytes: int
    other_read_bytes: int
    anon_growth_bytes: int
    machine_busy: float

    def cores(self, seconds: float) -> float:
        return self.cpu_s / seconds if seconds > 0 else 0.0


# Measures a stretch (start ns, end ns) of the cold start.
Measure = Callable[[int, int], Window]


@dataclass(frozen=True, slots=True)
class ServerSpan:
    """One phase line of the server's, placed: a span, or a mark (``start_s == end_s``)."""

    engine: str
    name: str
    start_s: float
    end_s: float
    stated_s: float | None  # the duration the line states (None: a mark, or a closing line)
    weights: bool
    text: str
    measured: Window | None  # None for a mark

    @property
    def mark(self) -> bool:
        return self.stated_s is None and self.start_s == self.end_s

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 4)
        data["start_s"], data["end_s"] = round(self.start_s, 4), round(self.end_s, 4)
        return data


@dataclass(frozen=True, slots=True)
class Gap:
    """A stretch before ready that no line of the server's accounts for."""

    start_s: float
    end_s: float
    after: str  # the line it follows ("the start": the command's)
    before: str  # the line that ends it ("ready")
    measured: Window

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = round(self.seconds, 4)
        return data


def place(lines: Sequence[ServerLine], t0_ns: int, measure: Measure) -> tuple[ServerSpan, ...]:
    """The lines as spans and marks on the timeline (seconds after ``t0_ns``), in order."""
    placed: list[ServerSpan] = []
    opened: dict[tuple[str, str], int] = {}
    for line in sorted(lines, key=lambda found: found.at_ns):
        end = line.at_ns
        start = end
        if line.took_s is not None:
            start = max(t0_ns, end - round(line.took_s * 1e9))
        else:
            opener = OPENED_BY.get((line.engine, line.name))
            if opener is not None and (line.engine, opener) in opened:
                start = opened[line.engine, opener]
            opened[line.engine, line.name] = end
        placed.append(
            ServerSpan(
                line.engine,
                line.name,
                (start - t0_ns) / 1e9,
                (end - t0_ns) / 1e9,
                line.took_s,
                line.weights,
                line.text,
                measure(start, end) if end > start else None,
            )
        )
    return tuple(placed)


def gaps(
    spans: Sequence[ServerSpan], ready_s: float, t0_ns: int, measure: Measure
) -> tuple[Gap, ...]:
    """The stretches from the start to ready that no span covers, the longest ``MAX_GAPS``
    of at least ``GAP_MIN_S`` and ``GAP_SHARE`` of the time to ready (none without a line:
    then no time is in a line, and that says nothing)."""
    if not spans:
        return ()
    least = max(GAP_MIN_S, GAP_SHARE * ready_s)
    covered = sorted((s.start_s, s.end_s) for s in spans if s.start_s < ready_s)
    found: list[tuple[float, float]] = []
    at = 0.0
    for start, end in covered:
        if start - at >= least:
            found.append((at, start))
        at = max(at, end)
    if ready_s - at >= least:
        found.append((at, ready_s))
    found = sorted(sorted(found, key=lambda g: g[0] - g[1])[:MAX_GAPS])

    def after(moment: float) -> str:
        ended = [s for s in spans if s.end_s <= moment + 1e-3]
        return f"'{max(ended, key=lambda s: s.end_s).name}'" if ended else "the start"

    def before(moment: float) -> str:
        if moment >= ready_s:
            return "ready"
        begun = [s for s in spans if s.start_s >= moment - 1e-3]
        return f"'{min(begun, key=lambda s: s.start_s).name}'" if begun else "ready"

    return tuple(
        Gap(
            start,
            end,
            after(start),
            before(end),
            measure(t0_ns + round(start * 1e9), t0_ns + round(end * 1e9)),
        )
        for start, end in found
    )


def weights_line(spans: Sequence[ServerSpan]) -> ServerSpan | None:
    """The server's own span of its weights: the longest of its lines that time them."""
    timed = [s for s in spans if s.weights and not s.mark]
    return max(timed, key=lambda s: s.seconds, default=None)
