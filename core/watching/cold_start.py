"""A server's cold start as one timeline: the command's start, its first model byte, its last,
and ready; what each span between them did (CPU, the model's bytes, other files' bytes,
memory); and the ranks, the processes that read the model, each with what it read and held.

Phases are windows over what the watch samples anyway (the tree's figures at every tick,
``rank_evidence``), not a sampler of their own. A byte's time is when it arrived (the page
cache's scans, a bucket's connections) or, where nothing arrived (a warm cache), when the
processes' own evidence grew.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.watching.rank_evidence import Evidence, ProcessEvidence
from modelmon.core.watching.ready import BEFORE_WEIGHTS, NOT_A_RANK, EarlyListen, ReadySeen
from modelmon.core.watching.server_lines import ServerLine
from modelmon.core.watching.server_phases import Gap, ServerSpan, Window, gaps, place

RANK_MIN_BYTES = 1 << 20  # a process that read less of the model read its header at most
RANK_MIN_SHARE = 0.02  # of the model
PHASES = ("before", "weights", "after")
LIMIT_REACHED_SHARE = 0.97  # of a memory limit, charged: the cgroup is reclaiming at it
# A rank's last model byte this long after the last arrival ends the weights (closer, it is
# the same byte seen a tick later).
RANK_LATE_S = 0.25


@dataclass(frozen=True, slots=True)
class Phase:
    """One span of the cold start, and what the tree did in it."""

    name: str  # "before" the weights, the "weights", "after" them (until ready)
    start_s: float
    end_s: float
    cpu_s: float  # user + system, the whole tree's
    cpu_system_s: float
    model_bytes: int  # of the model, arrived in it for the first time (re-reads apart)
    other_read_bytes: int  # read calls' bytes of files that are not the model (imports...)
    rss_growth_bytes: int  # resident memory of the tree, at its end less at its start
    anon_growth_bytes: int  # of it, private memory (copies of the weights, arrays)
    machine_busy: float = 0.0  # share of all the machine's cores busy (the tree's too)

    @property
    def seconds(self) -> float:
        return max(0.0, self.end_s - self.start_s)

    @property
    def cores(self) -> float:
        """CPU seconds a second: 1.0 is one core busy throughout."""
        return self.cpu_s / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("start_s", "end_s", "cpu_s", "cpu_system_s", "machine_busy"):
            data[key] = round(data[key], 4)
        data["seconds"] = round(self.seconds, 4)
        return data


@dataclass(frozen=True, slots=True)
class RankReport:
    """A process of the tree that read the model."""

    rank: int  # from its environment (RANK, LOCAL_RANK...) where it says, else by start
    pid: int
    command: str
    model_bytes: int  # what it read of the model: descriptors, mappings or connections
    start_s: float | None  # its first model byte, and its last
    end_s: float | None
    held_bytes: int  # its private memory's growth, at its peak: its copies of the weights
    exited_s: float | None
    rank_from: str  # "RANK" (the variable that named it) or "order" (of its first byte)

    @property
    def seconds(self) -> float | None:
        if self.start_s is None or self.end_s is None:
            return None
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["seconds"] = None if self.seconds is None else round(self.seconds, 4)
        return data


@dataclass(frozen=True, slots=True)
class LimitMoment:
    """Where a cold start stood against its memory limit: when it first reached it (the
    phase, the rank then growing), or the headroom left at ready."""

    limit_bytes: int
    reached_s: float | None  # first charged within LIMIT_REACHED_SHARE of it
    reached_phase: str | None
    reached_rank: int | None  # the rank whose private memory grew most just before
    charged_at_ready: int | None
    anon_at_ready: int | None

    @property
    def headroom_bytes(self) -> int | None:
        if self.charged_at_ready is None:
            return None
        return self.limit_bytes - self.charged_at_ready

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headroom_bytes": self.headroom_bytes}


@dataclass(frozen=True, slots=True)
class ColdStart:
    ready_s: float | None  # None: never seen ready
    ready_by: str | None  # "listen" | "port" | "line" | "url"
    ready_detail: str | None
    phases: tuple[Phase, ...]
    ranks: tuple[RankReport, ...]
    lazy: bool  # ready before any model byte: it loads later, or had loaded before
    asked: bool  # the user named a ready condition (never ready is then a failure)
    early_listens: tuple[tuple[float, int, int, str], ...]  # (s, port, pid, why)
    ready_url_failure: str | None = None  # what a ready URL last answered, never ready
    memory: LimitMoment | None = None
    # The server's own phase lines, placed (``server_phases``), and the stretches before
    # ready that none accounts for.
    lines: tuple[ServerSpan, ...] = ()
    gaps: tuple[Gap, ...] = ()

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def spans(self) -> dict[str, float]:
        """Seconds of each phase, by name, then of each span its own lines state ("line:
        Loading weights"): what a run of a server keeps of its cold start."""
        spans = {p.name: round(p.seconds, 4) for p in self.phases}
        for line in self.lines:
            if line.stated_s is not None:
                key = f"line: {line.name}"
                spans[key] = max(spans.get(key, 0.0), round(line.stated_s, 4))
        return spans

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready_s": None if self.ready_s is None else round(self.ready_s, 4),
            "ready_by": self.ready_by,
            "ready_detail": self.ready_detail,
            "lazy": self.lazy,
            "asked": self.asked,
            "phases": [p.to_dict() for p in self.phases],
            "ranks": [r.to_dict() for r in self.ranks],
            "early_listens": [
                {"at_s": round(at, 4), "port": port, "pid": pid, "why": why}
                for at, port, pid, why in self.early_listens
            ],
            "ready_url_failure": self.ready_url_failure,
            "memory": None if self.memory is None else self.memory.to_dict(),
            "lines": [line.to_dict() for line in self.lines],
            "gaps": [gap.to_dict() for gap in self.gaps],
        }


