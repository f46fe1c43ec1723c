"""The application: QApplication set up for modelmon, the main window, the event loop."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from types import TracebackType

from PySide6.QtCore import QObject, QSocketNotifier
from PySide6.QtWidgets import QApplication

from modelmon import __version__
from modelmon.gui.collector import GuiThreadCollector
from modelmon.gui.crash_log import CrashLog
from modelmon.gui.main_window import MainWindow
from modelmon.gui.theme import apply_palette

log = logging.getLogger("modelmon.gui")


def create_application(argv: list[str] | None = None) -> QApplication:
    """The QApplication (made once): name "modelmon", Fusion style, the platform's scheme."""
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        app = existing
    else:
        app = QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("modelmon")
    app.setOrganizationName("modelmon")
    app.setApplicationVersion(__version__)
    app.setDesktopFileName("modelmon")
    apply_palette(app)
    if app.findChild(GuiThreadCollector) is None:  # garbage with Qt objects: freed here only
        GuiThreadCollector(app)
    return app


def show_unexpected_errors(window: MainWindow, crash: CrashLog | None = None) -> None:
    """A bug in a slot becomes one line in the window (the traceback goes to the crash log,
    or stderr without one, for the bug report) instead of a silent half-updated window."""
    if crash is not None:  # its hook records, says it on stderr, then in the window
        crash.say = lambda text: window.messages.show_message(text, "error")
        return

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        log.error("unexpected error", exc_info=(kind, error, trace))
        lines = str(error).strip().splitlines()
        text = f"{kind.__name__}: {lines[0]}" if lines else kind.__name__
        with contextlib.suppress(RuntimeError):  # the window is already gone
            window.messages.show_message(f"Internal error ({text}); details on stderr.", "error")

    sys.excepthook = hook


# Each closes the window the way its close button does, then the app exits: 0 for Ctrl+C in
# the terminal (the user's own way to quit), 128 + the signal's number for SIGTERM (a session
# ending, a service manager) and SIGHUP (the terminal gone), as a shell reports them.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopSignals(QObject):
    """Ctrl+C, SIGTERM and SIGHUP stop the app cleanly: the window closes as its close button
    closes it (the running load stopped, its workers ended, the device's readahead put back),
    then the event loop ends. Nothing is done in the signal handler itself, which only has to
    exist: Python's own C-level handler writes the signal's number to a wake-up socket
    (``signal.set_wakeup_fd``), whose notifier wakes Qt's event loop, and the window is closed
    there, in the GUI thread, between events. ``stop()`` puts everything back."""

    def __init__(self, app: QApplication, window: MainWindow) -> None:
        super().__init__(app)
        self.app = app
        self.window = window
        self.received: list[int] = []
        self._wake, self._woken = socket.socketpair()
        for end in (self._wake, self._woken):
            end.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._wake.fileno(), warn_on_full_buffer=False)
        self._previous = {number: signal.signal(number, _noted) for number in STOP_SIGNALS}
        self._notifier = QSocketNotifier(self._woken.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._on_wake)

    def _on_wake(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while data := self._woken.recv(64):  # one byte per signal: its number
                self.received += [number for number in data if number in STOP_SIGNALS]
        if not self.received:
            return
        first = self.received[0]
        self.window.close()  # stops the load and waits for its workers (closeEvent)
        self.app.exit(0 if first == signal.SIGINT else 128 + first)

    def stop(self) -> None:
        self._notifier.setEnabled(False)
        signal.set_wakeup_fd(self._previous_fd)
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._wake.close()
        self._woken.close()


def _noted(_number: int, _frame: object) -> None:
    """The stop signals' Python handler: their number reaches ``StopSignals`` by the wake-up
    socket; this only keeps Python from ending the process (SIGTERM's default)."""


def start_window(window: MainWindow, path: str | None, demo: bool, earlier: list[str]) -> None:
    """Open ``path`` (or the demo), then say what earlier windows left unsaid: after the
    open, which clears the message bar, so that the notice stays in sight."""
    if path:
        window.open_path(path)
    elif demo:
        window.state.use_demo()
    if earlier:  # every one is in the log; the window says the latest
        more = f" ({len(earlier) - 1} more in the log)" if len(earlier) > 1 else ""
        window.messages.show_message(earlier[-1] + more, "warning")


def run_app(path: str | None = None, demo: bool = False) -> int:
    """Open the window (on ``path``, or the demo model) and run until it closes; the exit code."""
    logging.basicConfig(level=logging.WARNING, format="modelmon: %(levelname)s: %(message)s")
    crash = CrashLog()
    earlier = crash.install()  # from here on, any end nobody asked for leaves a record
    try:
        app = create_application()
        window = MainWindow()
        show_unexpected_errors(window, crash)
        window.show()
        start_window(window, path, demo, earlier)
        signals = StopSignals(app, window)
        try:
            return app.exec()
        finally:
            signals.stop()
            if signals.received:
                name = signal.Signals(signals.received[0]).name
                crash.record(f"closed by {name}: the window closed as its close button does")
                crash.line(f"closed by {name} (recorded in {crash.path})")
    finally:
        crash.uninstall()
