"""Worker processes' lives: started without the parent's ``__main__``, ended escalating.

``start_workers`` starts ``LoadRun``'s, each with its own pipe; ``halted_on_exit`` lets a
wait of the parent's end when one exits. ``LoadRun`` and the app's bridge end theirs through
``stop_processes``: join, then terminate, then kill, each with a short grace, so none outlives
the run; ``death_description`` says in words how one ended early, and whether the kernel's
OOM killer did it (``system.oom``: its record of that process, or the run's cgroup's).

A process killed while it waits for a FUSE request (a read of a network filesystem's file)
exits only once the filesystem answers that request: the kernel lets it finish, however long
it takes, and the process's sentinel stays silent meanwhile. ``ending_code`` sees such a
process at once (the SIGKILL pending on it, or its exit begun), so a run need not wait for the
network to learn that its worker is dead, and ``stop_processes`` leaves one it has killed to a
thread that reaps it when the kernel lets it go.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pkgutil
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import send_handle
from typing import Any, TypeVar

from modelmon.core.system.oom import oom_killed

JOIN_GRACE_S = 0.5
FAILED_GRACE_S = 0.2  # once the run has failed, the others' last reads are worth no longer
# /proc/PID/stat, counted from the field after "(comm)": flags (field 9), and the exit status
# (field 52), which the kernel sets as the process begins its exit.
STAT_FLAGS, STAT_EXIT_CODE = 6, 49
PF_EXITING = 0x4
Found = TypeVar("Found")


# Every load worker's process name begins so: how this process finds its own workers.
WORKER_NAME = "modelmon-worker-"
# numpy's OpenBLAS starts a thread per core as it is imported, and they spin for about a tenth
# of a second of CPU each: a worker never multiplies matrices, and the spinning would take the
# CPU from the load it measures (a value the user set is kept).
WORKER_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1"}


class _WorkerEntry:
    """A spawn child's target as its pickle names it: unpickled before the target's arguments,
    whose modules import numpy, it sets the worker's environment first (``_entered``)."""

    def __init__(self, target: Callable[..., None]) -> None:
        self.target = target

    def __call__(self, *args: Any) -> None:
        self.target(*args)

    def __reduce__(self) -> tuple[Callable[[str, str], Callable[..., None]], tuple[str, str]]:
        return _entered, (self.target.__module__, self.target.__qualname__)


def _entered(module: str, name: str) -> Callable[..., None]:
    """In the spawn child, as its target is unpickled: the environment, then the target."""
    for variable, value in WORKER_ENVIRONMENT.items():
        os.environ.setdefault(variable, value)
    target: Callable[..., None] = pkgutil.resolve_name(f"{module}:{name}")
    return target


def start_workers(
    context: Any,
    tasks: list[Any],
    target: Callable[..., None],
    memory: Any,
    handles: list[int],
    processes: list[Any],
    conns: dict[int, Connection],
    placed: Callable[[int], None] | None = None,
) -> None:
    """One spawn process per task, running ``target(task, its end of its own pipe, memory)``
    without the parent's ``__main__`` and in ``WORKER_ENVIRONMENT``; each is handed ``handles``
    over its pipe (SCM_RIGHTS). Each goes into ``processes`` and its pipe's parent end into
    ``conns`` as soon as it is started, so a caller's cleanup reaches every one, however far
    this got. ``placed`` hears each one's pid at once (a run's memory cgroup takes it in before
    it is told to load)."""
    for worker, task in enumerate(tasks):
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(
            target=_WorkerEntry(target),
            name=f"{WORKER_NAME}{worker}",
            args=(task, child_end, memory),
            daemon=True,
        )
        with main_module_hidden():
            process.start()
        processes.append(process)
        conns[worker] = parent_end
        if placed is not None:
            placed(process.pid)
        child_end.close()
        for descriptor in handles:
            send_handle(parent_end, descriptor, process.pid)


def stop_workers(grace_s: float = JOIN_GRACE_S) -> list[Any]:
    """Stop this process's load workers, whichever runs started them (``stop_processes``):
    the way out for a caller whose run is stuck and cannot stop its own."""
    workers = [p for p in multiprocessing.active_children() if p.name.startswith(WORKER_NAME)]
    return stop_processes(workers, grace_s)


def stop_processes(processes: list[Any], grace_s: float = JOIN_GRACE_S) -> list[Any]:
    """join → terminate → kill, each with a short grace; returns when all are reaped, but for
    those the kernel still holds after their SIGKILL (in a FUSE request): returned, and joined
    by a thread of their own (``reap_later``), since nothing more can stop them."""
    deadline = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for step in ("terminate", "kill"):
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            return []
        for process in alive:
            getattr(process, step)()
        deadline = time.monotonic() + grace_s
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))
    held = [p for p in processes if p.is_alive()]
    if held:
        reap_later(held)
    return held


def reap_later(processes: list[Any]) -> None:
    """Join ``processes`` in a daemon thread: each is killed and waits only for the kernel to
    let it exit (when its filesystem answers), so no caller need wait, but none stays a zombie."""

    def join_all() -> None:
        for process in processes:
            process.join()

    threading.Thread(target=join_all, name="modelmon-reaper", daemon=True).start()