def is_rank(process: ProcessEvidence, model_bytes: int) -> bool:
    return process.read_bytes >= max(RANK_MIN_BYTES, RANK_MIN_SHARE * model_bytes)


def rank_pids(evidence: Evidence, model_bytes: int) -> set[int]:
    return {p.pid for p in evidence.processes.values() if is_rank(p, model_bytes)}


def _arrived_between(windows: Sequence[tuple[int, int, int]], start: int, end: int) -> int:
    """Bytes of the arrival windows between ``start`` and ``end`` (a window across a bound
    is shared by time)."""
    total = 0.0
    for w_start, w_end, count in windows:
        if w_end <= start or w_start >= end:
            if w_end == w_start and start <= w_start < end:
                total += count
            continue
        span = max(1, w_end - w_start)
        total += count * (min(end, w_end) - max(start, w_start)) / span
    return round(total)


def _phase(
    name: str,
    start: int,
    end: int,
    t0: int,
    evidence: Evidence,
    windows: Sequence[tuple[int, int, int]],
) -> Phase:
    first, last = evidence.at(start), evidence.at(end)
    if first is None or last is None:
        return Phase(name, (start - t0) / 1e9, (end - t0) / 1e9, 0.0, 0.0, 0, 0, 0, 0)
    total = last.machine_total_s - first.machine_total_s
    return Phase(
        name,
        (start - t0) / 1e9,
        (end - t0) / 1e9,
        max(0.0, last.cpu_seconds - first.cpu_seconds),
        max(0.0, last.system_seconds - first.system_seconds),
        _arrived_between(windows, start, end),
        max(0, last.other_read_bytes - first.other_read_bytes),
        last.rss - first.rss,
        last.anon_rss - first.anon_rss,
        (last.machine_busy_s - first.machine_busy_s) / total if total > 0 else 0.0,
    )


