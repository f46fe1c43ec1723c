"""The leak check behind ``no_leaks`` (tests/conftest.py): what a test process has open and
running before and after a test — child processes, Python threads, descriptors, and processes
it started that left its tree — and what is still there after a grace.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

LEAK_GRACE_S = 2.0  # how long stragglers (exiting workers, joining threads) get

# A process this test process starts inherits this mark in its environment (unless it is
# given an environment of its own), so that one which leaves the process tree (a daemon:
# setsid and a double fork, handed to init or to a subreaper above pytest) is still known as
# this process's: a leak the tree cannot show. Each pytest process (an xdist worker too) marks
# its own.
STRAY_MARK = "MODELMON_TEST_STARTER"
os.environ[STRAY_MARK] = str(os.getpid())


@dataclass(frozen=True)
class Snapshot:
    children: frozenset[tuple[int, str]]  # (pid, start time): a reused pid is a new process
    threads: frozenset[threading.Thread]
    fds: frozenset[tuple[int, str]]  # (fd, readlink target)
    strays: frozenset[tuple[int, str]]  # marked processes outside this process's tree


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat.rpartition(")")[2].split()[19]  # field 22, counted after "(comm)"


def process_state(pid: int) -> str:
    """Its state letter from /proc (``Z``: exited, not yet reaped), or ``gone`` once reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc (20x cheaper than psutil, which scans all pids)."""
    kids: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids.extend(int(k) for k in f.read().split())
        except OSError:
            continue
    return kids


def _descendants() -> set[int]:
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # kernel without it
        import psutil

        return {p.pid for p in psutil.Process().children(recursive=True)}
    found: set[int] = set()
    todo = child_pids(os.getpid())
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(child_pids(pid))
    return found


def _ancestors() -> list[int]:
    """This process's ancestors, and init: where an orphan of its tree can be handed (the
    nearest subreaper above the process that died, else init, which a chain from another
    pid namespace does not reach)."""
    found: list[int] = []
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError):
            break
        if pid > 0:
            found.append(pid)
    return found if 1 in found else [*found, 1]


def _marked(pid: int) -> bool:
    mark = f"{STRAY_MARK}={os.getpid()}".encode()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in f.read().split(b"\0")
    except OSError:
        return False


def _strays(tree: set[int]) -> frozenset[tuple[int, str]]:
    """Processes this one started that left its tree: children of its ancestors (the only
    places an orphan can go) that carry this process's mark. Reads one environment per child
    of an ancestor, a few dozen on a test machine."""
    if not os.path.exists(f"/proc/self/task/{os.getpid()}/children"):  # kernel without it
        return frozenset()
    ancestors = _ancestors()
    found = set()
    for ancestor in ancestors:
        for pid in child_pids(ancestor):
            if pid in tree or pid in ancestors or pid == os.getpid() or not _marked(pid):
                continue
            found.add((pid, _start_time(pid)))
    return frozenset(found)


def _interpreter_helpers() -> tuple[set[int], set[int]]:
    """Pids and fds of multiprocessing's resource tracker and forkserver.

    Each is started once, on first use, and lives as long as the interpreter by design:
    the test that happens to start one has not leaked it.
    """
    from multiprocessing import forkserver, resource_tracker

    tracker = resource_tracker._resource_tracker
    server = forkserver._forkserver
    pids = {tracker._pid, server._forkserver_pid}
    fds = {tracker._fd, server._forkserver_alive_fd}
    return {p for p in pids if p}, {f for f in fds if f is not None}


def snapshot() -> Snapshot:
    """What this process has open now: child processes, Python threads, file descriptors."""
    helper_pids, helper_fds = _interpreter_helpers()
    tree = _descendants()
    children = frozenset((p, _start_time(p)) for p in tree - helper_pids)
    threads = frozenset(t for t in threading.enumerate() if _thread_alive(t))
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd in helper_fds:
            continue
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the directory fd listdir used, closed by now
            continue
        if target.startswith("/dev/pts/"):  # the terminal, reopened by pytest's capture
            continue
        fds.add((fd, target))
    return Snapshot(frozenset(children), threads, frozenset(fds), _strays(tree))


def _thread_alive(thread: threading.Thread) -> bool:
    if isinstance(thread, threading._DummyThread):  # made for a foreign (e.g. Qt) thread,
        native = thread.native_id  # never removed from threading's table: ask the kernel
        return native is not None and os.path.exists(f"/proc/self/task/{native}")
    return thread.is_alive()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "(exited)"
    state = process_state(pid)
    if state == "gone":
        return "(exited)"
    if state == "Z":
        try:  # a zombie keeps its name (comm), which says what it was
            with open(f"/proc/{pid}/comm", "rb") as f:
                name = f.read().decode(errors="replace").strip()
        except OSError:
            name = "?"
        return f"(zombie {name}: exited but never waited for)"
    return cmd[:200] or "(no cmdline)"


@dataclass(frozen=True)
class Leaks:
    children: frozenset[tuple[int, str]]
    threads: frozenset[threading.Thread]
    fds: frozenset[tuple[int, str]]
    strays: frozenset[tuple[int, str]] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.children or self.threads or self.fds or self.strays)

    def describe(self) -> list[str]:
        """One line per leak: pid and command line, thread name, fd and what it points to."""
        lines = [f"child process {pid}: {_cmdline(pid)}" for pid, _ in sorted(self.children)]
        lines += [
            f"thread {t.name!r} (ident {t.ident}, daemon={t.daemon})"
            for t in sorted(self.threads, key=lambda t: t.ident or 0)
        ]
        lines += [f"fd {fd} -> {target}" for fd, target in sorted(self.fds)]
        lines += [
            f"process {pid} out of the tree (a daemon left running): {_cmdline(pid)}"
            for pid, _ in sorted(self.strays)
        ]
        return lines


def _diff(now: Snapshot, before: Snapshot) -> Leaks:
    return Leaks(
        now.children - before.children,
        now.threads - before.threads,
        now.fds - before.fds,
        now.strays - before.strays - before.children,  # a child before, orphaned during
    )


def find_leaks(before: Snapshot, grace: float | None = None) -> Leaks:
    """What was opened or started since ``before`` and is still there after ``grace`` s.

    Cheap when nothing leaked (one snapshot). Otherwise stragglers get ``grace`` seconds
    to finish, while finished multiprocessing children are reaped (``active_children``
    joins them) and garbage collections close files held only by reference cycles: one
    each look, for a straggler leaves its cycle when it ends (a server's request thread
    that ended by an exception keeps its frame's files in the traceback's cycle).

    The verdict is the first look that began after the deadline, so what a straggler left
    before the deadline has had a collection: a look takes as long as a collection of the
    whole heap, over a second on a loaded machine, and one begun before the deadline can
    end after it with a cycle made while it ran still uncollected.
    """
    found = _diff(snapshot(), before)
    if not found:
        return found
    deadline = time.monotonic() + (LEAK_GRACE_S if grace is None else grace)
    while True:
        last = time.monotonic() >= deadline
        gc.collect()
        multiprocessing.active_children()
        found = _diff(snapshot(), before)
        if not found or last:
            return found
        for thread in found.threads:
            if not isinstance(thread, threading._DummyThread):
                thread.join(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
        time.sleep(0.02)


def end_strays(strays: Iterable[tuple[int, str]]) -> None:
    """SIGKILL reported strays that are still the processes seen (pid and start time), so
    that one test's daemon does not read beside the next tests."""
    for pid, started in strays:
        if _start_time(pid) == started and _marked(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def reap_zombies(pids: Iterable[int]) -> None:
    """Wait for those of ``pids`` that are zombies, so a reported leak doesn't linger."""
    for pid in pids:
        if process_state(pid) == "Z":
            with contextlib.suppress(OSError):  # not ours to wait for, or reaped already
                os.waitpid(pid, os.WNOHANG)
