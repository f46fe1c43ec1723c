"""Regenerate the screenshots in this folder from the real app (``run_app``, as ``modelmon`` runs).

    xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python docs/screenshots/make_screenshots.py

Clicks "Use demo model", runs configuration A then B with their defaults, and saves
first-window-sequential.png (after A) and first-window.png (after B). ``--dark`` forces the
dark palette and saves first-window-dark.png instead. Timings are whatever this machine does.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 300


def main() -> int:
    # Qt is imported here, not at the top: spawned workers re-run this script's top level.
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from modelmon.gui import app as app_module
    from modelmon.gui.main_window import MainWindow
    from modelmon.gui.theme import _dark_palette

    dark = "--dark" in sys.argv
    application = app_module.create_application()  # run_app reuses it; timers need it
    if dark:
        application.setPalette(_dark_palette())
    queue, started = ["A", "B"], time.monotonic()

    def window() -> MainWindow:
        return next(w for w in QApplication.topLevelWidgets() if isinstance(w, MainWindow))

    def step() -> None:
        workspace = window().workspace
        if time.monotonic() - started > TIMEOUT_S:
            print("timed out", file=sys.stderr)
            window().close()
        elif workspace.info is None or workspace.running:
            QTimer.singleShot(100, step)
        elif queue:
            label = queue.pop(0)
            if label == "B" and not dark:
                window().grab().save(str(HERE / "first-window-sequential.png"))
            workspace.panels[label].run_button.click()
            QTimer.singleShot(300, step)
        else:
            QTimer.singleShot(500, finish)

    def finish() -> None:
        name = "first-window-dark.png" if dark else "first-window.png"
        window().grab().save(str(HERE / name))
        for record in window().workspace.results.results.records:
            print(record.label, record.spec, record.status, record.message or "")
        window().close()

    def begin() -> None:
        window().start_page.demo_button.click()
        QTimer.singleShot(100, step)

    QTimer.singleShot(500, begin)
    return app_module.run_app(None)


if __name__ == "__main__":
    sys.exit(main())
