"""How a program's watched run is judged as a load: ok, failed or cancelled, and the one line
that says why. A command that exits non-zero, is killed, writes into its model, never opens
it, or reads only part of it from a cold start is a failed run.
"""

from __future__ import annotations

import os

from modelmon.core.model.records import Model
from modelmon.core.runs.command_output import OWN_REPORT
from modelmon.core.system.cache import COLD_THRESHOLD
from modelmon.core.units import human_bytes
from modelmon.core.watching.findings import PARTIAL_BELOW, readers_line
from modelmon.core.watching.result import WatchResult

# A run that ended well but whose load no arrival timed (its bytes were cached already).
UNTIMED = "no model bytes were seen arriving from storage, so its load cannot be timed"
WARM_LOAD = (
    "it exited without serving: a program's load is timed by the bytes that arrive from "
    "storage, and a warm model brings none (a server is timed to its ready from any cache)"
)


def judge(
    watched: WatchResult,
    stderr: str,
    model: Model,
    *,
    settled: bool,
    limit_reached: bool,
    own_clock: bool = False,
) -> tuple[str, str | None]:
    """The run's status (ok, failed, cancelled) and the error that says why it is not ok,
    from what the watch saw of it and the last line it wrote on ``stderr``. ``settled``:
    modelmon ended it once its model had arrived; ``limit_reached``: at its time limit;
    ``own_clock``: its own clock timed it (nothing had to be seen arriving)."""
    said = f": {stderr}" if stderr else ""
    server = _as_server(watched, model, said)
    if server is not None:
        return server
    if watched.ended_by == "cancel" and settled:
        return "ok", None  # it loaded, and went on running: modelmon ended it there
    if watched.ended_by == "cancel":
        why = "stopped at its time limit" if limit_reached else "stopped"
        return "cancelled", f"{why} after {watched.wall_seconds:.1f} s{said}"
    if watched.signal is not None:
        return "failed", f"{watched.killed_text}{said}"
    if watched.exit_code not in (0, None):
        return "failed", f"exit code {watched.exit_code}{said}"
    if watched.changed_files:
        return "failed", (
            "it wrote into its model while it ran ("
            + ", ".join(os.path.basename(path) for path in watched.changed_files[:3])
            + "): what arrived is not a load of the model"
        )
    cold = watched.cache is not None and watched.cache.resident_before <= COLD_THRESHOLD
    if watched.cache is not None and watched.cache.warm and not own_clock:
        return "failed", WARM_LOAD
    if not watched.saw_model and not own_clock:  # a warm load may end between two looks
        return "failed", "it never opened or mapped the model's files" + said
    model_bytes = sum(f.size for f in model.files)
    if cold and watched.bytes_read < PARTIAL_BELOW * model_bytes:
        share = f"only {watched.bytes_read / model_bytes:.1%} of the model arrived or was touched"
        if watched.other_readers:  # their evictions take pages before they are seen
            return "failed", (
                f"{share} while another process read its files "
                f"({readers_line(watched.other_readers)}): pages it dropped arrive "
                "unseen, so the load is not timed; run it when nothing else reads the model"
            )
        if watched.read_bytes >= PARTIAL_BELOW * model_bytes:
            return "failed", (
                f"{share}, yet its processes read {human_bytes(watched.read_bytes)} from "
                "storage: reads past the page cache (O_DIRECT) that began and ended between "
                "two of the watch's looks cannot be timed from outside; a program that "
                f"prints {OWN_REPORT} as its last line is timed by its own clock"
            )
        return "failed", f"{share}: a lazy load measures nothing (touch every byte it loads)"
    if watched.seconds is None or watched.seconds <= 0:
        return "failed", UNTIMED + ("" if cold else " (the model was already in the page cache)")
    return "ok", None


def _as_server(watched: WatchResult, model: Model, said: str) -> tuple[str, str | None] | None:
    """A server's run judged by its ready: ok where it was seen ready after reading its
    weights; failed where it was not ready in time, exited before, or was ready before it
    read them (a lazy server: its time to ready is no cold start's). None: not a server's
    run (no ready asked, none seen), judged as a load."""
    cold = watched.cold_start
    if cold is None:
        return None
    if watched.ended_by == "ready-timeout":
        return "failed", f"not ready within {watched.wall_seconds:.0f} s (its ready timeout){said}"
    if cold.ready_s is None:
        if cold.asked and watched.ended_by == "exit":
            how = watched.killed_text if watched.signal else f"exit code {watched.exit_code}"
            return "failed", f"it exited ({how}) before it was ready{said}"
        return None
    if watched.ended_by != "ready":
        return None  # seen ready, and watched on (an engine's run): judged as its load
    if watched.changed_files:
        return "failed", "it wrote into its model while it ran: not a start of the model"
    # From a cold cache its weights' bytes arrive, and tell a lazy server; from a warm one
    # nothing arrives, and a quick read between two looks may leave no trace of its own.
    fresh = watched.cache is not None and watched.cache.resident_before <= COLD_THRESHOLD
    if (
        cold.lazy
        and fresh
        and watched.read_bytes < PARTIAL_BELOW * sum(f.size for f in model.files)
    ):
        return "failed", (
            f"ready at {cold.ready_s:.1f} s, before any of its weights was read (a lazy server "
            "loads on its first request): its time to ready is no cold start's; name what "
            "answers once it has loaded (--ready-url, --ready-line)"
        )
    model_bytes = sum(f.size for f in model.files)
    # Read past the page cache (O_DIRECT), its bytes arrive nowhere: the block layer counts.
    read = max(watched.bytes_read, watched.read_bytes)
    if fresh and model_bytes and read < PARTIAL_BELOW * model_bytes:
        share = read / model_bytes
        return "failed", (
            f"ready having read only {share:.0%} of its model from a cold cache: the rest "
            "waits for its first requests, so its time to ready is not its cold start's"
        )
    return "ok", None