def held_note(held: list[Any]) -> str | None:
    """The note a run's result carries for workers still held by the kernel at its end."""
    if not held:
        return None
    pids = ", ".join(str(p.pid) for p in held)
    return (
        f"worker process(es) {pids} were killed while the filesystem had a read of theirs "
        "unanswered: the kernel lets them exit once it answers"
    )


def ending_code(pid: int | None) -> int | None:
    """How process ``pid`` (a child, so not yet reaped) ends, as multiprocessing's exitcode
    (-N: killed by signal N), as soon as it is bound to, though it has not exited: it is in its
    exit, or SIGKILL is pending on it. None while it runs. Such a process may be held a while by
    an uninterruptible wait: a FUSE request in flight, or the flush of its FUSE files."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
        if int(fields[STAT_FLAGS]) & PF_EXITING:
            status = int(fields[STAT_EXIT_CODE])  # as waitpid reports it
            return -(status & 0x7F) if status & 0x7F else status >> 8
        with open(f"/proc/{pid}/status") as lines:
            for line in lines:
                if line.startswith(("ShdPnd:", "SigPnd:")) and int(line.split()[1], 16) & (
                    1 << (signal.SIGKILL - 1)
                ):
                    return -signal.SIGKILL
    except (OSError, ValueError, IndexError):
        return None
    return None


def stopped(pid: int | None) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, SIGTSTP, a debugger's trace): it makes
    no progress until something continues it."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("T", "t")


def ending_workers(by_sentinel: dict[Any, int], processes: list[Any]) -> list[int]:
    """The workers of ``by_sentinel`` (sentinel → worker index into ``processes``) bound to
    end though their sentinel may be silent (``ending_code``): taken out of it."""
    found = []
    for sentinel, worker in list(by_sentinel.items()):
        if ending_code(processes[worker].pid) is not None:
            del by_sentinel[sentinel]
            found.append(worker)
    return found


def exit_code(process: Any) -> int | None:
    """The process's exit code, or how it is ending (``ending_code``); None while it runs."""
    code: int | None = process.exitcode
    return code if code is not None else ending_code(process.pid)


POLLING_JOIN_S = 5.0  # how long the end of a block waits for its polling thread


@contextlib.contextmanager
def polling_thread(
    look: Callable[[], Found | None], act: Callable[[Found], None], name: str
) -> Iterator[None]:
    """For the block, a thread named ``name`` calls ``look`` until it finds something, then
    ``act`` on it once, if the block still runs. ``look`` waits a moment itself (never on a
    lock another process may hold): that bounds how soon the thread ends after the block.
    The block's end waits for the thread at most ``POLLING_JOIN_S``: a ``look`` or ``act``
    stuck on something remote is left to finish alone (a daemon thread) rather than holding
    up the run that no longer needs it."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            found = look()
            if found is not None and not done.is_set():
                act(found)
                return

    watcher = threading.Thread(target=watch, name=name, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join(POLLING_JOIN_S)


def halted_on_exit(
    processes: list[Any], halt: threading.Event, cancel: threading.Event
) -> contextlib.AbstractContextManager[None]:
    """For the block (a wait of the caller's, say the cache preparation), a thread watches
    ``processes``' sentinels and ``cancel``: either sets ``halt``, which the wait heeds."""
    sentinels = [process.sentinel for process in processes]

    def exit_or_cancel() -> bool | None:
        exited = wait(sentinels, timeout=0.05)
        ending = any(ending_code(p.pid) is not None for p in processes)
        return True if exited or ending or cancel.is_set() else None

    return polling_thread(exit_or_cancel, lambda _: halt.set(), "modelmon-exit-watch")


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start spawn children without re-running the parent's ``__main__`` script.

    ``spawn`` re-imports the main script in every child; a script (or app) that imports Qt at
    the top would put Qt in every worker. The workers need nothing from it: their entry point
    is ``worker_main``, imported by name. So while starting them, ``__main__`` is a bare module.
    """
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def exit_description(exitcode: int | None) -> str:
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        if -exitcode == signal.SIGBUS:
            return (
                "killed by SIGBUS: a mapped page vanished (was the file truncated or "
                "replaced during the load?)"
            )
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


def death_description(
    exitcode: int | None,
    oom_kills_before: int | None,
    pid: int | None = None,
    cgroup_oom_kills: int | None = None,
) -> str:
    """How a process that should still be working ended, after its name ("worker 2 (pid N)
    ..."). A SIGKILL is what the OOM killer sends: said so for the run's own cgroup's kills
    (``cgroup_oom_kills``, those since it was made), or the kernel's record of ``pid``
    (``system.oom``); where neither tells, the machine's count (``oom_kills_before``, at the
    start) can only say it was not one, or that it may have been."""
    if exitcode is not None and exitcode >= 0:
        return f"{exit_description(exitcode)} before finishing"
    if exitcode != -signal.SIGKILL:
        return f"was {exit_description(exitcode)}"
    killed = True if cgroup_oom_kills else None
    if killed is None and pid is not None:
        killed = oom_killed(pid, oom_kills_before)
    if killed:
        return "was killed by SIGKILL: the kernel's OOM killer ended it (out of memory)"
    if killed is None:
        return (
            "was killed by SIGKILL while the kernel's OOM killer was at work on this machine: "
            "out of memory? (the kernel's log, which names the process, cannot be read here)"
        )
    return (
        "was killed by SIGKILL, not by the kernel's OOM killer "
        "(a kill -9, or a user-space OOM daemon such as systemd-oomd?)"
    )
