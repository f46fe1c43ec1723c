"""Every end of the app nobody asked for leaves a line on stderr and a record in the crash log
(``$XDG_STATE_HOME/modelmon/crash.log``): an unhandled exception in the GUI thread or another,
a fatal Qt message, a hard crash, a stop signal, a window killed outright (said at the next
start). Each app runs in a child process (offscreen), its state folder in tmp_path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelmon.gui.crash_log import LOG_NAME, SESSIONS, CrashLog, scrub

SECRET = "s3cr3t-value-never-written-71"
# An app that opens its crash log, then does what argv[1] says.
_APP = """
import faulthandler, os, sys, threading
from PySide6.QtCore import QTimer, qFatal
from PySide6.QtWidgets import QApplication
from modelmon.gui.crash_log import CrashLog

app = QApplication([])
crash = CrashLog()
crash.install()
what = sys.argv[1]

def slot():
    if what == "slot":
        raise ValueError(f"a bug in a slot near https://user:{os.environ['MY_SECRET']}@host/x")
    if what == "thread":
        thread = threading.Thread(target=lambda: 1 / 0, name="the-worker")
        thread.start()
        thread.join()
    if what == "qt":
        qFatal("Qt gave up: no such thing")
    if what == "segfault":
        faulthandler._sigsegv()
    if what == "kill":
        os.kill(os.getpid(), 9)
    if what == "display":  # as Qt's xcb plugin does when its X connection goes: it says
        from PySide6.QtCore import qWarning  # so, and its event loop ends

        qWarning("The X11 connection broke (error 1). Did the X11 server die?")

QTimer.singleShot(0, slot)
QTimer.singleShot(0, app.quit)  # after the slot, however it ended
app.exec()
crash.uninstall()
"""


def run_app(tmp_path: Path, what: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "QT_QPA_PLATFORM": "offscreen",
        "MY_SECRET": SECRET,
    }
    return subprocess.run(
        [sys.executable, "-c", _APP, what], env=env, capture_output=True, text=True, timeout=60
    )


def crash_log(tmp_path: Path) -> str:
    path = tmp_path / "state" / "modelmon" / LOG_NAME
    return path.read_text() if path.exists() else ""


def test_an_exception_in_a_slot_is_recorded_without_a_secret(tmp_path: Path):
    done = run_app(tmp_path, "slot")
    assert done.returncode == 0, done.stderr
    log = crash_log(tmp_path)
    assert "unhandled ValueError in the GUI thread" in log and "Traceback" in log, log
    assert "a bug in a slot" in done.stderr and LOG_NAME in done.stderr
    assert SECRET not in log + done.stderr
    assert not list((tmp_path / "state" / "modelmon" / SESSIONS).iterdir())  # closed: no mark


def test_an_exception_in_another_thread_is_recorded(tmp_path: Path):
    done = run_app(tmp_path, "thread")
    assert done.returncode == 0, done.stderr
    log = crash_log(tmp_path)
    assert "unhandled ZeroDivisionError in thread the-worker" in log, log
    assert "the-worker" in done.stderr and LOG_NAME in done.stderr


def test_a_fatal_qt_message_is_recorded_with_the_stacks(tmp_path: Path):
    done = run_app(tmp_path, "qt")
    assert done.returncode == -signal.SIGABRT, (done.returncode, done.stderr)
    log = crash_log(tmp_path)
    # PySide6 hands Qt its own words for a qFatal from Python; Qt's own are recorded as Qt
    # gives them.
    assert "fatal Qt message\n[A qFatal() call was made from Python code]" in log, log
    assert "Fatal Python error: Aborted" in log and "in slot" in log  # faulthandler's stacks
    assert "fatal Qt error" in done.stderr and LOG_NAME in done.stderr


def next_start_says(tmp_path: Path) -> list[str]:
    """What the next window's crash log finds that earlier windows left unsaid."""
    later = CrashLog(tmp_path / "state" / "modelmon")
    try:
        return later.install()
    finally:
        later.uninstall()


