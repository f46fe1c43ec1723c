"""Reading one thing (CPU times, memory, IO counters) from each worker process, cheaply.

On Linux the one /proc/<pid>/ file that holds it is opened once per worker and re-read in
place each sample (``procfs.ProcFile``); elsewhere a ``psutil.Process`` is kept per worker
(making one reads the process's start time). Both are made again only when that worker's pid
changes. A worker that has
exited (NoSuchProcess, or ZombieProcess: exited, not yet reaped by the runner) is not asked
again: its later samples are gaps, and sources keep its last counters for their totals.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Generic, TypeVar

import psutil

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import (
    FAILURES_TO_REPORT,
    FailureLog,
    MonitorTarget,
    Source,
)

Reading = TypeVar("Reading")


class Gap(enum.Enum):
    """Why a worker has no reading this sample."""

    EXITED = "exited"  # gone or a zombie: it uses nothing now, its counters are final
    FAILED = "failed"  # denied, an OS error, a field this OS lacks: unknown


ProcReading = tuple[str, Callable[[bytes], Reading]]  # /proc/<pid>/ file name, its parser


class WorkerProbe(Generic[Reading]):
    """A reading of every started worker (ids 0..workers-1), failures counted: ``proc`` (a
    /proc/<pid>/ file and its parser) where Linux's /proc is, else ``read`` via psutil."""

    def __init__(
        self,
        target: MonitorTarget,
        what: str,
        read: Callable[[psutil.Process], Reading],
        proc: ProcReading[Reading] | None = None,
    ) -> None:
        self._target = target
        self._read = read
        self._proc = proc if proc is not None and procfs.have_procfs() else None
        self._processes: dict[int, psutil.Process] = {}  # worker -> process of its current pid
        self._files: dict[int, tuple[int, procfs.ProcFile]] = {}  # worker -> (pid, its file)
        self._exited: set[tuple[int, int]] = set()  # (worker, pid)
        self._what = what
        # Per worker: one worker always denied while the others work still empties its
        # series and every total, so it is worth naming.
        self._logs: dict[int, FailureLog] = {}
        self.pids: dict[int, int] = {}  # worker -> pid, as of the last read

    def read(self) -> dict[int, Reading | Gap]:
        """Worker id -> its reading, or why there is none; only workers started so far."""
        readings: dict[int, Reading | Gap] = {}
        self.pids = {
            worker: pid
            for worker, pid in sorted(self._target.pids().items())
            if 0 <= worker < self._target.workers
        }  # others have no series
        for worker, pid in self.pids.items():
            if (worker, pid) in self._exited:
                readings[worker] = Gap.EXITED
                continue
            try:
                readings[worker] = self._read_one(worker, pid)
                self._log(worker).ok()
            except (psutil.NoSuchProcess, ProcessLookupError, FileNotFoundError):
                # NoSuchProcess: ZombieProcess too. ESRCH or ENOENT from /proc: reaped.
                self._exited.add((worker, pid))
                self._processes.pop(worker, None)
                self._drop_file(worker)
                readings[worker] = Gap.EXITED
            except Exception as error:  # AccessDenied, OSError, a field missing on this OS
                self._log(worker).failed(error)
                readings[worker] = Gap.FAILED
        return readings

    def _read_one(self, worker: int, pid: int) -> Reading:
        if self._proc is not None:
            name, parse = self._proc
            kept = self._files.get(worker)
            if kept is None or kept[0] != pid:
                self._drop_file(worker)
                kept = self._files[worker] = (pid, procfs.ProcFile(f"/proc/{pid}/{name}", 1024))
            return parse(kept[1].read())
        process = self._processes.get(worker)
        if process is None or process.pid != pid:
            process = self._processes[worker] = psutil.Process(pid)
        return self._read(process)

    def _drop_file(self, worker: int) -> None:
        kept = self._files.pop(worker, None)
        if kept is not None:
            kept[1].close()

    def close(self) -> None:
        """Close the workers' /proc files."""
        for worker in list(self._files):
            self._drop_file(worker)

    def _log(self, worker: int) -> FailureLog:
        log = self._logs.get(worker)
        if log is None:
            log = self._logs[worker] = FailureLog(self._what)
        return log

    def failing(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        """Why, when some worker's reading has failed on every attempt so far."""
        failed = {worker: log for worker, log in sorted(self._logs.items()) if log.reason(at_least)}
        if not failed:
            return None
        error = next(iter(failed.values())).last_error
        if len(failed) == len(self._logs):
            return f"{self._what} failed on every sample ({error})"
        which = ", ".join(str(worker) for worker in failed)
        plural = "s" if len(failed) > 1 else ""
        return f"{self._what} of worker{plural} {which} failed on every sample ({error})"


class SystemAndWorkersSource(Source, Generic[Reading]):
    """A source that reads a system figure and the same figure from every worker (CPU times,
    memory): one failure log for the system reading, one probe for the workers."""

    def __init__(
        self,
        target: MonitorTarget,
        system_what: str,
        workers_what: str,
        read_worker: Callable[[psutil.Process], Reading],
        proc_worker: ProcReading[Reading] | None = None,
    ) -> None:
        super().__init__(target)
        self._system_log = FailureLog(system_what)
        self._workers = WorkerProbe(target, workers_what, read_worker, proc_worker)

    def failing(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        reasons = [
            reason
            for reason in (self._system_log.reason(at_least), self._workers.failing(at_least))
            if reason
        ]
        return "; ".join(reasons) or None

    def close(self) -> None:
        self._workers.close()


def worker_ids(target: MonitorTarget) -> range:
    return range(max(0, target.workers))
