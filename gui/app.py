"""The application: QApplication set up for modelmon, the main window, the event loop."""

from __future__ import annotations

import logging
import signal
import sys

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from modelmon import __version__
from modelmon.gui.main_window import MainWindow
from modelmon.gui.theme import apply_palette


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
    # Follow the desktop when the user switches between dark and light while we run.
    QGuiApplication.styleHints().colorSchemeChanged.connect(lambda _scheme: apply_palette(app))
    return app


def run_app(path: str | None = None) -> int:
    """Open the window (on ``path`` if given) and run until it closes; the exit code."""
    logging.basicConfig(level=logging.WARNING, format="modelmon: %(levelname)s: %(message)s")
    app = create_application()
    window = MainWindow()
    window.show()
    if path:
        window.open_path(path)
    # Ctrl+C in the terminal closes the window properly (stopping any load) instead of being
    # swallowed while Qt's event loop runs: a short timer lets Python see the signal.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    heartbeat = QTimer()
    heartbeat.start(200)
    heartbeat.timeout.connect(lambda: None)
    return app.exec()