def test_a_hard_crash_leaves_its_stacks_and_the_next_start_says_so(tmp_path: Path):
    done = run_app(tmp_path, "segfault")
    assert done.returncode == -signal.SIGSEGV
    log = crash_log(tmp_path)
    assert "Fatal Python error: Segmentation fault" in log and "in slot" in log, log
    (line,) = next_start_says(tmp_path)
    assert "ended without closing (killed or crashed)" in line and LOG_NAME in line
    assert "ended without closing" in crash_log(tmp_path)


def test_a_window_killed_outright_is_said_at_the_next_start(tmp_path: Path):
    assert run_app(tmp_path, "kill").returncode == -signal.SIGKILL
    assert crash_log(tmp_path) == ""  # nothing could be written as it died
    later = CrashLog(tmp_path / "state" / "modelmon")
    try:
        found = later.install()
        again = CrashLog(tmp_path / "state" / "modelmon")  # a second window, while it runs
        assert again.install() == []  # the first's mark is of a live window: not an end
        again.uninstall()
    finally:
        later.uninstall()
    assert len(found) == 1 and "killed or crashed" in found[0]


def test_a_window_whose_display_went_says_so_and_the_next_start_says_why(tmp_path: Path):
    """``xkill`` on the window, or its X server ended: Qt says the connection broke and exits
    at once. The app says so on stderr and in the log, and the next start gives that cause."""
    done = run_app(tmp_path, "display")
    assert "the window ended: its display connection broke" in done.stderr, done.stderr
    # Qt's words are in modelmon's line: its own line does not follow it.
    assert done.stderr.count("The X11 connection broke") == 1, done.stderr
    log = crash_log(tmp_path)
    assert "its display connection broke" in log and "The X11 connection broke" in log, log
    (line,) = next_start_says(tmp_path)
    assert "ended without closing (its display connection broke)" in line, line


def catches_sigterm(pid: int) -> bool:
    """The process has a handler for SIGTERM (the app's stop signals are in place)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)


def test_a_stop_signal_closes_the_app_and_says_which(tmp_path: Path):
    """The real entry point (``modelmon gui``): SIGTERM closes it as its close button does,
    exits 143 and says so on stderr and in the log."""
    state = tmp_path / "state"
    env = {
        **os.environ,
        "XDG_STATE_HOME": str(state),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "HOME": str(tmp_path),
        "QT_QPA_PLATFORM": "offscreen",
    }
    app = subprocess.Popen(
        [sys.executable, "-m", "modelmon", "gui"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        marks = state / "modelmon" / SESSIONS
        deadline = time.monotonic() + 60
        while not (catches_sigterm(app.pid) and marks.is_dir() and any(marks.iterdir())):
            assert app.poll() is None and time.monotonic() < deadline, app.stderr
            time.sleep(0.05)
        app.send_signal(signal.SIGTERM)
        _, errors = app.communicate(timeout=60)
    finally:
        if app.poll() is None:
            app.kill()
            app.communicate()
    assert app.returncode == 128 + signal.SIGTERM, errors
    assert "closed by SIGTERM" in errors and LOG_NAME in errors
    assert "closed by SIGTERM" in crash_log(tmp_path)
    assert not any(marks.iterdir())


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"GET https://ada:{SECRET}@bucket.example/models failed", "bucket.example/models failed"),
        (f"AWS_SECRET_ACCESS_KEY was {SECRET}", "AWS_SECRET_ACCESS_KEY was"),
    ],
)
def test_no_secret_reaches_the_log(text: str, kept: str):
    cleaned = scrub(text, {"AWS_SECRET_ACCESS_KEY": SECRET, "HOME": "/home/ada"})
    assert SECRET not in cleaned and kept in cleaned, cleaned


def test_the_next_window_says_so_also_when_it_opens_a_file(qtbot, window, small_model: Path):
    """The eighth walk: ``./dev app FILE`` after a window was killed showed no notice, for
    opening the file cleared the message bar after the notice was shown."""
    from modelmon.gui.app import start_window

    notice = "The modelmon window started 2026-11-27 21:24:02 ended without closing (killed)"
    start_window(window, str(small_model), False, [notice])
    qtbot.waitUntil(lambda: window.bench.info is not None, timeout=10_000)
    assert window.messages.message() == notice  # the open, done, left it in sight
