"""What a server's own phase lines say beside what the watch measured, as findings: its clock
of the weights against the bytes' arrival, and the time before ready that no line accounts
for.

Each rule reads a ``WatchResult`` whose ``cold_start`` holds the server's lines
(``server_phases``) and gives a ``Finding`` or None; the thresholds are named here.
"""

from __future__ import annotations

from modelmon.core.units import human_bytes
from modelmon.core.watching.cold_findings import CPU_BOUND, IDLE_BELOW, MACHINE_BUSY
from modelmon.core.watching.result import Finding, WatchResult
from modelmon.core.watching.server_phases import Gap, weights_line

# The server's span of its weights and the bytes' agree within this (seconds), and this share
# of the longer of the two, and a sample of the watch either side.
CLOCK_SLACK_S = 0.5
CLOCK_SHARE = 0.1
DEBUG_LOGGING = {
    "vllm": "VLLM_LOGGING_LEVEL=DEBUG",
    "sglang": "--log-level debug",
    "llama.cpp": "-v (--verbose)",
    "tgi": "--json-output with RUST_LOG=debug",
}


def server_clock(result: WatchResult) -> Finding | None:
    """The server's own span of its weights against the bytes the watch saw arrive."""
    cold = result.cold_start
    if cold is None or not cold.lines or cold.lazy:
        return None
    line = weights_line(cold.lines)
    measured = cold.phase("weights")
    if line is None or measured is None or measured.seconds <= 0:
        return None
    slack = CLOCK_SLACK_S + CLOCK_SHARE * max(line.seconds, measured.seconds) + result.interval_s
    early = line.start_s - measured.start_s  # bytes arrived before its clock started
    late = measured.end_s - line.end_s  # ... after it stopped
    stated = line.stated_s if line.stated_s is not None else line.seconds
    said = f"the server says its weights took {stated:.2f} s ('{line.text}')"
    arrived = f"the bytes arrived over {measured.seconds:.1f} s"
    evidence = {
        "server": line.to_dict(),
        "weights_phase": measured.to_dict(),
        "before_its_clock_s": round(early, 3),
        "after_its_clock_s": round(late, 3),
    }
    if early > slack or late > slack:
        where = []
        if early > slack:
            where.append(f"{early:.1f} s before it started its clock")
        if late > slack:
            where.append(f"{late:.1f} s after it stopped it")
        inside = line.measured.model_bytes if line.measured is not None else 0
        outside = max(0, measured.model_bytes - inside)
        text = (
            f"{said}; {arrived}, {' and '.join(where)}: its own figure leaves out "
            f"{human_bytes(outside)} of the {human_bytes(measured.model_bytes)} read"
        )
        fix = (
            "time the weights by the bytes (this watch), not by the server's line: the reads "
            "outside its clock are on the way to ready all the same (a prefetch before it, "
            "pages mapped lazily and read after it)"
        )
        return Finding("server-clock", text + ".", evidence, fix)
    extra = line.seconds - measured.seconds
    if extra > slack and line.measured is not None:
        cores = line.measured.cores(line.seconds)
        text = (
            f"{said}; {arrived}: its clock ran {extra:.1f} s longer than the reading, "
            f"{cores:.1f} cores busy in it: converting or copying the weights after they "
            "arrived"
        )
        fix = (
            "serve the weights in the dtype and layout the engine keeps (no conversion on "
            "load), or overlap the conversion with the reads"
        )
        return Finding("server-clock", text + ".", evidence, fix)
    return None


def gap_kind(gap: Gap) -> str:
    window = gap.measured
    cores = window.cores(gap.seconds)
    if cores >= CPU_BOUND:
        return f"CPU-bound ({cores:.1f} cores of the tree busy)"
    idle = cores < IDLE_BELOW and window.model_bytes + window.other_read_bytes < 1 << 20
    if window.machine_busy >= MACHINE_BUSY:
        # A tree that waits and one kept from the cores both use none of them.
        busy = f"the machine's cores were {window.machine_busy:.0%} busy"
        return f"waiting, or short of CPU ({busy})" if idle else f"short of CPU: {busy}"
    if window.model_bytes >= 1 << 20:
        return f"reading {human_bytes(window.model_bytes)} of the model"
    if window.other_read_bytes >= 1 << 20:
        return f"reading {human_bytes(window.other_read_bytes)} of other files (imports)"
    if cores < IDLE_BELOW:
        return f"waiting ({cores:.2f} cores busy, nothing read)"
    return f"partly CPU-bound ({cores:.1f} cores)"


def unlogged_time(result: WatchResult) -> Finding | None:
    """The stretches before ready that no line of the server's accounts for."""
    cold = result.cold_start
    if cold is None or not cold.gaps or cold.ready_s is None:
        return None
    total = sum(gap.seconds for gap in cold.gaps)
    said = "; ".join(
        f"{gap.seconds:.1f} s between {gap.after} and {gap.before} is in no line: {gap_kind(gap)}"
        for gap in cold.gaps
    )
    engine = next((line.engine for line in cold.lines if line.engine in DEBUG_LOGGING), None)
    debug = f" ({DEBUG_LOGGING[engine]})" if engine is not None else ""
    return Finding(
        "unlogged-time",
        f"{said} — {total:.1f} s of the {cold.ready_s:.1f} s to ready that the server's own "
        "lines do not account for.",
        {"gaps": [gap.to_dict() for gap in cold.gaps], "ready_s": cold.ready_s},
        f"see what runs there: the server's debug logging{debug}, or py-spy record on its "
        "processes over that stretch",
    )


SERVER_RULES = (server_clock, unlogged_time)
