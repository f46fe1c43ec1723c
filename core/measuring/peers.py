"""Other loaders ("peers"), each run in a fresh child process (``peer_child.py``) through the
fresh-process harness (``loading.fresh``), as ``recommend``'s candidates and the benchmarks'
entries alike.

Nothing here imports a peer (or torch): whether one is installed is asked of the import system
without running it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.loading.fresh import READY_TIMEOUT_S, FreshResult, run_fresh
from modelmon.core.loading.result import OVERLAP_NOTE, LoadResult, WorkerTiming
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode
from modelmon.core.system import cache, host_memory

CHILD = Path(__file__).with_name("peer_child.py")


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


def run_peer(
    settings: PeerSettings | str,
    files: list[str],
    mode: CacheMode,
    *,
    time_limit_s: float | None = None,
    ready_timeout_s: float = READY_TIMEOUT_S,
    stop: threading.Event | None = None,
    end_by: float | None = None,
) -> FreshResult:
    """One load of ``files`` by a peer from the page-cache state ``mode`` (cold | warm | keep),
    through the fresh-process harness (``loading.fresh.run_fresh``: the limits, the stop
    event and the statuses are its)."""
    if isinstance(settings, str):
        settings = PeerSettings(settings)
    env = {**os.environ, "RUNAI_STREAMER_LOG_LEVEL": "WARNING", **dict(settings.env)}
    return run_fresh(
        _command(settings.peer, *files),
        files,
        mode,
        env=env,
        time_limit_s=time_limit_s,
        ready_timeout_s=ready_timeout_s,
        stop=stop,
        end_by=end_by,
        who="the peer's process",
    )


def peer_load_result(
    settings: PeerSettings, model: Model, run: FreshResult, parent_peak_rss: int | None
) -> LoadResult:
    """A peer's run as the record modelmon's own runs make: its one process is the worker of
    its load."""
    state = run.state or cache.not_measured("cold")
    return LoadResult(
        status=run.status,
        strategy=settings.peer,
        options={"env": dict(settings.env)},
        model=model.path,
        format=model.format,
        files=tuple(f.path for f in model.files),
        bytes=run.bytes,
        seconds=run.seconds,
        cache=dataclasses.replace(state, resident_after=run.resident_after),
        error=run.error,
        workers=(WorkerTiming(0, 0, run.bytes, run.seconds, 0, run.peak_rss),)
        if run.status == "ok"
        else (),
        notes=host_memory.reported_notes(run.host_reported)
        + ((f"{OVERLAP_NOTE}{'; '.join(run.overlapped)}",) if run.overlapped else ()),
        host_reported=run.host_reported,
        parent_peak_rss=parent_peak_rss,
    )
