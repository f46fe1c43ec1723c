"""A load in a fresh child process, timed by the child itself: the one ready/go harness.

The peer loaders (``measuring.peers``) and the benchmarks' ``core.load`` in a fresh process
both run through it. It mirrors modelmon's own runner: the child imports what it needs,
prints ``ready`` and waits for a line ``go``; meanwhile the parent puts the page cache of the
files in the requested state and measures it. After go the child loads and prints one JSON
line of its own figures: ``bytes`` and ``seconds`` (from go to the last tensor), and
``peak_rss`` / ``rss_ready`` (its VmHWM after the load and when it said ready) where it
measures them. Process start and imports are not counted, as for modelmon's workers.

Every child is ended by pid, whatever happens; every wait for it has a way out (a deadline,
the stop event, its output's end), and a child that dies is named with its signal.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from modelmon.core.loading.processes import death_description
from modelmon.core.options import CacheMode
from modelmon.core.system import cache, device_use, host_memory, readahead, residency
from modelmon.core.system.oom import oom_kills
from modelmon.core.system.readiness import wait_readable

READY_TIMEOUT_S = 120.0  # a fresh interpreter importing torch on a busy machine
POLL_S = 0.05  # how often a waiting parent looks at the stop event and the clock
STOP_GRACE_S = 3.0


@dataclass(frozen=True)
class FreshResult:
    """One load in a fresh process, as its child reported it and the parent measured it."""

    status: Literal["ok", "failed", "cancelled"]  # cancelled: time limit, not ready, stopped
    bytes: int
    seconds: float
    resident_before: float
    resident_after: float
    cold: bool
    warm: bool
    peak_rss: int  # the child's VmHWM after the load (0 where it did not say)
    rss_ready: int  # ... and when it said ready: interpreter, imports, what it parsed
    error: str | None = None
    state: cache.CacheState | None = None  # the measured start state (None: never reached)
    host_reported: int | None = None  # free memory reported to the host from go to the answer
    overlapped: tuple[str, ...] = ()  # other modelmon runs on the device from go to the answer

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def stop_child(process: subprocess.Popen[Any], grace_s: float = STOP_GRACE_S) -> None:
    """End a child we started: terminate, wait, then kill if it lingers."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(grace_s)


def stop_child_and_close(process: subprocess.Popen[Any]) -> None:
    """End a child we started, then close the pipes we hold to it (stdin, stdout)."""
    stop_child(process)
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()


class _Stopped(Exception):
    pass


class _Ended(Exception):
    """The child's output ended (it exited, or died) before the line the parent waited for."""


class _ChildLines:
    """The child's stdout one line at a time, read from its descriptor in short slices: a
    stop or a deadline ends any wait, and a child that writes half a line and hangs cannot
    hold the parent (a buffered ``readline`` would wait for the rest)."""

    def __init__(self, child: subprocess.Popen[str]) -> None:
        assert child.stdout is not None
        self._fd = child.stdout.fileno()
        self._buffer = b""

    def next(self, deadline: float, stop: threading.Event | None, what: str) -> str:
        while b"\n" not in self._buffer:
            if stop is not None and stop.is_set():
                raise _Stopped("stopped")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Stopped(what)
            if wait_readable(self._fd, min(POLL_S, remaining)):
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    raise _Ended(self._buffer.decode(errors="replace").strip())
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").strip()


def _ended_why(child: subprocess.Popen[str], oom_kills_before: int | None, who: str) -> str:
    """How the child ended before answering: its signal (and whether the OOM killer sent it),
    or its exit code."""
    try:
        code = child.wait(STOP_GRACE_S)  # its output ended: it exits now, if not already
    except subprocess.TimeoutExpired:
        return f"{who} closed its output without a result"
    return f"{who} (pid {child.pid}) {death_description(code, oom_kills_before, child.pid)}"


def run_fresh(
    argv: Sequence[str],
    files: list[str],
    mode: CacheMode,
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    arrays: int | None = None,
    time_limit_s: float | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    stop: threading.Event | None = None,
    end_by: float | None = None,
    who: str = "the child process",
) -> FreshResult:
    """Run ``argv`` (a child that speaks the protocol above) to load ``files`` from the
    page-cache state ``mode`` (cold | warm | keep). ``arrays``: what priming may cover
    (``cache.prepare``).

    ``time_limit_s`` bounds the load itself (from go), ``ready_timeout_s`` the child's start
    and imports; ``end_by`` (a ``time.monotonic`` instant) the whole run, imports and
    priming included; ``stop`` ends it at once. Each gives status "cancelled" with the reason
    in ``error`` ("stopped at the time limit of ...", "not ready", "stopped"). ``who`` names
    the child in the error of one that died.
    """
    end = math.inf if end_by is None else end_by
    oom_before = oom_kills()
    with (
        device_use.activity(readahead.device_names(files)) as activity,
        tempfile.TemporaryFile("w+") as errors,  # a file: a chatty child can't block on it
    ):
        child = subprocess.Popen(
            list(argv),
            text=True,
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        lines = _ChildLines(child)
        state = None
        try:
            cache.prepare_early(files, mode)  # while the child imports (torch: seconds)
            line = lines.next(min(time.monotonic() + ready_timeout_s, end), stop, "not ready")
            if line != "ready":
                raise RuntimeError(f"child said {line!r} instead of ready")
            state = cache.prepare(files, mode, stop=stop, arrays=arrays)
            assert child.stdin is not None
            reported = host_memory.reported_bytes()
            activity.mark()
            try:
                child.stdin.write("go\n")
                child.stdin.flush()
            except BrokenPipeError:
                raise _Ended("") from None  # it died waiting for go
            limit = READY_TIMEOUT_S if time_limit_s is None else time_limit_s
            answer = lines.next(min(time.monotonic() + limit, end), stop, "time limit")
            reported = host_memory.reported_since(reported)
            overlapped = tuple(run.text() for run in activity.others())
            data = json.loads(answer)
            child.wait(30)
            return FreshResult(
                "ok",
                int(data["bytes"]),
                float(data["seconds"]),
                state.resident_before,
                residency.measure(files),
                state.cold,
                state.warm,
                int(data.get("peak_rss", 0)),
                int(data.get("rss_ready", 0)),
                state=state,
                host_reported=reported,
                overlapped=overlapped,
            )
        except Exception as exc:
            stopped = isinstance(exc, _Stopped)
            why = _ended_why(child, oom_before, who) if isinstance(exc, _Ended) else str(exc)
            stop_child(child)
            errors.seek(0)
            said = errors.read().strip().splitlines()
            if stopped and why == "time limit":
                ended_by = "its budget" if time_limit_s is None else f"{time_limit_s:g} s"
                why = f"stopped at the time limit of {ended_by}"
            elif said and not stopped:
                why = f"{why}: {said[-1]}"
            return FreshResult(
                "cancelled" if stopped else "failed",
                0,
                0.0,
                state.resident_before if state else 0.0,
                0.0,
                bool(state and state.cold),
                bool(state and state.warm),
                0,
                0,
                why,
                state,
            )
        finally:
            stop_child_and_close(child)
            host_memory.note_free()  # the child's tensors and interpreter
