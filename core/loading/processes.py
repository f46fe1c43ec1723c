"""Worker processes' lives: started without the parent's ``__main__``, ended escalating.

``start_workers`` starts ``LoadRun``'s, each with its own pipe; ``halted_on_exit`` lets a
wait of the parent's end when one exits. ``LoadRun`` and the app's bridge end theirs through
``stop_processes``: join, then terminate, then kill, each with a short grace, so none outlives
the run; ``death_description`` says in words how one ended early, and whether the kernel's
OOM killer did it (its ``oom_kill`` count in /proc/vmstat rose since the run began).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import send_handle
from typing import Any

JOIN_GRACE_S = 0.5
FAILED_GRACE_S = 0.2  # once the run has failed, the others' last reads are worth no longer
VMSTAT = "/proc/vmstat"


def start_workers(
    context: Any,
    tasks: list[Any],
    target: Callable[..., None],
    memory: Any,
    handles: list[int],
    processes: list[Any],
    conns: dict[int, Connection],
) -> None:
    """One spawn process per task, running ``target(task, its end of its own pipe, memory)``
    without the parent's ``__main__``; each is handed ``handles`` over its pipe (SCM_RIGHTS).
    Each goes into ``processes`` and its pipe's parent end into ``conns`` as soon as it is
    started, so a caller's cleanup reaches every one, however far this got."""
    for worker, task in enumerate(tasks):
        parent_end, child_end = context.Pipe(duplex=True)
        process = context.Process(
            target=target,
            name=f"modelmon-worker-{worker}",
            args=(task, child_end, memory),
            daemon=True,
        )
        with main_module_hidden():
            process.start()
        processes.append(process)
        conns[worker] = parent_end
        child_end.close()
        for descriptor in handles:
            send_handle(parent_end, descriptor, process.pid)


def stop_processes(processes: list[Any], grace_s: float = JOIN_GRACE_S) -> None:
    """join → terminate → kill, each with a short grace; returns when all are reaped."""
    deadline = time.monotonic() + grace_s
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for step in ("terminate", "kill"):
        alive = [p for p in processes if p.is_alive()]
        if not alive:
            return
        for process in alive:
            getattr(process, step)()
        deadline = time.monotonic() + grace_s
        for process in alive:
            process.join(max(0.0, deadline - time.monotonic()))


@contextlib.contextmanager
def halted_on_exit(
    processes: list[Any], halt: threading.Event, cancel: threading.Event
) -> Iterator[None]:
    """For the block (a wait of the caller's, say the cache preparation), a thread watches
    ``processes``' sentinels and ``cancel``: either sets ``halt``, which the wait heeds."""
    sentinels = [process.sentinel for process in processes]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if wait(sentinels, timeout=0.05) or cancel.is_set():
                halt.set()
                return

    watcher = threading.Thread(target=watch, name="modelmon-exit-watch", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()


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


def oom_kills(vmstat: str = VMSTAT) -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (``oom_kill`` in
    /proc/vmstat, any cgroup's included); None where the kernel does not count them."""
    try:
        with open(vmstat) as lines:
            for line in lines:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def death_description(exitcode: int | None, oom_kills_before: int | None) -> str:
    """How a process that should still be working ended, after its name ("worker 2 (pid N)
    ..."). A SIGKILL is what the OOM killer sends: said for sure when the kernel's OOM kill
    count rose since ``oom_kills_before`` (``oom_kills()`` at the start), asked otherwise."""
    if exitcode is not None and exitcode >= 0:
        return f"{exit_description(exitcode)} before finishing"
    if exitcode != -signal.SIGKILL:
        return f"was {exit_description(exitcode)}"
    now = oom_kills()
    if oom_kills_before is None or now is None:
        return "was killed by SIGKILL: out of memory?"
    if now > oom_kills_before:
        return "was killed by SIGKILL: the kernel's OOM killer ended it (out of memory)"
    return (
        "was killed by SIGKILL, not by the kernel's OOM killer "
        "(a kill -9, or a user-space OOM daemon such as systemd-oomd?)"
    )
