"""Ending a watched command's process tree: SIGTERM to its process group and to every process
of its tree, SIGKILL for what lingers, each wait in slices of ``POLL_S`` with a deadline.

A process is signalled only while it is the one the tree saw (its start ticks), so a pid the
kernel gave to another process meanwhile is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

from modelmon.core.loading.reads import now_ns
from modelmon.core.system.readiness import wait_readable
from modelmon.core.watching.observer import Observer
from modelmon.core.watching.orphans import reap
from modelmon.core.watching.tree import read_command, still_running

POLL_S = 0.05
STOP_GRACE_S = 3.0
# How long a SIGKILLed process may take to be gone before it is left unreaped: dying is
# quick, but on a loaded machine an exit that unmaps gigabytes waits its turn for a CPU;
# only one stuck in the kernel (a hung FUSE mount) takes longer, and that is said.
KILLED_GONE_S = 20.0


def members_of(observer: Observer, root: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of every live process of the watched tree but the root."""
    tree = observer.tree
    if tree is None:
        return []
    with observer.lock:
        tree.refresh(now_ns())
        return [(m.pid, m.start_ticks) for m in tree.live() if m.pid != root]


def signal_tree(observer: Observer, root: int, number: signal.Signals) -> None:
    """Signal the command's process group, then every other process of its tree (one that
    left the group with setsid). The tree is read first: once the root is gone its children
    belong to init, and a child never seen could no longer be told apart."""
    members = members_of(observer, root)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, number)  # its own session: the group id is its pid
    for pid, start_ticks in members:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                data = stat.read()
            if int(data[data.rindex(b")") + 2 :].split()[19]) == start_ticks:
                os.kill(pid, number)
        except (OSError, ValueError, IndexError):
            continue


def wait_gone(members: list[tuple[int, int]], deadline: float) -> bool:
    """Whether every one of ``members`` has ended by ``deadline`` (looked at in slices)."""
    while still_running(members):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(POLL_S / 5, left))
    return True


def wait_exit(root: int, exited: Callable[[], bool], seconds: float) -> bool:
    """Whether the root exited (``exited``) within ``seconds``, waiting on its pidfd in
    slices."""
    deadline = time.monotonic() + seconds
    pidfd = None
    with contextlib.suppress(OSError, AttributeError):
        pidfd = os.pidfd_open(root)
    try:
        while not exited():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if pidfd is not None:
                wait_readable(pidfd, min(POLL_S, left))
            else:
                time.sleep(min(POLL_S / 5, left))  # no pidfd: a poll of the exit status
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def stop_tree(observer: Observer, root: int, exited: Callable[[], bool]) -> str:
    """SIGTERM the command's process group and tree, SIGKILL what lingers (the root, or any
    process of its tree: a child that outlives its parent is not left behind); how it went."""
    members = members_of(observer, root)  # read first: once the root is gone, so is its tree's
    signal_tree(observer, root, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    if wait_exit(root, exited, STOP_GRACE_S) and wait_gone(members, deadline):
        return "SIGTERM"
    signal_tree(observer, root, signal.SIGKILL)
    for pid, _ in still_running(members):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    wait_exit(root, exited, STOP_GRACE_S)
    wait_gone(members, time.monotonic() + STOP_GRACE_S)
    return f"SIGTERM, then SIGKILL after {STOP_GRACE_S:.0f} s"


def leftovers(observer: Observer, root: int) -> list[tuple[int, int]]:
    """(pid, start ticks) of the processes of a started command's tree that still run
    without it (a daemon it left, a child it did not wait for)."""
    return still_running(members_of(observer, root))


def stop_started(
    observer: Observer, root: int, exited: Callable[[], bool]
) -> tuple[str | None, str | None]:
    """Stop a command modelmon started, or, once it exited, what it left running: (how the
    command was stopped while it ran, a note naming what it left and how that was stopped)."""
    if not exited():
        return stop_tree(observer, root, exited), None
    left = leftovers(observer, root)
    if not left:
        return None, None
    commands = ", ".join(f"{pid} ({_command(observer, pid)[:60] or '?'})" for pid, _ in left[:5])
    how = stop_tree(observer, root, lambda: True)  # returns once they are gone, or bounded
    survivors = still_running(left)
    what = f"the command left {len(left)} process(es) running when it exited (pids {commands})"
    if survivors:
        return None, (
            f"{what}: modelmon could not stop {len(survivors)} of them ({how}): pids "
            + ", ".join(str(pid) for pid, _ in survivors[:10])
        )
    return None, f"{what}: modelmon stopped them ({how})"


def _command(observer: Observer, pid: int) -> str:
    """A member's command as the tree first saw it (it may be gone by now), else as now."""
    member = observer.tree.members.get(pid) if observer.tree is not None else None
    words = (member.command if member is not None else ()) or read_command(pid)
    return " ".join(" ".join(words).split())  # one line, whatever a -c script holds


def end_and_reap(
    observer: Observer, process: subprocess.Popen[Any], root: int, end_ns: int
) -> str | None:
    """After the final look: nothing of the started command's tree is left running, its
    orphans (this process's, as their subreaper) and the command are reaped; a note when the
    command could not be."""
    tree = observer.tree
    if tree is not None:
        with observer.lock:
            tree.mark_exited(root, end_ns)
    if process.poll() is None:  # never left running: the run ends here, one way or another
        signal_tree(observer, root, signal.SIGKILL)
    if tree is not None:
        others = [(m.pid, m.start_ticks) for m in tree.members.values() if m.pid != root]
        wait_gone(others, time.monotonic() + KILLED_GONE_S)
        reap([pid for pid, _ in others])
        # What the result says of them is their state now, the stop done: those that ended
        # since the final look (stopped, or zombies just reaped) are no longer live members.
        running = set(still_running(others))
        with observer.lock:
            for pid, start_ticks in others:
                if (pid, start_ticks) not in running:
                    tree.mark_exited(pid, now_ns())
    try:
        process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:  # SIGKILLed and still there: stuck in the kernel
        return (
            f"pid {root} did not exit {STOP_GRACE_S:.0f} s after SIGKILL (stuck in an "
            "uninterruptible wait, as on a hung FUSE mount); it was not reaped"
        )
    if tree is not None:
        # A child that ended before its parent was a zombie of that parent: its parent's
        # exit hands it to this process, the subreaper, which reaps it then.
        reap_handed_over(
            [m.pid for m in tree.members.values() if m.pid != root],
            time.monotonic() + KILLED_GONE_S,
        )
    return None


def reap_handed_over(pids: list[int], deadline: float) -> None:
    """Reap each of ``pids`` as it is handed to this process: a zombie whose parent (another
    of the tree, SIGKILLed, on a loaded machine still unmapping its memory) has yet to exit
    is waited for, up to ``deadline``; one reaped by another parent, or gone, is done."""
    left = set(pids)
    while left:
        left -= set(reap(sorted(left)))
        left = {pid for pid in left if _zombie_parent(pid) is not None}  # not reaped yet
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(POLL_S / 5)


def _zombie_parent(pid: int) -> int | None:
    """The parent of ``pid`` while it is a zombie, else None (running, or gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]) if fields[0] == b"Z" else None
