"""A watched command's standard output and error through pipes, passed on unchanged, each
line searched for the ready expression (``--ready-line``)."""

from __future__ import annotations

import contextlib
import os
import re
import select
import threading
from collections.abc import Callable

from modelmon.core.loading.reads import now_ns

MAX_LINE = 1 << 20  # bytes of one output line kept for matching: a longer one is matched cut
TAP_POLL_S = 0.1  # the tap's wait, between looks at its stop flag


class OutputTap:
    """The command's standard output and error through pipes: each line is passed on to where
    it would have gone, and the first that matches ``pattern`` is reported with the time it
    was read. The thread ends at both pipes' end or at ``stop``."""

    def __init__(
        self,
        pattern: str,
        on_match: Callable[[int, str], None],
        stdout: int | None,
        stderr: int | None,
    ) -> None:
        self._pattern = re.compile(pattern)
        self._on_match = on_match
        self._matched = False
        out_read, self.stdout = os.pipe()
        err_read, self.stderr = os.pipe()
        # Where each stream would have gone: the descriptors given, else this process's own.
        self._sinks = {
            out_read: 1 if stdout is None else stdout,
            err_read: 2 if stderr is None else stderr,
        }
        self._buffers: dict[int, bytearray] = {out_read: bytearray(), err_read: bytearray()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="modelmon-output-tap", daemon=True)

    def start(self) -> None:
        """After the command started with ``stdout`` and ``stderr``: this process's copies of
        the write ends close, so the pipes end when the command's tree closes them."""
        os.close(self.stdout)
        os.close(self.stderr)
        self._thread.start()

    def _run(self) -> None:
        poller = select.poll()
        for fd in self._sinks:
            poller.register(fd, select.POLLIN)
        open_fds = set(self._sinks)
        try:
            while open_fds and not self._stop.is_set():
                for fd, _ in poller.poll(TAP_POLL_S * 1000):
                    try:
                        data = os.read(fd, 1 << 16)
                    except OSError:
                        data = b""
                    if not data:
                        poller.unregister(fd)
                        open_fds.discard(fd)
                        self._flush(fd)
                        continue
                    self._pass_on(fd, data)
        finally:
            for fd in self._sinks:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _pass_on(self, fd: int, data: bytes) -> None:
        with contextlib.suppress(OSError):
            _write_all(self._sinks[fd], data)
        if self._matched:
            return
        at = now_ns()
        buffer = self._buffers[fd]
        buffer += data
        while True:
            end = buffer.find(b"\n")
            if end < 0:
                break
            self._match(at, bytes(buffer[:end]))
            del buffer[: end + 1]
            if self._matched:
                buffer.clear()
                return
        if len(buffer) > MAX_LINE:
            self._match(at, bytes(buffer[:MAX_LINE]))
            buffer.clear()

    def _flush(self, fd: int) -> None:
        buffer = self._buffers[fd]
        if buffer and not self._matched:
            self._match(now_ns(), bytes(buffer))
        buffer.clear()

    def _match(self, at: int, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        if self._pattern.search(text):
            self._matched = True
            self._on_match(at, text)

    def stop(self) -> None:
        """End the tap (the watch is over): what a leftover process writes later is not read."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(TAP_POLL_S * 10)
        elif not self._thread.ident:  # never started: the command did not start
            for fd in (*self._sinks, self.stdout, self.stderr):
                with contextlib.suppress(OSError):
                    os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
