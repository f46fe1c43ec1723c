"""The child harness that runs every loader that is not modelmon's (``loaders/child.py``): a
child that dies mid-load is named with its signal, at once, and one whose parent dies goes
with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.loading.result import LoadResult
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.runs.program import ProgramRun

from ...leaks import child_pids, process_state

DIES_WITHIN_S = 30.0


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("peer")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096, dtype="F16")


def _loading_child(parent: int, model: Path, timeout_s: float = 60.0) -> int:
    """The pid of ``parent``'s child harness once it has the model mapped: it is loading."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for pid in child_pids(parent):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"loaders/child.py" not in f.read():
                        continue
                with open(f"/proc/{pid}/maps") as f:
                    if str(model) in f.read():
                        return pid
            except OSError:
                continue
        time.sleep(0.001)
    raise AssertionError("the child never started loading")


def test_a_child_killed_mid_load_fails_naming_its_signal(model: Path) -> None:
    """At once: on the death itself. The run has no time limit, and a model that has not all
    arrived never settles, so no other end is open to it: a run that missed the death never
    returns (the join's 60 s fail it); one that returns ended by it, and names it."""
    results: list[LoadResult] = []
    run = ProgramRun(open_model(model), parse_engine("safetensors"), "cold")
    runner = threading.Thread(target=lambda: results.append(run.run().result))
    runner.start()
    try:
        pid = _loading_child(os.getpid(), model)
        os.kill(pid, signal.SIGKILL)
    finally:
        runner.join(60)
    assert results, "the run never returned"
    assert not run.settled and not run.limit_reached  # its end was the death
    (result,) = results
    assert result.status == "failed"
    assert (result.error or "").startswith("killed by SIGKILL"), result.error


def _alive(pid: int) -> bool:
    """Not exited (a zombie has: it waits only for its new parent to reap it)."""
    return process_state(pid) not in ("Z", "gone")


_PARENT = """
import sys
from modelmon.core import open_model
from modelmon.core.configuration import parse_engine
from modelmon.core.runs import ProgramRun
print(ProgramRun(open_model(sys.argv[1]), parse_engine("safetensors")).run(), flush=True)
"""


def test_a_child_dies_with_its_parent(model: Path) -> None:
    """Frozen mid-load, the child could only go on if its parent's death left it alive. The
    kernel kills it with its parent (PR_SET_PDEATHSIG): polled for ``DIES_WITHIN_S``, which a
    child left alive always runs out and a killed one never comes near."""
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(model)], stdout=subprocess.DEVNULL
    )
    pid = _loading_child(parent.pid, model)
    try:
        os.kill(pid, signal.SIGSTOP)
        parent.kill()
        parent.wait(30)
        deadline = time.monotonic() + DIES_WITHIN_S
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.01)  # a state no event tells this process about: polled
        alive = _alive(pid)
    finally:
        for sig in (signal.SIGKILL, signal.SIGCONT):
            try:
                os.kill(pid, sig)  # an orphan left behind: ours to end
            except ProcessLookupError:
                break
    assert not alive, "the child outlived its parent"
