"""BackgroundTask: run one slow, Qt-free call (open a model, write the demo) off the GUI thread.

A plain ``threading.Thread`` rather than QThreadPool: the pool keeps idle threads alive for
30 s, which would look like leaked threads, and nothing here needs Qt in the thread. The
result comes back through a signal, which Qt queues into the GUI thread.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal

from modelmon.core import ModelmonError, one_line

log = logging.getLogger(__name__)


class BackgroundTask(QObject):
    """``work()`` in a thread; ``succeeded(result)`` or ``failed(one line)`` in the GUI thread."""

    succeeded = Signal(object)
    failed = Signal(str)
    _done = Signal(object, object)  # (result, error): emitted from the thread, queued

    def __init__(self, work: Callable[[], Any], name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._work = work
        self._thread = threading.Thread(target=self._body, name=f"modelmon-{name}", daemon=True)
        self._done.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def start(self) -> None:
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout_s: float) -> bool:
        """Join the thread; True when it has ended."""
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _body(self) -> None:
        try:
            result, error = self._work(), None
        except ModelmonError as exc:
            result, error = None, one_line(exc)
        except OSError as exc:  # permission, missing file, full disk: say which, plainly
            result, error = (
                None,
                f"{exc.filename + ': ' if exc.filename else ''}" + (exc.strerror or one_line(exc)),
            )
        except Exception as exc:
            log.exception("background task failed")
            result, error = None, f"{type(exc).__name__}: {one_line(exc)}"
        with contextlib.suppress(RuntimeError):  # the window (and this object) went away
            self._done.emit(result, error)

    def _deliver(self, result: object, error: object) -> None:
        if error is None:
            self.succeeded.emit(result)
        else:
            self.failed.emit(str(error))
