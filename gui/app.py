"""The application: QApplication set up for modelmon, the main window, the event loop."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
from types import TracebackType

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from modelmon import __version__
from modelmon.gui.collector import GuiThreadCollector
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


def show_unexpected_errors(window: MainWindow) -> None:
    """A bug in a slot becomes one line in the window (the traceback goes to stderr, for
    the bug report) instead of a silent half-updated window."""

    def hook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
        log.error("unexpected error", exc_info=(kind, error, trace))
        lines = str(error).strip().splitlines()
        text = f"{kind.__name__}: {lines[0]}" if lines else kind.__name__
        with contextlib.suppress(RuntimeError):  # the window is already gone
            window.messages.show_message(f"Internal error ({text}); details on stderr.", "error")

    sys.excepthook = hook


def run_app(path: str | None = None, demo: bool = False) -> int:
    """Open the window (on ``path``, or the demo model) and run until it closes; the exit code."""
    logging.basicConfig(level=logging.WARNING, format="modelmon: %(levelname)s: %(message)s")
    app = create_application()
    window = MainWindow()
    show_unexpected_errors(window)
    window.show()
    if path:
        window.open_path(path)
    elif demo:
        window.state.use_demo()
    # Ctrl+C in the terminal closes the window properly (stopping any load) instead of being
    # swallowed while Qt's event loop runs: a short timer lets Python see the signal.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    heartbeat = QTimer()
    heartbeat.start(200)
    heartbeat.timeout.connect(lambda: None)
    return app.exec()
