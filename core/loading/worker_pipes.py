"""The parent's ends of a run's worker pipes: what its workers said, and which one died how.

``WorkerPipes`` holds each worker process of a ``LoadRun`` and the parent's end of its pipe,
and handles what comes over them: every message until each worker is ready (or done), one
fails, the run is cancelled or out of time, and each worker's end. Its ``ready``, ``done`` and
``reads`` are the run's live record, read from other threads while the load runs (the app's
state, a monitored ``Session``); ``LoadRun`` shows them as its own.

Nothing here blocks on something a dead process can hold: each wait is on the pipes and the
processes' sentinels for at most ``WAIT_S``, and between waits the cancel, the time limit, the
ready timeout, and workers killed but held by the kernel in a FUSE request
(``processes.ending_workers``) are checked. A worker that exits before it is done fails the
run; its death is named (``name_death``) only once the others are stopped, since a killed
process may take a while to be reaped and the others must not wait for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from modelmon.core.errors import StorageError
from modelmon.core.loading.messages import ReadBatch, WorkerDone, WorkerFailed, WorkerReady
from modelmon.core.loading.processes import (
    death_description,
    ending_workers,
    exit_code,
    stopped,
)
from modelmon.core.loading.reads import ReadLog, now_ns

READY_TIMEOUT_S = 120.0
WAIT_S = 0.05  # the longest wait on the pipes before the run's limits are checked again
KILLED_CHECK_S = 0.05  # how often a run looks for a worker killed but not yet exited
# A worker stopped this long (SIGSTOP: a debugger, a freezer, Ctrl+Z of its own) makes no
# progress and its load cannot be timed: the run fails, rather than wait for ever.
STOPPED_LIMIT_S = 10.0
# The run's ``on_message``, passed to each call rather than kept: a session drops it from its
# run once the run is over, and nothing here may hold it on.
Receiver = Callable[[object], None] | None


class WorkerPipes:
    """A run's worker processes, the parent's ends of their pipes, and what came over them."""

    def __init__(self, cancel: threading.Event) -> None:
        self.processes: list[Any] = []  # filled by processes.start_workers
        self.conns: dict[int, Connection] = {}
        self.reads = ReadLog()
        self.ready: dict[int, WorkerReady] = {}
        self.done: dict[int, WorkerDone] = {}
        self.stopped: dict[int, WorkerFailed] = {}  # workers that said they failed, or stopped
        self.failure: str | None = None  # what a worker reported, or how one died once named
        self.storage_error: StorageError | None = None  # the failure, when the storage's
        self.dead: int | None = None  # the first worker that died before finishing
        self._cancel = cancel
        self._stopped_since: dict[int, float] = {}  # worker → when it was first seen stopped

    @property
    def failed(self) -> bool:
        """A worker failed or died before finishing."""
        return self.failure is not None or self.dead is not None

    def collect(
        self, on_message: Receiver, *, until_ready: bool, deadline_ns: int | None = None
    ) -> bool:
        """Handle messages (each also to ``on_message``) until every worker is ready
        (``until_ready``) or done, one fails or dies, or the run is cancelled; True when it
        stopped at ``deadline_ns`` instead (``now_ns`` time, only while loading)."""
        started = time.monotonic()
        open_conns = dict(self.conns)
        by_sentinel = {p.sentinel: w for w, p in enumerate(self.processes)}
        next_check = started
        while not self.failed:
            target = self.ready if until_ready else self.done
            if len(target) == len(self.processes) or self._cancel.is_set():
                return False
            if not until_ready and deadline_ns is not None and now_ns() > deadline_ns:
                return True
            if until_ready and time.monotonic() - started > READY_TIMEOUT_S:
                self.failure = f"workers not ready after {READY_TIMEOUT_S:.0f} s"
                return False
            waitables: list[Any] = [*open_conns.values(), *by_sentinel]
            for item in wait(waitables, timeout=WAIT_S):
                if item in by_sentinel:
                    self._died(by_sentinel.pop(item), open_conns, on_message)
                else:
                    worker = next(w for w, c in open_conns.items() if c is item)
                    self._receive(worker, open_conns, on_message)
            if time.monotonic() >= next_check:  # killed, but held in a FUSE request
                next_check = time.monotonic() + KILLED_CHECK_S
                for worker in ending_workers(by_sentinel, self.processes):
                    self._died(worker, open_conns, on_message)
                self._look_for_stopped(by_sentinel)
        return False

    def _look_for_stopped(self, by_sentinel: dict[Any, int]) -> None:
        """Fail the run for a worker stopped ``STOPPED_LIMIT_S`` (its state T): it would be
        waited for as long as it stays so, with no way out but a stop from outside."""
        now = time.monotonic()
        for worker in by_sentinel.values():
            pid = self.processes[worker].pid
            if not stopped(pid):
                self._stopped_since.pop(worker, None)
                continue
            since = self._stopped_since.setdefault(worker, now)
            if now - since >= STOPPED_LIMIT_S and not self.failed:
                self.failure = (
                    f"worker {worker} (pid {pid}) was stopped (SIGSTOP: a debugger, a freezer?) "
                    f"for {STOPPED_LIMIT_S:.0f} s: a load it holds up cannot be timed, so the "
                    "run was ended"
                )

    def note_deaths(self, on_message: Receiver) -> None:
        """The workers that died while the run waited to start fail it (no waiting)."""
        by_sentinel = {p.sentinel: w for w, p in enumerate(self.processes)}
        open_conns = dict(self.conns)
        exited = [by_sentinel.pop(item) for item in wait(list(by_sentinel), timeout=0)]
        for worker in exited + ending_workers(by_sentinel, self.processes):
            self._died(worker, open_conns, on_message)

    def name_death(
        self, oom_kills_at_start: int | None, cgroup_oom_kills: int | None = None
    ) -> None:
        """Say how the dead worker ended, once the workers are stopped: its signal, and
        whether the OOM killer sent it (``processes.death_description``: the run's cgroup's
        ``cgroup_oom_kills``, the kernel's record of the worker, the machine's count since
        ``oom_kills_at_start``)."""
        if self.dead is None or self.failure is not None:
            return
        process = self.processes[self.dead]
        description = death_description(
            exit_code(process), oom_kills_at_start, process.pid, cgroup_oom_kills
        )
        self.failure = f"worker {self.dead} (pid {process.pid}) {description}"

    def close(self) -> None:
        """Close the parent's ends: a worker still waiting for go, or blocked sending to the
        parent, sees its pipe end."""
        for conn in self.conns.values():
            conn.close()

    def _died(self, worker: int, open_conns: dict[int, Connection], on_message: Receiver) -> None:
        """Worker ``worker`` has exited (its sentinel), or is ending: what it sent before is
        kept, and the run fails unless it had finished."""
        while worker in open_conns and open_conns[worker].poll():
            self._receive(worker, open_conns, on_message)
        if worker not in self.done and not self.failed:
            self.dead = worker

    def _receive(
        self, worker: int, open_conns: dict[int, Connection], on_message: Receiver
    ) -> None:
        try:
            message = open_conns[worker].recv()
        except (EOFError, OSError):
            del open_conns[worker]
            return
        if isinstance(message, ReadBatch):
            self.reads.add(message)
        elif isinstance(message, WorkerReady):
            self.ready[worker] = message
        elif isinstance(message, WorkerDone):
            self.done[worker] = message
        elif isinstance(message, WorkerFailed):
            self.stopped[worker] = message
            if message.kind == "LoadCancelled" and self._cancel.is_set():
                pass  # asked for: no failure
            elif message.storage is not None:  # the storage's words, as opening would say them
                self.storage_error = message.storage
                self.failure = str(message.storage)
            else:
                self.failure = f"worker {worker} failed: {message.kind}: {message.message}"
        if on_message is not None:
            on_message(message)
