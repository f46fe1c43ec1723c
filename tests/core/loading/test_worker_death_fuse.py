"""A worker SIGKILLed mid-load on a real network FUSE mount (``rclone serve http`` + ``rclone
mount``, ``benchmarks.envs.fuse_mount``), for each family of strategies: the run ends as
failed naming the worker and its signal, the other worker is stopped long before it could have
finished, and no process is left.

The mount is slowed to ``BANDWIDTH`` so that the whole load would need many seconds: the other
worker still being far from done when the run ends is what shows it was stopped rather than
waited for, whatever the machine's load. Worker 1 is killed at a state, not after a sleep:
when its first batch of reads arrives in the parent (``on_message``), so it is reading from
the mount. A process killed while the filesystem has not answered a request of its exits only
once it does (the kernel waits for the answer): at the run's end no process may still be
running, and once the filesystem answers none may be left at all. Each load runs in a child
process of the test (``_LOAD``), so a run that never ends fails the test instead of hanging
the suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from modelmon.core.model.synth import write_safetensors_model

from ...fuse import mounted_or_skip

BANDWIDTH = "1M"  # bytes/s through the mount: the ~18 MB model needs ~18 s at this rate
# rclone answers each read as soon as its bytes arrive (no read-ahead buffer filling at the
# slow rate first), as a network filesystem answers its reads.
MOUNT_FLAGS = ("--bwlimit", BANDWIDTH, "--buffer-size", "0")
CHILD_TIMEOUT_S = 90.0
# One of each way of reading: planned reads (sharing work), whole tensors (sharing work),
# page faults through each worker's own mapping, page faults through one shared descriptor.
STRATEGIES = ("sequential", "pread", "mmap", "mmap-shared-fd")

_PROCESSES = """
import os, time
from multiprocessing import resource_tracker

def descendants():  # every descendant of this process but multiprocessing's resource tracker
    found, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:  # gone meanwhile
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as kids:
                    new = [int(k) for k in kids.read().split()]
            except OSError:
                continue
            found += new
            todo += new
    return [pid for pid in found if pid != resource_tracker._resource_tracker._pid]

def left_after_reaping():  # what is still there once the kernel let the killed ones go
    deadline = time.monotonic() + 30
    while descendants() and time.monotonic() < deadline:
        time.sleep(0.01)  # the run's reaper joins them as the kernel lets them go
    return descendants()
"""

_LOAD = (
    _PROCESSES
    + """
import json, os, signal, sys, time
from modelmon.core.loading.messages import ReadBatch
from modelmon.core.loading.processes import ending_code
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions

path, strategy, server = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = LoadOptions(workers=2, threads=1, chunk=64 << 10, discard=True, cache="keep")
killed = []

def kill_worker_1_once_reading(message):
    if killed or not isinstance(message, ReadBatch) or message.worker != 1 or message.prefetch:
        return
    if server:  # the filesystem stops answering: nothing in flight will be answered
        os.kill(server, signal.SIGSTOP)
    pid = run.worker_pids()[1]
    os.kill(pid, signal.SIGKILL)
    killed.append({"pid": pid, "at": time.monotonic(), "loaded": run.loaded_bytes})

def running():  # descendants neither gone nor bound to end (killed, or exiting)
    found = [pid for pid in descendants() if ending_code(pid) is None]
    return [pid for pid in found if os.path.exists(f"/proc/{pid}")]

run = LoadRun(path, strategy, options, on_message=kill_worker_1_once_reading)
try:
    result = run.run()
    ended = time.monotonic()
    still_running, present = running(), descendants()  # as the run ends
finally:
    if server:  # the filesystem answers again: what it held may now exit
        os.kill(server, signal.SIGCONT)
