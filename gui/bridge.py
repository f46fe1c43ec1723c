"""LoadController: one measured load off the GUI thread, its records delivered to the GUI thread.

``LoadRun.run()`` blocks, so it runs in a ``threading.Thread`` (the "run thread"). Every record
it reports is written to a one-way pipe; a ``QSocketNotifier`` on the read end wakes the GUI
thread, which drains a bounded amount per wake into a ``LiveAccumulator``. A 40 ms timer turns
what is new into one ``tick`` per period, so the GUI repaints at a fixed rate whatever the
read rate is. The run's outcome travels through the same pipe after the last record, so
``finished`` always comes after every tick's data.

Nothing Qt crosses threads: the run thread only writes bytes to a pipe. The pipe buffer is
raised to 1 MiB so that a briefly busy GUI thread (a slow repaint) doesn't make the run thread
block in ``send`` and, through it, stall the workers being measured.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import multiprocessing
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from modelmon.core.errors import ModelmonError
from modelmon.core.options import LoadOptions
from modelmon.core.records import Model
from modelmon.core.result import LoadResult
from modelmon.core.runner import LoadRun, stop_processes
from modelmon.gui.live import LiveAccumulator, LiveUpdate

log = logging.getLogger(__name__)

TICK_MS = 40
DRAIN_MAX_MESSAGES = 200  # per wake; the notifier fires again at once if more is waiting
DRAIN_MAX_S = 0.005
PIPE_BYTES = 1 << 20
F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
CANCEL_WAIT_S = 5.0  # LoadRun ends within ~1 s of cancel(); past this we kill its workers
KILL_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class _Outcome:
    """The run thread's last message: the result, or why there is none (one line)."""

    result: LoadResult | None
    error: str | None


def one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _run_thread(run: LoadRun, writer: Connection) -> None:
    """Body of the run thread: run the load, then send the outcome and close the pipe."""
    try:
        outcome = _Outcome(run.run(), None)
    except ModelmonError as exc:  # LoadError (no RAM), ModelFormatError: expected, one line
        outcome = _Outcome(None, one_line(exc))
    except Exception as exc:  # a bug or an OS error: the window says it, the log has the trace
        log.exception("load failed")
        outcome = _Outcome(None, f"{type(exc).__name__}: {one_line(exc)}")
    try:
        writer.send(outcome)
    except (OSError, ValueError):  # the GUI closed its end: nobody is waiting
        pass
    finally:
        writer.close()


class _Forwarder:
    """``on_message`` of the run: each record into the pipe, until the reader goes away."""

    def __init__(self, writer: Connection) -> None:
        self.writer = writer
        self.broken = False

    def __call__(self, message: object) -> None:
        if self.broken:
            return
        try:
            self.writer.send(message)
        except (OSError, ValueError):
            self.broken = True


