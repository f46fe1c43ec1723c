"""A watched command's standard output and error through pipes, passed on unchanged; the lines
that hold one of a few words handed on (the server's own phase lines), and the ready
expression (``--ready-line``) searched for.

Output is looked at a chunk at a time, never a line at a time: a chatty server writes
hundreds of thousands of lines before it is ready, and a per-line search would slow it
through the pipe (300,000 lines took 4 s so, 0.5 s alone). Its complete lines are searched
as one text, each line's start and end anchors where its ``^`` and ``$`` would be; a match's
own line is then searched alone (a match may span lines, which a line's search would not
find). A phase line is found by a plain search for its words (memory speed), binary output
(a NUL in it) not at all.

A ready expression is the user's input, and a regular expression can take time exponential
in its text ((a+)+$ on a line of a's and a "!"): each search is bounded (``MATCH_S``, the
``regex`` engine's timeout, which also lets other threads run meanwhile), and so is all of
it: past ``MATCH_BUDGET_S`` of this thread's CPU, where that is more than ``MATCH_SHARE`` of
the time the tap has run, the expression is searched no more, and the watch's notes say so.
The ready timeout, Ctrl+C and the signals stay as they are.
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

MAX_LINE = 1 << 20  # bytes of one line kept for the ready expression: a longer one is cut
# The longest line handed on as a possible phase line of a server's (its log lines are far
# shorter).
PHASE_LINE = 4096
TAP_POLL_S = 0.1  # the tap's wait, between looks at its stop flag
MATCH_S = 0.1  # the most one search of the ready expression may take
MATCH_BUDGET_S = 2.0  # of the tap thread's CPU on the ready expression, before it may give up
MATCH_SHARE = 0.25  # ... and as a share of the time the tap has run: a cheap one never does


def compile_ready(pattern: str) -> regex.Pattern[str]:
    """The ready expression as a line is searched for it (Python's ``re`` syntax: ``regex``'s
    version 0 is compatible with it); ``regex.error`` for one that is not an expression."""
    return regex.compile(pattern, flags=regex.VERSION0)


class OutputTap:
    """The command's standard output and error through pipes: each byte is passed on to where
    it would have gone; the first line that matches ``pattern`` is reported with the time it
    was read (``on_match``), and each line holding one of ``line_filter``'s words too
    (``on_line``). The thread ends at both pipes' end or at ``stop``."""

    def __init__(
        self,
        pattern: str | None,
        on_match: Callable[[int, str], None],
        stdout: int | None,
        stderr: int | None,
        on_line: Callable[[int, str], None] | None = None,
        line_filter: tuple[bytes, ...] = (),
    ) -> None:
        self._pattern = compile_ready(pattern) if pattern is not None else None
        # The same, over many lines at once: ^ and $ at each line's start and end.
        self._lines_pattern = (
            regex.compile(pattern, flags=regex.VERSION0 | regex.MULTILINE)
            if pattern is not None
            else None
        )
        self._on_match, self._on_line = on_match, on_line
        self._filter = line_filter if on_line is not None else ()
        self._searching = pattern is not None  # until matched, or given up
        self._spent_s = 0.0  # this thread's CPU on the ready expression's searches
        self._began = time.monotonic()
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
        self._began = time.monotonic()
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

    @property
    def _looking(self) -> bool:
        return self._searching or bool(self._filter)

    def _pass_on(self, fd: int, data: bytes) -> None:
        with contextlib.suppress(OSError):
            _write_all(self._sinks[fd], data)
        if not self._looking:
            return
        at = now_ns()
        buffer = self._buffers[fd]
        start = len(buffer)  # no newline before the new data
        buffer += data
        last = buffer.rfind(b"\n", start)
        if last >= 0:
            begun = 0
            if self._skipping[fd]:  # the rest of a line cut: up to its newline
                begun = buffer.find(b"\n") + 1
                self._skipping[fd] = False
            self._look(at, buffer, begun, last)
            del buffer[: last + 1]
        # A line longer than anything still looked for is cut: searched as far as it goes
        # (the ready expression), its rest skipped to its newline.
        limit = MAX_LINE if self._searching else PHASE_LINE
        if len(buffer) > limit:
            if not self._skipping[fd]:
                self._look(at, buffer, 0, limit)
            self._skipping[fd] = True
            buffer.clear()

    def _flush(self, fd: int) -> None:
        """The stream ended: its last line, without a newline, is a line."""
        buffer = self._buffers[fd]
        if buffer and not self._skipping[fd] and self._looking:
            self._look(now_ns(), buffer, 0, len(buffer))
        buffer.clear()

    def _look(self, at: int, buffer: bytearray, begun: int, end: int) -> None:
        """Look at ``buffer[begun:end]``, complete lines (the last one's newline at
        ``end``, or cut there)."""
        if self._filter:
            self._phase_lines(at, buffer, begun, end)
        if self._searching:
            text = bytes(buffer[begun:end]).decode(errors="replace")
            self._search(at, text)

    def _phase_lines(self, at: int, buffer: bytearray, begun: int, end: int) -> None:
        """Hand on, in order, the lines of ``buffer[begun:end]`` holding one of the filter's
        words: each word found by a plain search of the bytes (at memory speed, where an
        alternation of them in a regular expression would not be); a stretch holding a NUL
        is binary output, with no log line in it, and is not searched."""
        assert self._on_line is not None
        if buffer.find(b"\0", begun, end) >= 0:
            return
        heads: set[int] = set()
        for word in self._filter:
            found = buffer.find(word, begun, end)
            while found >= 0:
                heads.add(buffer.rfind(b"\n", begun, found) + 1 if found > begun else begun)
                tail = buffer.find(b"\n", found, end)
                if tail < 0:
                    break
                found = buffer.find(word, tail, end)
        for head in sorted(heads):
            tail = buffer.find(b"\n", head, end)
            tail = end if tail < 0 else tail
            if tail - head <= PHASE_LINE:
                self._on_line(at, bytes(buffer[head:tail]).decode(errors="replace").rstrip("\r"))

    def _search(self, at: int, text: str) -> None:
        """The ready expression over ``text``'s lines: a match's line is searched alone."""
        assert self._pattern is not None and self._lines_pattern is not None
        began = time.thread_time()
        try:
            position = 0
            while self._searching:
                found = self._lines_pattern.search(text, position, timeout=MATCH_S, concurrent=True)
                if found is None:
                    return
                head = text.rfind("\n", 0, found.start()) + 1
                tail = text.find("\n", found.start())
                tail = len(text) if tail < 0 else tail
                line = text[head:tail].rstrip("\r")
                if self._pattern.search(line, timeout=MATCH_S, concurrent=True):
                    self._searching = False
                    self._on_match(at, line)
                    return
                position = tail + 1
        except TimeoutError:
            self._give_up(f"one search of {len(text):,} characters took it over {MATCH_S:g} s")
        finally:
            self._spent_s += time.thread_time() - began
            elapsed = time.monotonic() - self._began
            if (
                self._searching
                and self._spent_s > MATCH_BUDGET_S
                and self._spent_s > MATCH_SHARE * elapsed
            ):
                self._give_up(
                    f"its searches took {self._spent_s:.1f} s of CPU, "
                    f"{self._spent_s / max(elapsed, 1e-9):.0%} of the {elapsed:.0f} s watched"
                )

    def _give_up(self, why: str) -> None:
        """Search the ready expression no more (its text, or its texts, took too long)."""
        self._searching = False
        self.notes.append(
            f"--ready-line's expression was searched no more: {why} (an expression that "
            "backtracks, such as (a+)+$, on a long line): the command's ready is not seen by "
            "its output"
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
