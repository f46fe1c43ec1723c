"""A command's processes that leave its tree (a daemon: fork, ``setsid``, fork again, the
middle one exits) are kept in reach: modelmon's process becomes a child subreaper
(``PR_SET_CHILD_SUBREAPER``), so an orphan of the command's tree is handed to it instead of
to init, and the watch adopts it into the tree (``ProcessTree.adopt_orphans``), follows its
reads and ends it with the rest.

Which children of modelmon's process are orphans and not its own: those born since the
command (start ticks not before the root's) that are neither the command itself nor one of
the processes this process started through multiprocessing (workers, its resource tracker).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import threading
from collections.abc import Callable
from multiprocessing import resource_tracker

from modelmon.core.system.libc import LIBC  # loaded here, not in the forked child

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
_LOCK = threading.Lock()
_HOLDERS = 0  # watches of a started command running in this process
_WAS_SUBREAPER = False  # what the process was before the first of them: kept after the last


def hold_subreaper() -> bool:
    """Make this process the subreaper of what it starts, for as long as a watch holds it
    (``release_subreaper``: orphans of this process's other children, later, go to init as
    they would without modelmon); whether it is one."""
    global _HOLDERS, _WAS_SUBREAPER
    with _LOCK:
        if _HOLDERS == 0:
            _WAS_SUBREAPER = is_subreaper()
            if not _set_subreaper(True):
                return False
        _HOLDERS += 1
        return True


def release_subreaper() -> None:
    global _HOLDERS
    with _LOCK:
        _HOLDERS -= 1
        if _HOLDERS == 0 and not _WAS_SUBREAPER:  # a process that was one (a supervisor) stays
            _set_subreaper(False)


def is_subreaper() -> bool:
    flag = ctypes.c_int(0)
    LIBC.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    return bool(flag.value)


def _set_subreaper(on: bool) -> bool:
    return int(LIBC.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0


def own_children() -> set[int]:
    """This process's children it started itself through multiprocessing."""
    pids = {process.pid for process in multiprocessing.active_children() if process.pid}
    tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
    if isinstance(tracker, int):
        pids.add(tracker)
    return pids


def reap(pids: list[int]) -> list[int]:
    """Reap those of ``pids`` that ended and are this process's children (adopted orphans:
    nobody else will); the pids reaped."""
    reaped = []
    for pid in pids:
        with contextlib.suppress(ChildProcessError, OSError):
            done, _ = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                reaped.append(pid)
    return reaped


PR_SET_PDEATHSIG = 1


def end_with_parent(parent: int) -> Callable[[], None]:
    """For a started command, run between fork and exec (``preexec_fn``): SIGTERM when
    ``parent`` (the process that starts it) dies, SIGKILL included, which leaves modelmon no
    way to stop it itself. Only a prctl: nothing there takes a lock another thread of the
    parent may have held at the fork."""

    def in_child() -> None:
        LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took hold
            os._exit(1)

    return in_child
