"""What a cold start's phases and ranks say, as findings: which phase the wait went to and
what to change for it, every rank reading the whole model, a copy of it in every rank, the
slowest rank, ranks that waited for one another.

Each rule reads a ``WatchResult`` whose ``cold_start`` is set and gives a ``Finding`` or None;
the thresholds are named here.
"""

from __future__ import annotations

from modelmon.core.system.memory_limit import size_text
from modelmon.core.units import human_bytes, rate_text
from modelmon.core.watching.cold_start import ColdStart, Phase, RankReport, spread
from modelmon.core.watching.result import Finding, WatchResult

# Of the model, read by every rank: each read all of it (a rank's count is a lower bound:
# pages it faulted in before the watch first saw its mapping are missed; a slice is 1/N).
WHOLE_SHARE = 0.75
COPY_SHARE = 0.8  # of the model, held privately by every rank: each kept a copy
# The slowest rank's end over the median rank's, from the first byte, worth a word; and it
# finished this much after the median rank (both: a fast load's ratio is the samples').
SLOWEST_RATIO = 1.25
SLOWEST_GAP_S = 0.5
TURNS_MIN_S = 1.0  # the ranks' reading from first to last byte, long enough to judge turns
SAMPLE_SLACK_S = 0.1  # a rank's reading is known to a sample either side
OVERLAP_BELOW = 0.5  # of the ranks' reading, overlapping: under it, they took turns
CPU_BOUND = 0.7  # cores busy in a phase: above it, the phase was computing
IDLE_BELOW = 0.15  # cores busy in a phase: under it (and nothing read), it was waiting
MACHINE_BUSY = 0.9  # of all the machine's cores busy: the tree waited for a core
DOMINANT_SHARE = 0.4  # of the time to ready, a phase worth its own finding
DOMINANT_MIN_S = 1.0  # ... and this long: a short program's phases are not worth a word
PHASE_WORDS = {
    "before": "before the weights",
    "weights": "reading the weights",
    "after": "after the weights",
}


def phase_kind(phase: Phase) -> str:
    """What the phase was bound by, as its CPU, the machine's and its reads say."""
    if phase.cores >= CPU_BOUND:
        return "CPU-bound"
    if phase.machine_busy >= MACHINE_BUSY:
        return f"short of CPU: the machine's cores were {phase.machine_busy:.0%} busy"
    if phase.cores < IDLE_BELOW and phase.model_bytes + phase.other_read_bytes < 1 << 20:
        return "waiting"
    return "reading" if phase.name == "weights" else "partly CPU-bound"


def phase_clause(phase: Phase) -> str:
    """'6.1 s before the weights (12 MB of other files read, 5.2 s of CPU)'."""
    head = f"{phase.seconds:.1f} s {PHASE_WORDS[phase.name]}"
    if phase.name == "weights":
        mbps = phase.model_bytes / phase.seconds / 1e6 if phase.seconds > 0 else 0.0
        return f"{head} ({human_bytes(phase.model_bytes)} at {rate_text(mbps)})"
    details = [f"{phase.cpu_s:.1f} s of CPU"]
    if phase.other_read_bytes >= 1 << 20:
        details.insert(0, f"{human_bytes(phase.other_read_bytes)} of other files read")
    return f"{head} ({', '.join(details)}: {phase_kind(phase)})"


def headline(cold: ColdStart) -> str:
    """The cold start in one line: 'ready in 41.2 s: 6.1 s before the weights (...), ...'."""
    clauses = ", ".join(phase_clause(p) for p in cold.phases)
    if cold.ready_s is None and not cold.asked:  # not a server: its phases to its end
        return clauses
    if cold.ready_s is None:
        never = "never seen ready"
        if cold.ready_url_failure:
            never += f" (the ready URL {cold.ready_url_failure})"
        return f"{never}: {clauses}"
    how = cold.ready_detail or cold.ready_by
    if cold.lazy:
        return (
            f"ready in {cold.ready_s:.1f} s ({how}) before any model byte arrived: a lazy "
            "server (it loads on its first request) or one that had loaded before; no load "
            "was seen"
        )
    return f"ready in {cold.ready_s:.1f} s ({how}): {clauses}"


