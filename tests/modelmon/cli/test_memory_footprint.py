"""What ``modelmon load`` takes from the machine it measures, run as users run it, inside a
memory cgroup of a few hundred MiB that the test makes (and removes).

The cgroup's own counters say exactly what modelmon's processes took: its peak usage is
every page they were charged (their memory and the page cache they filled), which is what
the machine's free memory lost to them, whatever the other engineers' processes on this
shared machine do to MemFree meanwhile. A peak under the limit says that nothing in it
ever met the limit, so nothing it holds was reclaimed, swapped or killed for room (this
kernel leaves v1's ``memory.failcnt`` at 0 even then).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from modelmon.core.system import evict, residency_of

from ...core.loading.sparse import sparse_model
from ...memory_cgroup import MemoryCgroup, memory_cgroup

MIB = 1 << 20
BOUND = 512 * MIB  # the most one streaming load may take from the machine, all told


def load_in(cgroup: MemoryCgroup, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "modelmon", "load", *args, "--json"]
    return subprocess.run(
        cgroup.command(argv), capture_output=True, text=True, timeout=300, check=False
    )


def test_streaming_a_model_larger_than_its_cgroup_takes_under_512_mib(tmp_path: Path) -> None:
    model = sparse_model(tmp_path, tensors=16, tensor_bytes=64 * MIB)  # 1 GiB
    with memory_cgroup(768 * MIB) as cgroup:
        done = load_in(cgroup, str(model), "--discard", "--cache", "cold")
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert result["status"] == "ok" and result["bytes"] == 1 << 30
        assert result["dropped_behind"] is not None, result["notes"]
        assert result["process_tree_peak_rss"] < BOUND
        # Everything its processes took from the machine, page cache included.
        assert cgroup.peak < BOUND, f"{cgroup.peak / MIB:.0f} MiB charged at the peak"
        assert not cgroup.met_limit and cgroup.oom_kills == 0


# The server maps the model it serves and has touched every page, as llama.cpp's server
# does: pages that memory pressure can reclaim, but that a host's proactive reclaim of idle
# unmapped cache (a DAMON "pageout" scheme in /sys/kernel/mm/damon, on this machine) does not
# take, with modelmon or without it.
HOG = """
import mmap, os, sys
size, cached = int(sys.argv[1]), sys.argv[2]
held = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for offset in range(0, size, mmap.PAGESIZE):
    held[offset] = 1
with open(cached, "rb") as model:
    served = mmap.mmap(model.fileno(), 0, prot=mmap.PROT_READ)
touched = sum(served[offset] for offset in range(0, len(served), mmap.PAGESIZE))
print("ready", flush=True)
sys.stdin.readline()
status = open("/proc/self/status").read()
sizes = [line.split()[1] for line in status.splitlines() if line.startswith(("VmRSS", "VmSwap"))]
print(" ".join(sizes))
"""


def test_a_load_beside_a_process_holding_most_of_the_memory_leaves_it_alone(
    tmp_path: Path,
) -> None:
    """A server holds 576 MiB and keeps its 64 MiB model mapped in a 1 GiB cgroup, and
    modelmon streams a 1 GiB model beside it, priming on: the server keeps all its memory
    and its cache, and nothing in the cgroup ever meets the limit, so nothing is reclaimed,
    swapped or killed. The room left, 384 MiB, is inside the bound a streaming load keeps to
    (about 200 MiB measured on an idle machine; readers slowed by a busy one fill more before
    they drop it) and well under the hog's own size."""
    served = tmp_path / "served.bin"
    with open(served, "wb") as out:
        out.write(os.urandom(64 * MIB))
        os.fsync(out.fileno())  # clean pages, as a server's cached model is
    evict([served])  # so that the server's own read brings them in, charged to it
    model = sparse_model(tmp_path, tensors=16, tensor_bytes=64 * MIB)
    with (
        memory_cgroup(1024 * MIB) as cgroup,
        subprocess.Popen(
            cgroup.command([sys.executable, "-c", HOG, str(576 * MIB), str(served)]),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        ) as hog,
    ):  # its pipes closed and the process reaped on every way out
        try:
            assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
            assert residency_of([served]) == 1.0
            args = ("--discard", "--cache", "cold", "--prime-memory", "on")
            done = load_in(cgroup, str(model), *args)
            assert done.returncode == 0, done.stderr
            result = json.loads(done.stdout)
            assert result["status"] == "ok" and result["dropped_behind"] is not None
            assert result["cache"]["primed"]["bytes"] == 0  # it holds no arrays
            assert hog.poll() is None, "the server was killed"
            peak = f"{cgroup.peak / MIB:.0f} MiB charged at the peak"
            assert not cgroup.met_limit and cgroup.oom_kills == 0, peak
            assert residency_of([served]) == 1.0, f"the server's cached model was evicted; {peak}"
            assert hog.stdin is not None
            hog.stdin.write("done\n")
            hog.stdin.flush()
            rss_kib, swap_kib = (int(x) for x in hog.stdout.readline().split())
            assert rss_kib * 1024 >= 576 * MIB and swap_kib == 0
        finally:
            if hog.poll() is None:
                hog.kill()