def _ranks(
    evidence: Evidence, model_bytes: int, t0: int, commands: dict[int, str]
) -> tuple[RankReport, ...]:
    readers = [p for p in evidence.processes.values() if is_rank(p, model_bytes)]

    def first_byte(process: ProcessEvidence) -> int:
        return process.growth[0][0] if process.growth else process.first_seen_ns

    readers.sort(key=first_byte)
    named = [p.rank_label for p in readers]
    by_environment = all(label is not None for label in named) and len(set(named)) == len(named)
    reports = []
    for order, process in enumerate(readers):
        total = process.read_bytes
        start = end = None
        if process.growth:
            start = process.growth[0][0]
            # Its last byte: the first time it had read (nearly) all it ever read.
            end = next(t for t, got in process.growth if got >= total * 0.99)
        held = max(0, process.anon_peak - (process.anon_first or 0))
        label = process.rank_label if by_environment else None
        reports.append(
            RankReport(
                rank=label if label is not None else order,
                pid=process.pid,
                command=commands.get(process.pid, ""),
                model_bytes=min(total, model_bytes) if model_bytes else total,
                start_s=None if start is None else (start - t0) / 1e9,
                end_s=None if end is None else (end - t0) / 1e9,
                held_bytes=held,
                exited_s=None if process.exited_ns is None else (process.exited_ns - t0) / 1e9,
                rank_from=(process.rank_variable or "RANK") if by_environment else "order",
            )
        )
    reports.sort(key=lambda r: r.rank)
    return tuple(reports)


def _reading_span(evidence: Evidence, ranks: set[int]) -> tuple[int, int] | None:
    """The first and last model byte as the ranks themselves show them (no arrival seen)."""
    times = [
        t
        for pid in ranks
        for t, _ in evidence.processes[pid].growth[:1] + evidence.processes[pid].growth[-1:]
    ]
    return (min(times), max(times)) if times else None


def _limit_moment(
    samples: Sequence[tuple[int, int, int, int]],
    limit: int,
    bounds: dict[str, tuple[int, int]],
    ready_ns: int | None,
    evidence: Evidence,
    ranks: tuple[RankReport, ...],
    t0: int,
) -> LimitMoment:
    reached = next((s for s in samples if s[1] >= LIMIT_REACHED_SHARE * limit), None)
    reached_phase = reached_rank = None
    if reached is not None:
        at = reached[0]
        reached_phase = next((n for n, (a, b) in bounds.items() if a <= at <= b), None)
        growth = []
        for rank in ranks:
            process = evidence.processes.get(rank.pid)
            if process is not None and process.growth and process.growth[0][0] <= at:
                growth.append((process.anon_peak, rank.rank))
        reached_rank = max(growth)[1] if growth else None
    at_ready = None
    if ready_ns is not None and samples:
        at_ready = min(samples, key=lambda s: abs(s[0] - ready_ns))
    return LimitMoment(
        limit,
        None if reached is None else (reached[0] - t0) / 1e9,
        reached_phase,
        reached_rank,
        None if at_ready is None else at_ready[1],
        None if at_ready is None else at_ready[2],
    )