def dominant_phase(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    if cold is None or cold.lazy or not cold.phases:
        return None
    total = sum(p.seconds for p in cold.phases)
    worst = max(cold.phases, key=lambda p: p.seconds)
    if worst.seconds < DOMINANT_MIN_S or worst.seconds < DOMINANT_SHARE * total:
        return None
    share = worst.seconds / total
    kind = phase_kind(worst)
    evidence = {"phase": worst.name, "share": round(share, 3), **worst.to_dict()}
    until = "ready" if cold.ready_s is not None else "the end of the watch"
    text = f"{phase_clause(worst)}: {share:.0%} of the time to {until}."
    if worst.name == "weights":
        fix = (
            "the storage and the loader: the other findings say how this load reads; "
            "`modelmon recommend` measures what would read it faster here"
        )
    elif worst.name == "before":
        text += (
            " Not storage: the interpreter starting, imports (site-packages read from the "
            "page cache) and set-up."
            if kind != "waiting"
            else " Not storage: little CPU and nothing read — it waited (a lock, a "
            "download, another process)."
        )
        fix = (
            "import less before loading (lazy imports), keep a warm image or interpreter, "
            "or start reading the weights while the rest imports"
        )
    else:
        text += (
            " Not storage: post-processing the weights (conversion, quantization, "
            "compilation, a warm-up) before it answers."
            if kind != "waiting"
            else " Not storage: little CPU and nothing read — it waited (a device, the "
            "network, a lock) before it answered."
        )
        fix = (
            "keep what post-processing computes (a compile cache, pre-converted weights in "
            "the dtype and layout served), or let the first request pay for the warm-up"
        )
    return Finding("cold-start-phase", text, evidence, fix)


def every_rank_reads_all(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    ranks = cold.ranks if cold is not None else ()
    model = result.model_bytes
    if len(ranks) < 2 or model <= 0 or any(r.model_bytes < WHOLE_SHARE * model for r in ranks):
        return None
    total = sum(r.model_bytes for r in ranks)
    bucket = result.connections is not None
    if bucket:
        consequence = (
            f"{len(ranks)} × the model's GETs and {human_bytes(total)} over the network "
            f"({total / model:.1f} × the model)"
        )
    else:
        consequence = (
            f"the storage sent it once at best, the page cache {len(ranks)} times "
            f"({human_bytes(total)} copied out of it)"
        )
    text = (
        f"Each of the {len(ranks)} ranks read the whole model "
        f"({human_bytes(round(total / len(ranks)))} each): {consequence}."
    )
    evidence = {
        "ranks": len(ranks),
        "model_bytes": model,
        "bytes_by_rank": {str(r.rank): r.model_bytes for r in ranks},
    }
    fix = (
        "have each rank read only its part (a tensor-parallel slice: safetensors' "
        "get_slice reads just those bytes), or one reader for all that shares one copy "
        "(Run:ai's distributed streamer, RUNAI_STREAMER_DIST=1; a copy in /dev/shm); "
        "`modelmon recommend --ranks N` measures the ways here"
    )
    return Finding("every-rank-reads-all", text, evidence, fix)


def copies_per_rank(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    ranks = cold.ranks if cold is not None else ()
    model = result.model_bytes
    if len(ranks) < 2 or model <= 0 or any(r.held_bytes < COPY_SHARE * model for r in ranks):
        return None
    peak = result.peak_anon_rss
    limit = result.memory_limit.limit_bytes if result.memory_limit is not None else None
    text = (
        f"Each of the {len(ranks)} ranks held a whole copy of the weights (private memory "
        f"up {human_bytes(min(r.held_bytes for r in ranks))} or more in each): the node held "
        f"{human_bytes(peak)} of private memory at once, {peak / model:.1f} × the model. A "
        f"node needs at least that for this start; a memory limit below it ends in an OOM kill"
        + (
            f" (this one is {size_text(limit)})."
            if limit is not None and limit < peak * 1.05
            else "."
        )
    )
    evidence = {
        "ranks": len(ranks),
        "model_bytes": model,
        "held_by_rank": {str(r.rank): r.held_bytes for r in ranks},
        "peak_anon_rss": peak,
    }
    fix = (
        "keep only each rank's part as it is read (narrow each tensor to the rank's slice "
        "before the next is read), or map one shared copy in every rank (one reader, "
        "/dev/shm); a streamer's buffer per rank (RUNAI_STREAMER_MEMORY_LIMIT) bounds it"
    )
    return Finding("copies-per-rank", text, evidence, fix)


def slowest_rank(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    found = spread(cold.ranks) if cold is not None else None
    if cold is None or found is None:
        return None
    slowest, late, ratio = found
    if ratio < SLOWEST_RATIO or late < SLOWEST_GAP_S:
        return None
    text = (
        f"Rank {slowest.rank} (pid {slowest.pid}) finished reading last, at "
        f"{slowest.end_s:.1f} s, {late:.1f} s after the median rank: the ranks' reading took "
        f"{ratio:.2f} × as long as it would have without it. The server is ready when its "
        "slowest rank is."
    )
    evidence = {
        "rank": slowest.rank,
        "pid": slowest.pid,
        "ratio": round(ratio, 3),
        "late_s": round(late, 3),
        "end_s_by_rank": {str(r.rank): r.end_s for r in cold.ranks},
    }
    fix = (
        "look at what that rank shares with others (a CPU it is pinned to, a slower disk or "
        "network path, a larger part of the model) and balance it"
    )
    return Finding("slowest-rank", text, evidence, fix)


def ranks_took_turns(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    timed = [r for r in (cold.ranks if cold else ()) if r.start_s is not None and r.end_s]
    if len(timed) < 2:
        return None
    first = min(r.start_s or 0.0 for r in timed)
    last = max(r.end_s or 0.0 for r in timed)
    overlap = _overlap(timed)
    if overlap >= OVERLAP_BELOW or last - first < TURNS_MIN_S:
        return None
    text = (
        f"The {len(timed)} ranks read one after another (their reading overlapped "
        f"{overlap:.0%}): from {first:.1f} s to {last:.1f} s, most ranks waited while another "
        "read."
    )
    evidence = {"overlap": round(overlap, 3), "ranks": len(timed)}
    fix = (
        "let the ranks read at once (a lock or a barrier around loading serialises them), "
        "or have one read for all"
    )
    return Finding("ranks-took-turns", text, evidence, fix)


def _overlap(ranks: list[RankReport]) -> float:
    """How much of the ranks' reading time was spent while another rank read too."""
    edges = sorted([(r.start_s or 0.0, 1) for r in ranks] + [(r.end_s or 0.0, -1) for r in ranks])
    busy = shared = 0.0
    active, last = 0, edges[0][0]
    for at, step in edges:
        if active >= 1:
            busy += (at - last) * active
        if active >= 2:
            shared += (at - last) * active
        active += step
        last = at
    return shared / busy if busy > 0 else 0.0


COLD_START_RULES = (
    dominant_phase,
    every_rank_reads_all,
    copies_per_rank,
    slowest_rank,
    ranks_took_turns,
)
