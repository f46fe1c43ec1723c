"""A one-reader ranks run killed at any moment leaves nothing: its shared copy is a memfd,
freed with the last process that holds it, and those die with the run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from ...core.loading.sparse import sparse_model
from ...core.system.test_memory_cgroup import REAL
from ...memory_cgroup import run_cgroups_of

MiB = 1 << 20
COPY = "memfd:modelmon-shared-copy"


def copies_held() -> dict[int, set[int]]:
    """Processes holding a one-reader's shared copy (a descriptor on it, or a mapping), and
    which copies: {pid: the copies' inode numbers}. Other runs on this machine (another
    test's) hold copies of their own: a run's are told apart by their inodes."""
    found: dict[int, set[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        inodes: set[int] = set()
        try:
            for fd in os.listdir(f"/proc/{name}/fd"):
                if COPY in os.readlink(f"/proc/{name}/fd/{fd}"):
                    inodes.add(os.stat(f"/proc/{name}/fd/{fd}").st_ino)
            with open(f"/proc/{name}/maps") as maps:
                inodes |= {int(line.split()[4]) for line in maps if COPY in line}
        except OSError:
            continue
        if inodes:
            found[int(name)] = inodes
    return found


@REAL
def test_a_sigkilled_one_reader_run_leaves_no_copy_and_no_process(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    model = sparse_model(tmp_path / "model", tensors=8, tensor_bytes=32 * MiB)
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "modelmon",
            "load",
            str(model),
            "--ranks",
            "3",
            "--ranks-mode",
            "one-reader",
            "--threads",
            "1",
            "--chunk-mib",
            "1",
            "--memory-limit",
            "1Gi",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    members: list[psutil.Process] = []
    copies: set[int] = set()  # the run's copy: its inode
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not members:
        for cgroup in run_cgroups_of(run.pid):
            try:
                pids = [int(p) for p in (cgroup / "cgroup.procs").read_text().split()]
            except FileNotFoundError:  # removed since it was listed
                continue
            if len(pids) < 4:  # not yet the ranks and the reader's worker
                continue
            held = copies_held()
            copies = set().union(*(held.get(pid, set()) for pid in pids))
            if copies:
                members = [psutil.Process(pid) for pid in pids]
                break
        time.sleep(0.01)
    assert members, "the ranks never ran"
    run.kill()
    run.wait(timeout=30)
    _, alive = psutil.wait_procs(members, timeout=30)  # they end with the run
    assert not alive, f"left running: {alive}"
    # The copy went with its last holder.
    assert not [pid for pid, held in copies_held().items() if held & copies]
    assert not [n for n in os.listdir("/dev/shm") if "modelmon" in n]
    deadline = time.monotonic() + 30
    while run_cgroups_of(run.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # the guardian's work, in another process
    assert run_cgroups_of(run.pid) == []
