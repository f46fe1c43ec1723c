"""A worker killed (the OOM killer's SIGKILL) while it waits for go or mid-load, for every
strategy: the run ends as failed on the death, naming the worker and its signal, and no
process is left.

Each load runs in a child process of the test (``_LOAD``), so a run that never ends is a
failed test rather than a hung suite. The child kills worker 1 itself, at a state: while every
worker waits for go (the start gate runs then), or as soon as they were told to go
(``on_start``), with worker 0 frozen first, so that only the death can end the run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelmon.core.loading.runner import LoadRun
from modelmon.core.loading.strategies import FILE_STRATEGIES
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.system.cache import CacheState

CHILD_TIMEOUT_S = 60.0

_LOAD = """
import json, os, signal, sys, time
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions

path, strategy, moment = sys.argv[1], sys.argv[2], sys.argv[3]
options = LoadOptions(workers=2, threads=2, chunk=4096, discard=True, cache="keep")
killed = []

def kill_worker_1(run):
    # Worker 0 is frozen first: the load can never end by itself, only by the death.
    os.kill(run.worker_pids()[0], signal.SIGSTOP)
    pid = run.worker_pids()[1]
    os.kill(pid, signal.SIGKILL)
    killed.append(pid)

def asleep(pid):
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "S"

def gate(state):  # every worker is ready: killed once it sleeps, waiting for go
    deadline = time.monotonic() + 30
    while not asleep(run.worker_pids()[1]) and time.monotonic() < deadline:
        time.sleep(0.001)
    kill_worker_1(run)
    return True

if moment == "waiting for go":
    run = LoadRun(path, strategy, options, start_gate=gate)
else:
    run = LoadRun(path, strategy, options, on_start=kill_worker_1)
result = run.run()
pid = killed[0]
alive = [p for p in run.worker_pids().values() if os.path.exists(f"/proc/{p}")]
print(json.dumps({"status": result.status, "error": result.error, "pid": pid, "alive": alive}))
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~120 MB: read 4 KiB at a time, a worker's share takes far longer than the instant after
    go that it is killed in, whatever the strategy."""
    folder = tmp_path_factory.mktemp("death")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096, dtype="F16")


# Every strategy waits for go the same way: one that shares work, one that receives descriptors.
CASES = [(strategy, "loading") for strategy in sorted(FILE_STRATEGIES)] + [
    ("sequential", "waiting for go"),
    ("mmap-shared-fd", "waiting for go"),
]


@pytest.mark.parametrize(("strategy", "moment"), CASES)
def test_a_killed_worker_fails_the_run_at_once(model: Path, strategy: str, moment: str) -> None:
    """At once: on the death itself, not when the load ends. Worker 0 is frozen (SIGSTOP)
    before worker 1 is killed, so the load can never end by itself: a run that waited for
    it, or for the dead worker's result, never ends (``CHILD_TIMEOUT_S`` fails it), and
    one that ends has seen the death, which it names."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LOAD, str(model), strategy, moment],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,  # its workers die with it (PR_SET_PDEATHSIG)
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{strategy}: the run never ended after worker 1 was killed {moment}")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed", outcome
    error = outcome["error"]
    assert error.startswith(f"worker 1 (pid {outcome['pid']}) was killed by SIGKILL"), error
    assert len(error.splitlines()) == 1
    assert outcome["alive"] == [], f"workers left running: {outcome['alive']}"
    # multiprocessing's resource tracker warns of semaphores a run left behind: none exist.
    assert "leaked" not in done.stderr, done.stderr


def test_a_worker_dying_while_the_run_waits_to_start_halts_the_wait(model: Path) -> None:
    """The cache preparation (seconds on FUSE: eviction, a settle for the host's memory
    reporting) or another node's arrival is waited for with the workers ready: a worker that
    dies meanwhile halts the wait, and the run never says go."""
    halted: list[bool] = []

    def gate(state: CacheState) -> bool:
        os.kill(run.worker_pids()[1], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not run.halted and time.monotonic() < deadline:
            time.sleep(0.01)  # the state comes from the run's own watcher
        halted.append(run.halted)
        return True

    run = LoadRun(model, "sequential", LoadOptions(workers=2, discard=True), start_gate=gate)
    result = run.run()
    assert halted == [True]
    assert result.status == "failed" and run.t0_ns == 0  # never told to go
    assert (result.error or "").startswith(f"worker 1 (pid {run.worker_pids()[1]}) was killed")


MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")  # cgroup v1's memory controller

_OOM_LOAD = """
import json, sys
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions
options = LoadOptions(workers=2, threads=1, cache="keep")
result = LoadRun(sys.argv[1], "sequential", options, memory_limit=1 << 40).run()
print(json.dumps({"status": result.status, "error": result.error}))
"""


def test_a_worker_the_oom_killer_ends_is_said_to_be_its(model: Path) -> None:
    """A real OOM kill: the load runs in a memory cgroup too small for its arrays (its own
    check of the RAM is told there is plenty), so the kernel kills the largest worker."""
    if not (MEMORY_CGROUPS / "memory.limit_in_bytes").exists() or os.geteuid() != 0:
        pytest.skip("needs root and cgroup v1's memory controller")
    cgroup = MEMORY_CGROUPS / f"modelmon-test-oom-{os.getpid()}"
    cgroup.mkdir()
    try:
        (cgroup / "memory.limit_in_bytes").write_text(str(80 << 20))
        enter = f'echo $$ > "{cgroup / "cgroup.procs"}" && exec "$@"'
        done = subprocess.run(
            ["sh", "-c", enter, "sh", sys.executable, "-c", _OOM_LOAD, str(model)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
    finally:
        deadline = time.monotonic() + 30
        while (cgroup / "cgroup.procs").read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.01)  # multiprocessing's resource tracker exits after the load
        cgroup.rmdir()
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed"
    assert "was killed by SIGKILL: the kernel's OOM killer ended it" in outcome["error"], outcome


_STOPPED_LOAD = """
import json, os, signal, sys
from modelmon.core.loading import worker_pipes
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions

worker_pipes.STOPPED_LIMIT_S = 1.0
options = LoadOptions(workers=2, threads=2, chunk=4096, discard=True, cache="keep")
stopped = []

def stop_worker_0(run):
    pid = run.worker_pids()[0]
    os.kill(pid, signal.SIGSTOP)
    stopped.append(pid)

run = LoadRun(sys.argv[1], "sequential", options, on_start=stop_worker_0)
result = run.run()
alive = [p for p in run.worker_pids().values() if os.path.exists(f"/proc/{p}")]
said = {"status": result.status, "error": result.error, "pid": stopped[0], "alive": alive}
print(json.dumps(said))
"""


def test_a_stopped_worker_fails_the_run_with_its_name(model: Path) -> None:
    """A worker stopped mid-load (SIGSTOP: a debugger, a freezer) holds the load up for as
    long as it stays so: the run fails past ``STOPPED_LIMIT_S`` (1 s here), naming it, and
    the stopped worker is ended with the others."""
    done = subprocess.run(
        [sys.executable, "-c", _STOPPED_LOAD, str(model)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "failed", outcome
    assert outcome["error"].startswith(
        f"worker 0 (pid {outcome['pid']}) was stopped (SIGSTOP: a debugger, a freezer?) for 1 s"
    ), outcome["error"]
    assert outcome["alive"] == []