def build_cold_start(
    evidence: Evidence,
    *,
    t0_ns: int,
    end_ns: int,
    windows: Sequence[tuple[int, int, int]],
    span: tuple[int, int] | None,
    model_bytes: int,
    ready: ReadySeen | None,
    asked: bool,
    early: Sequence[EarlyListen] = (),
    url_failure: str | None = None,
    commands: dict[int, str] | None = None,
    memory: tuple[int, Sequence[tuple[int, int, int, int]]] | None = None,
    lines: Sequence[ServerLine] = (),
) -> ColdStart:
    """The cold start of a watched command from what the watch saw. ``span``: the first and
    last model byte's arrival (None: none arrived); ``memory``: the limit and the cgroup's
    samples (ns, charged, anonymous, page cache) under one."""
    ranks = _ranks(evidence, model_bytes, t0_ns, commands or {})
    read = _reading_span(evidence, {r.pid for r in ranks})
    if span is None:
        span = read
    if span is None:
        span = evidence.storage_span(model_bytes, ready.at_ns if ready else end_ns)
    elif read is not None and read[1] - span[1] > RANK_LATE_S * 1e9:
        # A rank still read after the last byte arrived (from the page cache, which others
        # or readahead filled): the weights are read when the last rank has read them.
        span = (span[0], read[1])
    ready_ns = ready.at_ns if ready is not None else None
    stop = ready_ns if ready_ns is not None else end_ns
    lazy = ready_ns is not None and (span is None or ready_ns <= span[0])
    bounds: dict[str, tuple[int, int]] = {}
    if span is None or lazy:
        bounds["before"] = (t0_ns, stop)
    else:
        first, last = span
        bounds["before"] = (t0_ns, first)
        bounds["weights"] = (first, min(last, stop))
        bounds["after"] = (min(last, stop), stop)
    if span is not None:  # the arrival span places the bytes of its first and last scans
        windows = [(max(s, span[0]), min(e, span[1]), n) for s, e, n in windows]
    phases = tuple(
        _phase(name, start, end, t0_ns, evidence, windows) for name, (start, end) in bounds.items()
    )
    limit = None
    if memory is not None:
        limit = _limit_moment(memory[1], memory[0], bounds, ready_ns, evidence, ranks, t0_ns)

    def measure(start: int, end: int) -> Window:
        cut = _phase("", start, end, t0_ns, evidence, windows)
        return Window(
            cut.cpu_s,
            cut.model_bytes,
            cut.other_read_bytes,
            cut.anon_growth_bytes,
            cut.machine_busy,
        )

    # Every line read while watched: one printed just before the server listened may be read
    # after the moment its socket is placed at (between two looks).
    placed = place([line for line in lines if line.at_ns <= end_ns], t0_ns, measure)
    ready_s = None if ready_ns is None else (ready_ns - t0_ns) / 1e9
    return ColdStart(
        ready_s=None if ready_ns is None else (ready_ns - t0_ns) / 1e9,
        ready_by=ready.by if ready is not None else None,
        ready_detail=ready.detail if ready is not None else None,
        phases=phases,
        ranks=ranks,
        lazy=lazy,
        asked=asked,
        early_listens=tuple(
            ((e.at_ns - t0_ns) / 1e9, e.port, e.pid, _why(e, {r.pid for r in ranks})) for e in early
        ),
        ready_url_failure=url_failure if ready is None else None,
        memory=limit,
        lines=placed,
        gaps=gaps(placed, ready_s, t0_ns, measure) if ready_s is not None else (),
    )


def _why(early: EarlyListen, ranks: set[int]) -> str:
    """Why a listening socket was not ready, now that the ranks are known: a process that
    was no rank yet when it listened may have become one (gloo's sockets of a rank that
    had not read its first byte)."""
    return BEFORE_WEIGHTS if early.why == NOT_A_RANK and early.pid in ranks else early.why


def spread(ranks: Sequence[RankReport]) -> tuple[RankReport, float, float] | None:
    """The rank that finished reading last, how long after the median rank it finished, and
    its time from the first rank's first byte over the median rank's. A rank's ends are known
    to a sample; its start to the sample that first saw its mapping, so ends are compared."""
    timed = [r for r in ranks if r.start_s is not None and r.end_s is not None]
    if len(timed) < 2:
        return None
    slowest = max(timed, key=lambda r: r.end_s or 0.0)
    began = min(r.start_s or 0.0 for r in timed)
    median_end = statistics.median(r.end_s or 0.0 for r in timed)
    took = median_end - began
    ratio = ((slowest.end_s or 0.0) - began) / took if took > 0 else float("inf")
    return slowest, (slowest.end_s or 0.0) - median_end, ratio
