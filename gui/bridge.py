"""LoadController: one background job at a time (a load, A/B × n, ceilings, a recommendation),
its events delivered to the GUI thread as signals.

The job (``modelmon.gui.state.jobs``) blocks, so it runs in a ``threading.Thread`` (the "job
thread"). It reports a handful of events per load (a run starts, a run ended, a progress
line, a ceiling, the job's end), in deliveries that cross to the GUI thread through one
queued signal and are handled there in one go: the last run's end and the job's end come
together, so the results table and ``running`` change in the same step. The reads
themselves never come this way: the window's frame tick reads them from the running load's
``ReadLog`` (``RunRouter``).

Posting a queued signal never waits for the GUI thread, so a slow repaint cannot stall the
job thread or the workers it measures.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import threading

from PySide6.QtCore import QObject, Qt, Signal

from modelmon.core import stop_processes
from modelmon.gui.state.jobs import CeilingDone, Job, JobEnd, JobProgress, RunStart
from modelmon.gui.state.records import RunRecord

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 5.0  # a LoadRun ends within ~1 s of cancel; past this we kill its workers
KILL_WAIT_S = 2.0


class LoadController(QObject):
    """Runs one job at a time. Signals arrive in the GUI thread."""

    run_started = Signal(object)  # RunStart: a load of the job begins
    run_finished = Signal(object)  # RunRecord: the load ended (its result or why it couldn't run)
    job_progress = Signal(object)  # JobProgress: a line about a job without live loads
    ceiling = Signal(object)  # Ceiling: one more ceiling measured
    job_finished = Signal(object)  # JobEnd: the job is over; a new one may start
    _delivered = Signal(object, object)  # (job, events): from the job thread, queued

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._job: Job | None = None
        self._thread: threading.Thread | None = None
        self._delivered.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def job(self) -> Job | None:
        """The job running now."""
        return self._job if self.running else None

    def start(self, job: Job) -> None:
        """Start ``job`` in the background; its outcome comes as ``job_finished``."""
        if self.running:
            raise RuntimeError("a job is already running: cancel it first")
        self._job = job
        self._thread = threading.Thread(
            target=job.run,
            args=(lambda events: self._send(job, events),),
            name=f"modelmon-{job.kind}",
            daemon=True,
        )
        self._thread.start()

    def cancel(self) -> None:
        """Ask the job to stop; a load ends (status "cancelled") within ~1 s."""
        if self._job is not None:
            self._job.cancel()

    def shutdown(self, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Stop any job now and wait for it: cancel → join → kill its workers → join.

        Blocks (up to ``timeout_s`` + KILL_WAIT_S); for closing the window, not for buttons.
        No signal is emitted, and what the job still reports is dropped. True when no job
        thread is left.
        """
        thread = self._thread
        if thread is None:
            return True
        self.cancel()
        thread.join(timeout_s)
        if thread.is_alive():
            # The LoadRun's own join → terminate → kill didn't get to run (the thread is
            # stuck): stop the workers ourselves, so that run() sees them gone and returns.
            log.warning("job did not stop within %.1f s of cancel: killing its workers", timeout_s)
            workers = [
                p
                for p in multiprocessing.active_children()
                if p.name.startswith("modelmon-worker-")
            ]
            stop_processes(workers, grace_s=0.2)
            thread.join(KILL_WAIT_S)
        stopped = not thread.is_alive()
        self._job = self._thread = None
        return stopped

    def _send(self, job: Job, events: tuple[object, ...]) -> None:
        """The job thread's side: post one delivery to the GUI thread (never waits)."""
        with contextlib.suppress(RuntimeError):  # the window (and this object) went away
            self._delivered.emit(job, events)

    def _deliver(self, job: Job, events: tuple[object, ...]) -> None:
        """One delivery, handled in one go in the GUI thread."""
        if job is not self._job:
            return  # a job shut down: nobody looks at its reports
        for event in events:
            if isinstance(event, RunStart):
                self.run_started.emit(event)
            elif isinstance(event, RunRecord):
                self.run_finished.emit(event)
            elif isinstance(event, JobProgress):
                self.job_progress.emit(event)
            elif isinstance(event, CeilingDone):
                self.ceiling.emit(event.ceiling)
            elif isinstance(event, JobEnd):
                if self._thread is not None:
                    self._thread.join(KILL_WAIT_S)  # its last act was to report this
                self._job = self._thread = None
                self.job_finished.emit(event)
