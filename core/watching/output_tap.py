"""A watched command's standard output and error through pipes, passed on unchanged, each
line handed on (the server's own phase lines) and searched for the ready expression
(``--ready-line``).

A ready expression is the user's input, and a regular expression can take time exponential
in its line ((a+)+$ on a line of a's and a "!"): each search is bounded (``MATCH_S``, with
the ``regex`` engine's timeout, which also lets other threads run meanwhile), and all of them
together (``MATCH_BUDGET_S``); past that the expression is searched no more, and the watch's
notes say so: the ready timeout, Ctrl+C and the signals stay as they are.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable

import regex

from modelmon.core.loading.reads import now_ns

MAX_LINE = 1 << 20  # bytes of one output line kept for matching: a longer one is matched cut
# The longest line handed on as a possible phase line of a server's (its log lines are far
# shorter): a program that writes much else costs a copy, not a search of every byte.
PHASE_LINE = 4096
TAP_POLL_S = 0.1  # the tap's wait, between looks at its stop flag
MATCH_S = 0.1  # the most one line's search for the ready expression may take
MATCH_BUDGET_S = 2.0  # all the searches together


def compile_ready(pattern: str) -> regex.Pattern[str]:
    """The ready expression as the tap searches it (Python's ``re`` syntax: ``regex``'s
    version 0 is compatible with it); ``regex.error`` for one that is not an expression."""
    return regex.compile(pattern, flags=regex.VERSION0)


class OutputTap:
    """The command's standard output and error through pipes: each line is passed on to where
    it would have gone, and the first that matches ``pattern`` is reported with the time it
    was read. The thread ends at both pipes' end or at ``stop``."""

    def __init__(
        self,
        pattern: str | None,
        on_match: Callable[[int, str], None],
        stdout: int | None,
        stderr: int | None,
        on_line: Callable[[int, str], None] | None = None,
        line_filter: tuple[bytes, ...] | None = None,
    ) -> None:
        self._pattern = compile_ready(pattern) if pattern is not None else None
        self._on_match = on_match
        self._on_line = on_line
        # Only lines holding one of these words reach ``on_line``, found in the bytes as they come:
        # the other lines of a program that writes much are passed on and never looked at.
        self._filter = line_filter
        self._matched = pattern is None  # nothing to search for
        self._spent_s = 0.0  # on the ready expression's searches
        self.notes: list[str] = []
        out_read, self.stdout = os.pipe()
        err_read, self.stderr = os.pipe()
        # Where each stream would have gone: the descriptors given, else this process's own.
        self._sinks = {
            out_read: 1 if stdout is None else stdout,
            err_read: 2 if stderr is None else stderr,
        }
        self._buffers: dict[int, bytearray] = {out_read: bytearray(), err_read: bytearray()}
        self._skipping = {out_read: False, err_read: False}  # in the rest of a line cut
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
        if self._matched and self._on_line is None:
            return
        at = now_ns()
        buffer = self._buffers[fd]
        start = len(buffer)  # where the new data begins: no newline before it
        buffer += data
        if self._matched and self._filter is not None:
            self._scan(fd, at, buffer)
            return
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            if not self._skipping[fd]:
                self._match(at, bytes(buffer[:end]))
            self._skipping[fd] = False
            del buffer[: end + 1]
            start = 0
            if self._matched and self._on_line is None:
                buffer.clear()
                return
        # A line longer than anything still looked for is cut: matched as far as it goes
        # (a ready expression), its rest skipped to its newline.
        limit = PHASE_LINE if self._matched else MAX_LINE
        if len(buffer) > limit:
            if not self._skipping[fd]:
                self._match(at, bytes(buffer[:limit]))
            self._skipping[fd] = True
            buffer.clear()

    def _scan(self, fd: int, at: int, buffer: bytearray) -> None:
        """The complete lines of ``buffer`` that hold one of the filter's words, handed on in
        order; the last, incomplete line kept (cut, and skipped to its newline, past
        ``PHASE_LINE``). Each word is found by a plain search of the bytes, which runs at
        memory speed, where an alternation of them in a regular expression would not; binary
        output (a NUL in it) is not searched."""
        assert self._filter is not None and self._on_line is not None
        last = buffer.rfind(b"\n")
        if last >= 0:
            begun = 0
            if self._skipping[fd]:  # the rest of a line cut: up to its newline
                begun = buffer.find(b"\n") + 1
                self._skipping[fd] = False
            heads: set[int] = set()
            # A stretch holding a NUL byte is binary output (a model piped out, say): no
            # log line is in it, and one search for the NUL spares a search for each word.
            words = () if buffer.find(b"\0", begun, last) >= 0 else self._filter
            for word in words:
                found = buffer.find(word, begun, last)
                while found >= 0:
                    head = buffer.rfind(b"\n", begun, found) + 1 if found > begun else begun
                    heads.add(max(head, begun))
                    found = buffer.find(word, buffer.find(b"\n", found), last)
                    if found < 0:
                        break
            for head in sorted(heads):
                tail = buffer.find(b"\n", head)
                if tail - head <= PHASE_LINE:
                    text = bytes(buffer[head:tail]).decode(errors="replace").rstrip("\r")
                    self._on_line(at, text)
            del buffer[: last + 1]
        if len(buffer) > PHASE_LINE:
            self._skipping[fd] = True
            buffer.clear()

    def _flush(self, fd: int) -> None:
        buffer = self._buffers[fd]
        if buffer and not self._skipping[fd]:
            self._match(now_ns(), bytes(buffer))
        buffer.clear()

    def _match(self, at: int, line: bytes) -> None:
        text = line.decode(errors="replace").rstrip("\r")
        if self._on_line is not None and len(line) <= PHASE_LINE:
            self._on_line(at, text)
        if self._matched or self._pattern is None:
            return
        began = time.monotonic()
        try:
            found = self._pattern.search(text, timeout=MATCH_S, concurrent=True)
        except TimeoutError:
            found = None
            self._gave_up(f"one line of {len(line):,} bytes took it over {MATCH_S:g} s")
        self._spent_s += time.monotonic() - began
        if found is not None:
            self._matched = True
            self._on_match(at, text)
        elif self._spent_s > MATCH_BUDGET_S and not self._matched:
            self._gave_up(f"its searches took {self._spent_s:.1f} s of CPU in all")

    def _gave_up(self, why: str) -> None:
        """Search the ready expression no more (its line, or its lines, took too long)."""
        self._matched = True
        self.notes.append(
            f"--ready-line's expression was searched no more: {why} (an expression that "
            "backtracks, such as (a+)+$): the command's ready is not seen by its output"
        )

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
