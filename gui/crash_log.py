"""Where an end of the app nobody asked for is written down: the crash log,
``$XDG_STATE_HOME/modelmon/crash.log`` (``~/.local/state/modelmon/crash.log``).

Each of these leaves a record there and one line on stderr naming the log:

- an unhandled Python exception, in the GUI thread (also a line in the window) or any other;
- a fatal Qt message (Qt aborts right after it);
- a hard crash (a segfault, an abort, in any thread): ``faulthandler`` writes every
  thread's Python stack into the log, as the process dies;
- a stop signal (SIGTERM, SIGHUP, Ctrl+C): the window closed as its close button closes it,
  and the record says which signal did;
- a window whose display went (killed outright with ``xkill``, or its X server or Wayland
  compositor ended): Qt says its connection broke and exits at once, so that message is
  recorded, and its session's mark keeps the cause for the next start;
- a window that ended without closing (killed by SIGKILL or the OOM killer, a crash that
  left no record): each window marks its session in ``sessions/`` and removes the mark
  when it closes; the next start finds a mark left by a process that is gone, records it
  and says so in the window.

Records are tracebacks and Qt's words, with anything that looks like a credential (the
values of the environment's secrets, a URL's ``user:password@``) replaced: no secret in any
output. The log keeps its last MAX_LOG_BYTES; the one before is kept as ``crash.log.1``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from modelmon import __version__
from modelmon.core.system import state_home

LOG_NAME = "crash.log"
MAX_LOG_BYTES = 1 << 20
SESSIONS = "sessions"
# Environment variables whose values are never written: a credential's.
SECRET_NAME = re.compile(r"(?i)secret|token|password|passwd|credential|api_?key|private")
URL_USER = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
BOOT_ID = "/proc/sys/kernel/random/boot_id"
# Qt's words as the display goes; it exits right after them, with no Python code run.
DISPLAY_BROKE = re.compile(r"(X11|Wayland) connection broke")

Say = Callable[[str], None]  # a line for the window (from the GUI thread)


def state_folder(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    """``$XDG_STATE_HOME/modelmon``, else ``~/.local/state/modelmon`` (``state_home``)."""
    return state_home(environ)


def crash_log_path(environ: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    return state_folder(environ) / LOG_NAME


def scrub(text: str, environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """``text`` without a credential: the environment's secret values and a URL's
    ``user:password@`` are replaced."""
    text = URL_USER.sub(r"\1…@", text)
    for name, value in environ.items():
        if SECRET_NAME.search(name) and len(value) >= 4 and value in text:
            text = text.replace(value, f"[{name}]")
    return text


def _boot_id() -> str:
    try:
        with open(BOOT_ID) as boot:
            return boot.read().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot): a pid given to another process since
    has another. "" when no such process runs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        return data[data.rindex(b")") + 2 :].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return ""


class CrashLog:
    """The crash log of this process: ``install`` starts recording, ``uninstall`` (the
    window closed) stops, removing this session's mark."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder if folder is not None else state_folder()
        self.path = self.folder / LOG_NAME
        self.file: IO[str] | None = None
        self.say: Say | None = None  # the window's message bar, once there is one
        self.mark: Path | None = None
        self._saved: dict[str, Any] = {}
        self._faults_before = False  # faulthandler was on (on stderr) before ``install``
        self._lock = threading.Lock()
        self.display_broke = False  # Qt said the display connection broke

    # --- recording ----------------------------------------------------------------------------

    def open(self) -> None:
        """Open the log for appending (0600, in a folder of this user's; never a link)."""
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            if self.path.stat().st_size > MAX_LOG_BYTES:
                os.replace(self.path, self.path.with_name(LOG_NAME + ".1"))
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        self.file = os.fdopen(os.open(self.path, flags, 0o600), "a", encoding="utf-8")

    def record(self, title: str, details: str = "") -> None:
        """One record: when, which modelmon and process, ``title``, then ``details``."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        head = f"=== {stamp} modelmon {__version__} pid {os.getpid()}: {title}\n"
        text = scrub(head + (details.rstrip("\n") + "\n" if details else ""))
        with self._lock:
            target = self.file if self.file is not None else sys.stderr  # no log: said there
            with contextlib.suppress(OSError, ValueError, AttributeError):
                target.write(text)
                target.flush()

    def line(self, text: str) -> None:
        """One line on stderr (a terminal, a journal): what happened and where the log is."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write(scrub(f"modelmon: {text}") + "\n")
            sys.stderr.flush()

    # --- the hooks ----------------------------------------------------------------------------

    def install(self) -> list[str]:
        """Record from now on; what earlier windows left unsaid (their lines for the window).
        A log that cannot be opened is said on stderr, and the hooks write there alone."""
        try:
            self.open()
        except OSError as exc:
            self.line(f"no crash log at {self.path}: {exc.strerror or exc}")
        self._faults_before = faulthandler.is_enabled()
        faulthandler.enable(self.file or sys.__stderr__, all_threads=True)
        self._saved = {
            "excepthook": sys.excepthook,
            "threading": threading.excepthook,
            "qt": _install_qt_handler(self._qt_message),
        }
        sys.excepthook = self._excepthook
        threading.excepthook = self._thread_excepthook
        if self.file is None:
            return []
        found = self._earlier_sessions()
        self._mark_session()
        return found

    def uninstall(self) -> None:
        """Stop recording (the window closed): this session ended as it should, unless its
        display went (its mark stays, with the cause, for the next start to say)."""
        if self.mark is not None and not self.display_broke:
            with contextlib.suppress(OSError):
                self.mark.unlink()
            self.mark = None
        if self._saved:
            sys.excepthook = self._saved["excepthook"]
            threading.excepthook = self._saved["threading"]
            _restore_qt_handler(self._saved["qt"])
            self._saved = {}
        faulthandler.disable()
        if self._faults_before and sys.__stderr__ is not None:
            faulthandler.enable(sys.__stderr__, all_threads=True)
        with self._lock:
            if self.file is not None:
                with contextlib.suppress(OSError):
                    self.file.close()
                self.file = None

    def _excepthook(
        self, kind: type[BaseException], error: BaseException, trace: TracebackType | None
    ) -> None:
        words = _words(kind, error)
        self.record(
            f"unhandled {kind.__name__} in the GUI thread",
            "".join(traceback.format_exception(kind, error, trace)),
        )
        self.line(f"internal error ({words}); details in {self.path}")
        if self.say is not None:
            with contextlib.suppress(RuntimeError):  # the window is already gone
                self.say(f"Internal error ({words}); details in {self.path}")

    def _thread_excepthook(self, args: threading.ExceptHookArgs) -> None:
        kind, error = args.exc_type, args.exc_value
        name = args.thread.name if args.thread is not None else "a thread"
        self.record(
            f"unhandled {kind.__name__} in thread {name}",
            "".join(traceback.format_exception(kind, error, args.exc_traceback)),
        )
        words = _words(kind, error) if error is not None else kind.__name__
        self.line(f"internal error in thread {name} ({words}); details in {self.path}")

    def _qt_message(self, fatal: bool, text: str) -> bool:
        """Record a Qt message that ends the window; True where modelmon's own line said it
        (Qt's words in it), so that Qt's line is not said again after."""
        first = text.splitlines()[0] if text else ""
        if fatal:  # Qt aborts next: faulthandler then writes the stacks after this
            self.record("fatal Qt message", text)
            self.line(f"fatal Qt error ({first}); see {self.path}")
            return True
        if DISPLAY_BROKE.search(text):  # Qt exits next
            cause = "its display connection broke"
            self.record(f"the window ended: {cause}", text)
            self.line(f"the window ended: {cause} ({first}); recorded in {self.path}")
            self.display_broke = True
            if self.mark is not None:  # the next start says why, not "killed or crashed"
                with contextlib.suppress(OSError), open(self.mark, "a") as mark:
                    mark.write(f"{cause}\n")
            return True
        return False

    # --- sessions -----------------------------------------------------------------------------

    def _mark_session(self) -> None:
        folder = self.folder / SESSIONS
        folder.mkdir(exist_ok=True, mode=0o700)
        pid = os.getpid()
        mark = folder / str(pid)
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        with contextlib.suppress(OSError):
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(mark, flags, 0o600), "w") as out:
                out.write(f"{_boot_id()} {_start_ticks(pid)} {started}\n")
            self.mark = mark

    def _earlier_sessions(self) -> list[str]:
        """Windows that ended without closing (their mark left, their process gone): each
        recorded, and a line for this window."""
        folder = self.folder / SESSIONS
        try:
            marks = sorted(folder.iterdir())
        except OSError:
            return []
        boot, lines = _boot_id(), []
        for mark in marks:
            try:
                first, _, said = mark.read_text().partition("\n")
                boot_then, ticks, started = first.split(" ", 2)
                pid = int(mark.name)
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    mark.unlink()
                continue
            if boot_then == boot and ticks and _start_ticks(pid) == ticks:
                continue  # another window, still open
            cause = said.strip() or "killed or crashed"
            if boot_then != boot:
                cause = "the machine restarted"
            started = started.strip()
            self.record(
                f"the window of pid {pid} (started {started}) ended without closing ({cause})"
            )
            lines.append(
                f"The modelmon window started {started} ended without closing ({cause}); "
                f"what was recorded is in {self.path}"
            )
            with contextlib.suppress(OSError):
                mark.unlink()
        return lines


def _words(kind: type[BaseException], error: BaseException | None) -> str:
    lines = str(error).strip().splitlines() if error is not None else []
    return f"{kind.__name__}: {lines[0]}" if lines else kind.__name__


def _install_qt_handler(on_message: Callable[[bool, str], bool]) -> object:
    """Hear Qt's messages: each still goes where it went (stderr, or the handler before),
    but one that ``on_message`` recorded and said in its own line (Qt's words in it). The
    handler before, to put back."""
    from PySide6.QtCore import QtMsgType, qFormatLogMessage, qInstallMessageHandler

    previous: Any = None

    def handler(mode: QtMsgType, context: Any, message: str) -> None:
        if on_message(mode == QtMsgType.QtFatalMsg, message):
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.write(qFormatLogMessage(mode, context, message) + "\n")

    previous = qInstallMessageHandler(handler)
    return previous


def _restore_qt_handler(previous: object) -> None:
    from PySide6.QtCore import qInstallMessageHandler

    qInstallMessageHandler(previous)  # type: ignore[arg-type]
