"""One background job at a time (a load, A/B × n, the ceilings, a recommendation, a watch),
its reports delivered in the state's thread as events. Qt-free.

The job (``modelmon.gui.state.jobs``) blocks, so it runs in a ``threading.Thread`` (the "job
thread"). It reports a handful of events per load (a run starts, a run ended, a progress
line, a ceiling, the job's end) in deliveries that cross to the state's thread through its
``Post`` and are handled there in one go: the last run's end and the job's end come
together, so the results and ``running`` change in the same step. The reads themselves
never come this way: the frame tick reads them from the running load's ``ReadLog``.

Posting never waits for the state's thread, so a slow repaint cannot stall the job thread
or the workers it measures.
"""

from __future__ import annotations

import logging
import threading

from modelmon.core.runs import stop_workers
from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.jobs import CeilingDone, Job, JobEnd, JobProgress, RunStart
from modelmon.gui.state.records import RunRecord

log = logging.getLogger(__name__)

CANCEL_WAIT_S = 8.0  # a load ends within ~1 s of cancel, a watched command within ~6 s
KILL_WAIT_S = 2.0


class JobRunner:
    """Runs one job at a time; its events are emitted in the state's thread."""

    def __init__(self, post: Post) -> None:
        self._post = post
        self.run_started = Event()  # RunStart: a load (or a watch) of the job begins
        self.run_finished = Event()  # RunRecord: it ended (its result or why it couldn't run)
        self.job_progress = Event()  # JobProgress: a line about a job without live loads
        self.ceiling = Event()  # Ceiling: one more ceiling measured
        self.job_finished = Event()  # JobEnd: the job is over; a new one may start
        self._job: Job | None = None
        self._thread: threading.Thread | None = None

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
            args=(lambda events: self._post(lambda: self._deliver(job, events)),),
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
        No event is emitted, and what the job still reports is dropped. True when no job
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
            stop_workers(grace_s=0.2)
            thread.join(KILL_WAIT_S)
        stopped = not thread.is_alive()
        self._job = self._thread = None
        return stopped

    def _deliver(self, job: Job, events: tuple[object, ...]) -> None:
        """One delivery, handled in one go in the state's thread."""
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
