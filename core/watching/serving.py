"""A started command as a server: when it is ready (``ready.ReadyWatch``), its output through
the pipes of ``output_tap.OutputTap`` (a ready line, and the phase lines servers print of
their own start, ``server_lines``), and what the watch does once it is ready: end there (the
command is stopped, as a quiet end stops it), watch on, or watch some seconds more."""

from __future__ import annotations

import os

from modelmon.core.loading.reads import now_ns
from modelmon.core.watching.observer import Observer
from modelmon.core.watching.output_tap import OutputTap
from modelmon.core.watching.ready import EARLY_QUIET_S, ReadyCondition, ReadyWatch
from modelmon.core.watching.server_lines import KEY_BYTES, ServerLine, recognise

AfterReady = str | float  # "stop" | "watch" | seconds more to watch


class Serving:
    """The ready side of one watched command."""

    def __init__(
        self, condition: ReadyCondition, after: AfterReady, timeout_s: float | None
    ) -> None:
        self.ready = ReadyWatch(condition)
        self.after, self.timeout_s = after, timeout_s
        self._tap: OutputTap | None = None
        self.lines: list[ServerLine] = []  # the server's own phase lines, as they were read
        self._said: list[str] = []

    def streams(
        self, stdout: int | None, stderr: int | None, env: dict[str, str] | None
    ) -> tuple[int | None, int | None, dict[str, str] | None]:
        """Before the command starts: what it is started with. The sockets listening already
        are noted (not its own), a ready URL that answers already is refused; its output
        goes through the tap."""
        self.ready.begin()
        self._tap = OutputTap(
            self.ready.condition.line,
            self.ready.line,
            stdout,
            stderr,
            on_line=self._heard,
            line_filter=KEY_BYTES,
        )
        # A Python program's prints reach a pipe when its buffer fills: one line at a time,
        # they arrive as they are printed, and are timed when they were.
        env = {"PYTHONUNBUFFERED": "1", **(env if env is not None else os.environ)}
        return self._tap.stdout, self._tap.stderr, env

    def _heard(self, at_ns: int, text: str) -> None:
        found = recognise(at_ns, text)
        if found is not None:
            self.lines.append(found)

    @property
    def notes(self) -> list[str]:
        """What the tap had to say (a ready expression it gave up on)."""
        return self._said + (self._tap.notes if self._tap is not None else [])

    def started(self) -> None:
        if self._tap is not None:
            self._tap.start()
        self.ready.start_url()

    def end(self, observer: Observer, t0_ns: int) -> str | None:
        """'ready' when the watch ends now (ready, and the time after it asked for is over);
        'ready-timeout' when it was not ready within the timeout given; else None."""
        ready = self.ready
        now = now_ns()
        ready.look(now, *observer.ready_context())
        if ready.seen is None and ready.early:
            quiet_ns = observer.quiet_for_ns(now)
            if quiet_ns >= EARLY_QUIET_S * 1e9:
                ready.settle_early(now - quiet_ns, observer.model_seen())
        seen = ready.seen
        if seen is not None:
            if self.after == "watch":
                return None
            after = 0.0 if self.after == "stop" else float(self.after)
            return "ready" if now >= seen.at_ns + after * 1e9 else None
        # A timeout is asked for with a condition or alone (the default, a listening socket):
        # either way a command not ready by then is stopped and fails.
        timeout = self.timeout_s
        if timeout is not None and now - t0_ns >= timeout * 1e9:
            return "ready-timeout"
        return None

    def stop(self) -> None:
        """The watch is over (or the command could not start): the tap and the URL end."""
        if self._tap is not None:
            self._tap.stop()
            self._said += self._tap.notes
            self._tap = None
        self.ready.stop()
