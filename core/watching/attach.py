"""Which running process a watch may attach to (``watch --pid``)."""

from __future__ import annotations

import os

PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread


def unwatchable(pid: int) -> str | None:
    """Why a process cannot be watched from this one, or None: itself and its ancestors
    (its own sampling would keep the tree from ever going quiet, and it would wait for its own
    end) and kernel threads (no files, no end) are refused."""
    if pid == os.getpid():
        return "that is modelmon itself"
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        fields = data[data.rindex(b")") + 2 :].split()
        flags = int(fields[6])
    except (OSError, ValueError, IndexError):
        return None  # gone or unreadable: attaching says so in its own words
    if fields[0] in (b"Z", b"X"):
        return "it has already exited (a zombie its parent has not reaped): nothing to watch"
    if flags & PF_KTHREAD:
        return "a kernel thread, which loads no model"
    ancestor = os.getppid()
    while ancestor > 1:
        if ancestor == pid:
            return "an ancestor of modelmon (say, the shell it runs in): watch its loader's pid"
        try:
            with open(f"/proc/{ancestor}/stat", "rb") as stat:
                data = stat.read()
            ancestor = int(data[data.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    if pid == 1:
        return "init, an ancestor of every process: watch its loader's pid"
    return None
