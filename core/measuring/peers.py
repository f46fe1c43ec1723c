"""Other loaders ("peers"), each run in a fresh child process (``peer_child.py``) like a worker.

One implementation for both ``recommend`` (peers as candidates) and the benchmarks. The parent
mirrors modelmon's runner: start the child, wait until it has imported its library, put the
page cache in the requested state and measure it, say go, and take the child's own timing of
the load. Every child is ended by pid, whatever happens; every wait for it has a way out (a
deadline, the stop event, its output's end), and a child that dies is named with its signal.
Nothing here imports a peer (or torch): whether one is installed is asked of the import system
without running it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelmon.core.loading.processes import death_description, oom_kills
from modelmon.core.options import CacheMode
from modelmon.core.system import cache, device_use, host_memory, readahead, residency

CHILD = Path(__file__).with_name("peer_child.py")
READY_TIMEOUT_S = 120.0
POLL_S = 0.05  # how often a waiting parent looks at the stop event and the clock
STOP_GRACE_S = 3.0


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    description: str
    formats: tuple[str, ...]
    modules: tuple[str, ...]  # what must be importable (peer_child.PEER_MODULES agrees)
    pypi: str  # what a user would pip install


# "safetensors" and "gguf-reader" are the plain library calls that modelmon's ``library``
# strategy wraps, here without modelmon around them.
PEERS: dict[str, Peer] = {
    p.name: p
    for p in (
        Peer(
            "safetensors",
            "safetensors safe_open(numpy).get_tensor, plain, one process",
            ("safetensors",),
            ("safetensors", "numpy"),
            "safetensors",
        ),
        Peer(
            "gguf-reader",
            "gguf GGUFReader, every tensor copied out, plain, one process",
            ("gguf",),
            ("gguf", "numpy"),
            "gguf",
        ),
        Peer(
            "runai-model-streamer",
            "Run:ai Model Streamer SafetensorsStreamer (CPU)",
            ("safetensors",),
            ("torch", "runai_model_streamer"),
            "runai-model-streamer",
        ),
        Peer(
            "fastsafetensors",
            "fastsafetensors fastsafe_open(nogds=True): the CPU path",
            ("safetensors",),
            ("torch", "fastsafetensors"),
            "fastsafetensors",
        ),
        Peer(
            "cattensors",
            "cattensors.patch(): parallel warm-up reads, then safe_open(pt)",
            ("safetensors",),
            ("torch", "safetensors", "cattensors"),
            "cattensors",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class PeerSettings:
    """A peer with the settings a user would set, as environment variables of its process."""

    peer: str
    env: tuple[tuple[str, str], ...] = ()

    @property
    def spec(self) -> str:
        knobs = " ".join(f"{key}={value}" for key, value in self.env)
        return f"{self.peer} {knobs}".strip()


@dataclass(frozen=True)
class PeerResult:
    peer: str
    status: str  # "ok" | "failed" | "cancelled" (stopped: time limit or stop event)
    bytes: int
    seconds: float
    resident_before: float
    resident_after: float
    cold: bool
    warm: bool
    peak_rss: int
    rss_ready: int
    error: str | None = None
    state: cache.CacheState | None = None  # the measured start state (None: never reached)
    host_reported: int | None = None  # free memory reported to the host from go to the answer
    overlapped: tuple[str, ...] = ()  # other modelmon runs on the device from go to the answer

    @property
    def mbps(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def _module_missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a parent package that fails, or a broken entry
        return True


def peer_unavailable(peer: str) -> str | None:
    """None when every module the peer needs is installed here; otherwise why not, in one line.

    Found, not imported: importing torch takes seconds, and a peer that is found but fails to
    import is reported by its child as a failed run.
    """
    spec = PEERS[peer]
    missing = [m for m in spec.modules if _module_missing(m)]
    if not missing:
        return None
    return f"{peer} is not installed here ({', '.join(missing)} not found; pip install {spec.pypi})"


def _command(*args: str) -> list[str]:
    return [sys.executable, str(CHILD), *args]


def check_import(peer: str) -> str | None:
    """Import the peer in a child process (a real import, which can be slow): None or why not."""
    try:
        done = subprocess.run(
            _command("--check", peer), capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        return "importing it took over 120 s"
    if done.returncode == 0:
        return None
    lines = (done.stdout or done.stderr).strip().splitlines()
    why = lines[-1] if lines else f"exit code {done.returncode}"
    return f"not importable ({why})"


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
            ready, _, _ = select.select([self._fd], [], [], min(POLL_S, remaining))
            if ready:
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    raise _Ended(self._buffer.decode(errors="replace").strip())
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace").strip()


def _ended_why(child: subprocess.Popen[str], oom_kills_before: int | None) -> str:
    """How the child ended before answering: its signal (and whether the OOM killer sent it),
    or its exit code."""
    try:
        code = child.wait(STOP_GRACE_S)  # its output ended: it exits now, if not already
    except subprocess.TimeoutExpired:
        return "the peer's process closed its output without a result"
    return f"the peer's process (pid {child.pid}) {death_description(code, oom_kills_before)}"


def run_peer(
    settings: PeerSettings | str,
    files: list[str],
    mode: CacheMode,
    *,
    time_limit_s: float | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    stop: threading.Event | None = None,
    end_by: float | None = None,
) -> PeerResult:
    """One load of ``files`` by a peer from the page-cache state ``mode`` (cold | warm | keep).

    ``time_limit_s`` bounds the load itself (from go), ``ready_timeout_s`` the child's start
    and imports (torch takes seconds); ``end_by`` (a ``time.monotonic`` instant) the whole
    run, imports and priming included; ``stop`` ends it at once. Each gives status
    "cancelled" with the reason in ``error`` ("time limit", "not ready", "stopped").
    """
    end = math.inf if end_by is None else end_by
    if isinstance(settings, str):
        settings = PeerSettings(settings)
    env = {**os.environ, "RUNAI_STREAMER_LOG_LEVEL": "WARNING", **dict(settings.env)}
    oom_before = oom_kills()
    with (
        device_use.activity(readahead.device_names(files)) as activity,
        tempfile.TemporaryFile("w+") as errors,  # a file: a chatty child can't block on it
    ):
        child = subprocess.Popen(
            _command(settings.peer, *files),
            text=True,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        lines = _ChildLines(child)
        state = None
        try:
            cache.prepare_early(files, mode)  # while the child imports (torch: seconds)
            ready_by = min(time.monotonic() + ready_timeout_s, end)
            line = lines.next(ready_by, stop, "not ready")
            if line != "ready":
                raise RuntimeError(f"child said {line!r} instead of ready")
            state = cache.prepare(files, mode, stop=stop)
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
            return PeerResult(
                settings.peer,
                "ok",
                int(data["bytes"]),
                float(data["seconds"]),
                state.resident_before,
                residency.measure(files),
                state.cold,
                state.warm,
                int(data["peak_rss"]),
                int(data["rss_ready"]),
                state=state,
                host_reported=reported,
                overlapped=overlapped,
            )
        except Exception as exc:
            stopped = isinstance(exc, _Stopped)
            why = _ended_why(child, oom_before) if isinstance(exc, _Ended) else str(exc)
            stop_child(child)
            errors.seek(0)
            said = errors.read().strip().splitlines()
            if stopped and why == "time limit":
                ended_by = "its budget" if time_limit_s is None else f"{time_limit_s:g} s"
                why = f"stopped at the time limit of {ended_by}"
            elif said and not stopped:
                why = f"{why}: {said[-1]}"
            return PeerResult(
                settings.peer,
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
