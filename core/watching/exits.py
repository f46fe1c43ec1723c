"""How a watched program's end is read: whether its root process has exited, the status the
watch's ending is given, the exit code and signal of a command modelmon started, and what of
its tree still runs after the watch.

A command modelmon started stays a zombie until it is reaped, so its exit is seen without
reaping it (its counters stay readable for the final look); an attached process is gone when
its ``/proc`` entry is, is a zombie, or its pid now names another process (start ticks).
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING, Any

from modelmon.core.loading.reads import now_ns
from modelmon.core.watching.tree import ProcessTree

if TYPE_CHECKING:
    from modelmon.core.watching.observer import Observer

# The status of a watch of a command modelmon started, by what ended it.
STARTED_STATUS = {
    "exit": "exited",
    "quiet": "stopped",
    "cancel": "cancelled",
    "ready": "stopped",
    "ready-timeout": "stopped",
}
# An attached process is never stopped: the watch sees it go, or detaches from it.
ATTACHED_STATUS = {"exit": "gone", "quiet": "detached", "cancel": "detached"}


def root_exited(process: subprocess.Popen[Any] | None, tree: ProcessTree | None, root: int) -> bool:
    """Whether the watched root has exited: ``process`` when modelmon started it, else the
    attached pid ``root`` as ``tree`` knows it."""
    if process is not None:  # ours: a zombie until reaped, its counters readable
        found = os.waitid(os.P_PID, root, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        return found is not None and found.si_pid == root
    member = tree.members.get(root) if tree is not None else None
    try:
        with open(f"/proc/{root}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return True
    fields = data[data.rindex(b")") + 2 :].split()
    reused = member is not None and int(fields[19]) != member.start_ticks
    return reused or fields[0] in (b"Z", b"X")


def ending_status(ended_by: str, attached: bool) -> str:
    """The watch's status when ``ended_by`` ended it."""
    return (ATTACHED_STATUS if attached else STARTED_STATUS)[ended_by]


def exit_status(process: subprocess.Popen[Any] | None) -> tuple[int | None, str | None]:
    """A reaped command's exit code and the signal that ended it; (None, None) before."""
    if process is None or process.returncode is None:
        return None, None
    code = process.returncode
    if code < 0:
        return code, signal.Signals(-code).name
    return code, None


def still_running_note(tree: ProcessTree | None) -> str | None:
    """The note naming the processes of the tree (but its root) still running after the watch;
    None when none is."""
    if tree is None:
        return None
    left = [m.pid for m in tree.live() if m.pid != tree.root]
    if not left:
        return None
    return f"{len(left)} process(es) of the tree still run after the watch: pids " + ", ".join(
        map(str, left[:10])
    )


def newly_stopped(observer: Observer, said: set[int], t0_ns: int, after_s: float) -> list[str]:
    """A line for each process of the watched tree stopped (SIGSTOP, a debugger's trace) for
    ``after_s`` and not in ``said`` (added to it): the watch waits while it stays so."""
    tree = observer.tree
    if tree is None:
        return []
    now = now_ns()
    with observer.lock:
        stopped = [
            (m.pid, " ".join(m.command)[:60], m.stopped_ns)
            for m in tree.live()
            if m.stopped_ns is not None and m.pid not in said
        ]
    lines = []
    for pid, command, since in stopped:
        if since is None or now - since < after_s * 1e9:
            continue
        said.add(pid)
        lines.append(
            f"pid {pid} ({command}) is stopped (SIGSTOP: a debugger, a freezer?) since "
            f"{(since - t0_ns) / 1e9:.0f} s: the watch waits while it stays so; Ctrl+C ends it"
        )
    return lines
