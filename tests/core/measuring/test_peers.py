"""The peer harness: a peer's process that dies is named with its signal, at once, and one
whose parent dies goes with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from modelmon.core.loading.fresh import FreshResult
from modelmon.core.measuring import peers
from modelmon.core.model.synth import write_safetensors_model

ENDS_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("peer")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096, dtype="F16")


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids.extend(int(k) for k in f.read().split())
        except OSError:
            continue
    return kids


def _loading_peer(parent: int, model: Path, timeout_s: float = 60.0) -> int:
    """The pid of ``parent``'s peer process once it has the model mapped: it is loading."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in _children(parent):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"peer_child.py" not in f.read():
                        continue
                with open(f"/proc/{pid}/maps") as f:
                    if str(model) in f.read():
                        return pid
            except OSError:
                continue
        time.sleep(0.001)
    raise AssertionError("the peer never started loading")


def test_a_peer_killed_mid_load_fails_naming_its_signal(model: Path) -> None:
    if peers.peer_unavailable("safetensors"):
        pytest.skip("safetensors is not installed")
    results: list[FreshResult] = []
    runner = threading.Thread(
        target=lambda: results.append(peers.run_peer("safetensors", [str(model)], "cold"))
    )
    runner.start()
    try:
        pid = _loading_peer(os.getpid(), model)
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
    finally:
        runner.join(60)
    assert results, "run_peer never returned"
    assert time.monotonic() - killed < ENDS_WITHIN_S
    (result,) = results
    assert result.status == "failed"
    assert (result.error or "").startswith(f"the peer's process (pid {pid}) was killed by SIGKILL")


def _alive(pid: int) -> bool:
    """Not exited (a zombie has: it waits only for its new parent to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


_PARENT = """
import sys
from modelmon.core.loading.fresh import FreshResult
from modelmon.core.measuring import peers
print(peers.run_peer("safetensors", [sys.argv[1]], "cold"), flush=True)
"""


def test_a_peer_dies_with_its_parent(model: Path) -> None:
    """Frozen mid-load, the peer could only go on if its parent's death left it alive."""
    if peers.peer_unavailable("safetensors"):
        pytest.skip("safetensors is not installed")
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(model)], stdout=subprocess.DEVNULL
    )
    pid = _loading_peer(parent.pid, model)
    try:
        os.kill(pid, signal.SIGSTOP)
        parent.kill()
        parent.wait(30)
        deadline = time.monotonic() + ENDS_WITHIN_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # a state no event tells this process about: polled
        alive = _alive(pid)
    finally:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(pid, sig)  # an orphan left behind: ours to end
            except ProcessLookupError:
                break
    assert not alive, "the peer outlived its parent"