left = left_after_reaping()
print(json.dumps({
    "status": result.status,
    "error": result.error,
    "notes": list(result.notes),
    "killed": killed,
    "seconds_after_kill": ended - killed[0]["at"] if killed else None,
    "loaded": run.loaded_bytes,
    "total": run.model.total_bytes,
    "done": sorted(run.done),
    "running": still_running,
    "present": present,
    "left": left,
}))
"""
)


class Mount(NamedTuple):
    folder: Path
    rclone: int  # pid of ``rclone mount``: the filesystem's server


def _rclone_mount_pid(mount_point: Path) -> int:
    """The ``rclone mount`` child of this process that serves ``mount_point``."""
    with open(f"/proc/self/task/{os.getpid()}/children") as kids:
        for pid in kids.read().split():
            with open(f"/proc/{pid}/cmdline", "rb") as line:
                argv = line.read().split(b"\0")
            if argv[1:2] == [b"mount"] and os.fsencode(mount_point) in argv:
                return int(pid)
    raise AssertionError(f"no rclone mount of {mount_point} among this process's children")


@pytest.fixture(scope="module")
def slow_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mount]:
    """A folder of one ~18 MB model per case (hard links of one file: on the mount each is its
    own file, with its own page cache), mounted at ``BANDWIDTH``."""
    source = tmp_path_factory.mktemp("fuse-death-source")
    model = write_safetensors_model(source, layers=2, hidden=512, vocab=2048, dtype="F16")
    for name in (*STRATEGIES, "unanswered", "ranks"):
        os.link(model, source / f"{name}.safetensors")
    mount_point = tmp_path_factory.mktemp("fuse-death-mnt")
    with mounted_or_skip(source, mount_point, mount_flags=MOUNT_FLAGS) as mounted:
        yield Mount(mounted, _rclone_mount_pid(mounted))


def load_and_kill(path: Path, strategy: str, stop_server: int = 0) -> dict[str, Any]:
    try:
        done = subprocess.run(
            [sys.executable, "-c", _LOAD, str(path), strategy, str(stop_server)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,  # its workers die with it (PR_SET_PDEATHSIG)
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{strategy} on FUSE: the run never ended after worker 1 was killed")
    assert done.returncode == 0, done.stderr
    assert "leaked" not in done.stderr, done.stderr  # semaphores left to the resource tracker
    outcome: dict[str, Any] = json.loads(done.stdout)
    (kill,) = outcome["killed"]
    assert outcome["status"] == "failed", outcome
    error = outcome["error"]
    assert error.startswith(f"worker 1 (pid {kill['pid']}) was killed by SIGKILL"), error
    assert len(error.splitlines()) == 1
    # Stopped, not waited for: worker 0 never finished, and the run ended before even half of
    # the model had arrived (at BANDWIDTH that half alone needs ~9 s).
    assert outcome["done"] == [], outcome
    assert outcome["loaded"] < outcome["total"] / 2, outcome
    # At the run's end nothing runs; once the filesystem has answered, nothing is left.
    assert outcome["running"] == [], outcome
    assert outcome["left"] == [], outcome
    return outcome


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_worker_killed_while_reading_from_fuse_fails_the_run(
    slow_mount: Mount, strategy: str
) -> None:
    load_and_kill(slow_mount.folder / f"{strategy}.safetensors", strategy)


def test_a_run_ends_while_the_filesystem_holds_its_killed_workers(slow_mount: Mount) -> None:
    """The filesystem's server stops answering (SIGSTOP) just before worker 1 is killed: the
    workers' reads in flight hold them in the kernel, killed, until it answers again. The run
    still ends (nothing of it waits for them), says which were held, and they are reaped once
    the server answers (SIGCONT, after the run returned)."""
    outcome = load_and_kill(
        slow_mount.folder / "unanswered.safetensors", "sequential", slow_mount.rclone
    )
    held = [note for note in outcome["notes"] if "unanswered" in note]
    if outcome["present"]:  # some were still held when the run ended: the result says so
        assert held and all(str(pid) in held[0] for pid in outcome["present"]), outcome


_RANKS = (
    _PROCESSES
    + """
import json, os, signal, sys
from modelmon.core.loading.messages import ReadBatch
from modelmon.core.measuring.ranks import RanksRun
from modelmon.core.options import LoadOptions

options = LoadOptions(workers=2, threads=1, chunk=64 << 10, discard=True, cache="keep")
killed = []

def kill_a_worker_of_rank_1_once_it_reads(message):
    if killed or not isinstance(message, ReadBatch) or ranks.runs[1].loaded_bytes == 0:
        return
    pid = ranks.runs[1].worker_pids()[0]
    os.kill(pid, signal.SIGKILL)
    killed.append(pid)

kill = kill_a_worker_of_rank_1_once_it_reads
ranks = RanksRun(sys.argv[1], "sequential", options, ranks=2, on_message=kill)
result = ranks.run()
print(json.dumps({"killed": killed, "left": left_after_reaping(), **result.to_dict()}))
"""
)


def test_a_rank_whose_worker_is_killed_stops_the_other_ranks(slow_mount: Mount) -> None:
    """Two replica ranks load from the slow mount; a worker of rank 1 is killed once rank 1
    reads: the run fails naming rank 1's worker, and rank 0 is stopped, not left to finish."""
    path = slow_mount.folder / "ranks.safetensors"
    try:
        done = subprocess.run(
            [sys.executable, "-c", _RANKS, str(path)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the ranks never ended after a worker of rank 1 was killed")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    (pid,) = outcome["killed"]
    assert outcome["status"] == "failed", outcome
    assert outcome["error"].startswith(f"rank 1: worker 0 (pid {pid}) was killed by SIGKILL")
    zero, one = outcome["ranks"]
    assert one["status"] == "failed"
    assert (zero["status"], zero["error"]) == ("cancelled", "stopped: rank 1 failed"), zero
    assert outcome["left"] == [], outcome["left"]