class LoadController(QObject):
    """Runs one load at a time. Signals arrive in the GUI thread."""

    tick = Signal(object)  # LiveUpdate, once per TICK_MS while a load runs, and a final one
    finished = Signal(object)  # LoadResult (status ok, cancelled or failed)
    failed = Signal(str)  # the load could not run at all: one line

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._run: LoadRun | None = None
        self._thread: threading.Thread | None = None
        self._reader: Connection | None = None
        self._notifier: QSocketNotifier | None = None
        self._live: LiveAccumulator | None = None
        self._timer = QTimer(self)
        self._timer.setInterval(TICK_MS)
        self._timer.timeout.connect(self._emit_tick)

    @property
    def running(self) -> bool:
        return self._thread is not None

    @property
    def live(self) -> LiveAccumulator | None:
        """The records of the current (or last) load: ready workers, failures, totals."""
        return self._live

    def start(self, model: Model, strategy: str, options: LoadOptions) -> bool:
        """Start a load; False (and ``failed`` soon after) if it cannot start."""
        if self.running:
            raise RuntimeError("a load is already running: cancel it first")
        reader, writer = multiprocessing.Pipe(duplex=False)
        if F_SETPIPE_SZ is not None:
            with contextlib.suppress(OSError):  # a smaller buffer only costs smoothness
                fcntl.fcntl(writer.fileno(), F_SETPIPE_SZ, PIPE_BYTES)
        forwarder = _Forwarder(writer)
        try:
            run = LoadRun(model, strategy, options, on_message=forwarder)
        except ModelmonError as exc:
            reader.close()
            writer.close()
            # Queued, like every other outcome: the caller finishes its own bookkeeping first.
            message = one_line(exc)
            QTimer.singleShot(0, lambda: self.failed.emit(message))
            return False
        self._run, self._reader = run, reader
        self._live = LiveAccumulator(model, options.workers)
        self._notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)
        self._thread = threading.Thread(target=_run_thread, args=(run, writer),
                                        name="modelmon-load", daemon=True)
        self._thread.start()
        self._timer.start()
        return True

    def cancel(self) -> None:
        """Ask the load to stop; ``finished`` follows with status "cancelled" within ~1 s."""
        if self._run is not None:
            self._run.cancel()

    def shutdown(self, timeout_s: float = CANCEL_WAIT_S) -> bool:
        """Stop any load now and wait for it: cancel → join → kill its workers → join.

        Blocks (up to ``timeout_s`` + KILL_WAIT_S); for closing the window, not for buttons.
        No signal is emitted. True when no run thread is left.
        """
        thread = self._thread
        if thread is None:
            return True
        self.cancel()
        self._timer.stop()
        if self._notifier is not None:
            self._notifier.setEnabled(False)
        if not self._join_draining(thread, timeout_s):
            # LoadRun's own join → terminate → kill didn't get to run (the thread is stuck):
            # stop the workers ourselves, so that run() sees them gone and returns.
            log.warning("load did not stop within %.1f s of cancel: killing its workers",
                        timeout_s)
            workers = [p for p in multiprocessing.active_children()
                       if p.name.startswith("modelmon-worker-")]
            stop_processes(workers, grace_s=0.2)
            self._join_draining(thread, KILL_WAIT_S)
        stopped = not thread.is_alive()
        self._release()
        return stopped

    def _join_draining(self, thread: threading.Thread, timeout_s: float) -> bool:
        """Join the run thread, discarding its records meanwhile so it never blocks on us."""
        deadline = time.monotonic() + timeout_s
        while thread.is_alive() and time.monotonic() < deadline:
            reader = self._reader
            with contextlib.suppress(EOFError, OSError):
                while reader is not None and reader.poll(0):
                    reader.recv()
            thread.join(0.02)
        return not thread.is_alive()

    def _drain(self) -> None:
        """Take what the pipe holds, at most DRAIN_MAX_MESSAGES or DRAIN_MAX_S per wake."""
        reader, live = self._reader, self._live
        if reader is None or live is None:
            return
        deadline = time.perf_counter() + DRAIN_MAX_S
        for _ in range(DRAIN_MAX_MESSAGES):
            try:
                if not reader.poll(0):
                    return
                message = reader.recv()
            except (EOFError, OSError):  # the run thread died without an outcome
                self._finish(_Outcome(None, "the load stopped without a result"))
                return
            if isinstance(message, _Outcome):
                self._finish(message)
                return
            live.add(message)
            if time.perf_counter() > deadline:
                return

    def _emit_tick(self, final: bool = False) -> None:
        if self._live is None or self._run is None:
            return
        update: LiveUpdate = self._live.take_update(self._run.t0_ns, time.perf_counter_ns(),
                                                    final=final)
        self.tick.emit(update)

    def _finish(self, outcome: _Outcome) -> None:
        self._timer.stop()
        if outcome.result is not None:
            self._emit_tick(final=True)
        if self._thread is not None:
            self._thread.join(KILL_WAIT_S)  # it only has to close its end of the pipe
        self._release()
        if outcome.result is not None:
            self.finished.emit(outcome.result)
        else:
            self.failed.emit(outcome.error or "the load failed")

    def _release(self) -> None:
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier.deleteLater()
        if self._reader is not None:
            self._reader.close()
        self._notifier = self._reader = self._thread = self._run = None
