"""Memory cgroups modelmon makes for a run: the v2 files read from a fake cgroup, then real v1
cgroups on this machine (root, cgroup v1: skipped with the reason elsewhere)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from modelmon.core.options import parse_size
from modelmon.core.system import memory_cgroup
from modelmon.core.system.cgroup_guardian import cgroup_guardian
from modelmon.core.system.memory_cgroup import (
    CgroupUnavailable,
    MemoryCgroup,
    limited,
    pressure_total_us,
    remove_stale,
    start_ticks,
    stat_values,
)
from modelmon.core.system.memory_limit import (
    PROCESS_BYTES,
    MemoryLimit,
    oom_failure,
    planned_only,
    size_text,
    ways_under,
)

MiB = 1 << 20


def real_cgroup_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root to make memory cgroups"
    return memory_cgroup.unavailable()


def plan_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No memory cgroup can be made for the test: a limit is only planned with, as before
    modelmon ran under one (a test of planning, with limits no Python worker lives under)."""

    def refuse() -> tuple[Path, int]:
        raise CgroupUnavailable("planned only, for this test")

    monkeypatch.setattr(memory_cgroup, "own_parent", refuse)


REAL = pytest.mark.skipif(
    real_cgroup_reason() is not None, reason=f"no memory cgroup here: {real_cgroup_reason()}"
)


def test_kubernetes_sizes_parse() -> None:
    assert parse_size("16Gi") == 16 << 30
    assert parse_size("512Mi") == 512 * MiB
    assert parse_size("1500Mi") == 1500 * MiB
    assert parse_size("1GiB") == 1 << 30
    assert size_text(16 << 30) == "16 GiB"
    assert size_text(1500 * MiB) == "1500 MiB"


def test_stat_and_pressure_parsing() -> None:
    assert stat_values("anon 10\nfile 20\nbad x\n") == {"anon": 10, "file": 20}
    psi = "some avg10=0.00 avg60=0.00 avg300=0.00 total=1500000\nfull total=9\n"
    assert pressure_total_us(psi) == 1500000
    assert pressure_total_us(None) is None


def fake_v2(directory: Path, anon: int, file: int, peak: int, kills: int, stall_us: int) -> None:
    (directory / "memory.stat").write_text(
        f"anon {anon}\nfile {file}\nfile_mapped {file // 2}\nworkingset_refault_file 3\n"
    )
    (directory / "memory.current").write_text(f"{anon + file}\n")
    (directory / "memory.peak").write_text(f"{peak}\n")
    (directory / "memory.events").write_text(f"low 0\nhigh 0\nmax 7\noom 1\noom_kill {kills}\n")
    (directory / "memory.pressure").write_text(f"some avg10=1.0 total={stall_us}\n")


def test_v2_record_reads_peak_split_events_and_pressure(tmp_path: Path) -> None:
    fake_v2(tmp_path, anon=100, file=50, peak=150, kills=0, stall_us=1_000_000)
    cgroup = MemoryCgroup(tmp_path, 2, 1 << 30)
    cgroup.sample()
    fake_v2(tmp_path, anon=300, file=10, peak=400, kills=1, stall_us=3_500_000)
    (tmp_path / "memory.stat").write_text(
        "anon 300\nfile 10\nfile_mapped 5\nworkingset_refault_file 13\n"
    )
    record = cgroup.record(arrived_beyond=4096)
    assert record.version == 2
    assert (record.anon_peak_bytes, record.cache_peak_bytes, record.mapped_peak_bytes) == (
        300,
        50,
        25,
    )
    assert record.peak_bytes == 400
    assert record.reread_bytes == max(10 * os.sysconf("SC_PAGE_SIZE"), 4096)
    assert record.oom_killed and record.oom_kills == 1
    assert record.limit_hits == 7
    assert record.pressure_stall_s == pytest.approx(2.5)


def test_words_name_the_limit_and_what_held_it() -> None:
    record = MemoryLimit(
        1 << 30,
        1 << 30,
        900 * MiB,
        300 * MiB,
        0,
        920 * MiB,
        100 * MiB,
        0,
        True,
        1,
        3,
        None,
        "/x",
        1,
    )
    assert "at the memory limit of 1 GiB" in record.oom_text()
    assert "920 MiB anonymous and 100 MiB page cache then" in record.oom_text()
    failure = oom_failure("worker 0 was killed by SIGKILL", record)
    assert failure is not None and failure.startswith("worker 0 was killed by SIGKILL; ")
    assert oom_failure(None, None) is None
    assert "planning with 1500 MiB only" in planned_only("not root", 1500 * MiB)


def test_unavailable_where_no_cgroup_can_be_made(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="cannot make a cgroup in"):
        MemoryCgroup.create(64 * MiB, parent=(tmp_path / "missing", 1))


def dead_pid() -> tuple[int, int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    ticks = None
    while ticks is None:  # its stat is there from the fork on
        ticks = start_ticks(process.pid)
    process.kill()
    process.wait()
    return process.pid, ticks


def test_stale_cgroups_of_dead_owners_go_live_ones_stay(tmp_path: Path) -> None:
    pid, ticks = dead_pid()
    stale = tmp_path / f"modelmon-{pid}-{ticks}-0"
    reused = tmp_path / f"modelmon-{os.getpid()}-{(start_ticks(os.getpid()) or 0) + 1}-0"
    live = tmp_path / f"modelmon-{os.getpid()}-{start_ticks(os.getpid())}-3"
    other = tmp_path / "modelmon-test-1-2"
    for directory in (stale, reused, live, other):
        directory.mkdir()
    assert sorted(remove_stale(tmp_path)) == sorted([stale, reused])
    assert live.is_dir() and other.is_dir()


def allocate(megabytes: int) -> list[str]:
    return [sys.executable, "-c", f"x = bytearray({megabytes} << 20); print(len(x))"]


@REAL
def test_a_child_runs_under_the_limit_and_its_oom_kill_is_named() -> None:
    with limited(64 * MiB) as cgroup:
        assert isinstance(cgroup, MemoryCgroup)
        process = subprocess.Popen(
            allocate(256), preexec_fn=cgroup.join_in_child(), stdout=subprocess.DEVNULL
        )
        cgroup.child_started()
        assert process.wait() == -9
        record = cgroup.record()
    assert record.oom_killed and record.oom_kills >= 1
    assert record.limit_bytes == 64 * MiB
    assert 0 < record.peak_bytes <= 64 * MiB
    assert record.anon_peak_bytes > 16 * MiB
    assert not Path(record.cgroup).exists()


@REAL
def test_page_cache_is_charged_and_rereads_are_counted(tmp_path: Path) -> None:
    data = tmp_path / "weights.bin"
    with open(data, "wb") as file:
        for _ in range(96):
            file.write(os.urandom(MiB))
        os.fsync(file.fileno())
    descriptor = os.open(data, os.O_RDONLY)
    os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(descriptor)
    reader = f"for _ in range(3):\n    with open({str(data)!r}, 'rb') as f:\n"
    reader += "        while f.read(1 << 20): pass\n"
    with limited(48 * MiB) as cgroup:
        assert isinstance(cgroup, MemoryCgroup)
        process = subprocess.Popen(
            [sys.executable, "-c", reader], preexec_fn=cgroup.join_in_child()
        )
        cgroup.child_started()
        assert process.wait() == 0
        record = cgroup.record()
    assert not record.oom_killed
    assert record.peak_bytes <= 48 * MiB
    assert record.cache_peak_bytes > 8 * MiB  # the reads' page cache was charged here
    assert record.reread_bytes > 0  # read three times through a cache half its size


@REAL
def test_the_cgroup_goes_on_an_exception_and_stale_ones_go_with_the_next() -> None:
    with pytest.raises(KeyboardInterrupt), limited(32 * MiB) as cgroup:
        assert isinstance(cgroup, MemoryCgroup)
        made = cgroup.directory
        raise KeyboardInterrupt
    assert not made.exists()
    pid, ticks = dead_pid()
    stale = made.parent / f"modelmon-{pid}-{ticks}-0"
    stale.mkdir()  # as a run killed with SIGKILL leaves it
    with limited(32 * MiB) as cgroup:
        assert isinstance(cgroup, MemoryCgroup)
        assert not stale.exists()


def test_each_way_of_loading_against_a_limit_before_loading() -> None:
    model = 1100 * MiB  # the 1.1 GB shard under 1500 MiB
    ways = {way["way"]: way for way in ways_under(model, 1500 * MiB)}
    assert [ways[w]["fits"] for w in ("copy", "copy+cache", "mapped", "streamed")] == [
        True,
        False,
        True,
        True,
    ]
    assert ways["copy+cache"]["needs_bytes"] == 2 * model + PROCESS_BYTES
    tight = {way["way"]: way["fits"] for way in ways_under(model, 1 << 30)}
    assert tight == {"copy": False, "copy+cache": False, "mapped": False, "streamed": True}


def test_v2_cgroups_go_where_the_memory_controller_is_delegated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaf = tmp_path / "user.slice" / "session.scope"
    leaf.mkdir(parents=True)
    dirs = [(leaf, 2), (leaf.parent, 2), (tmp_path, 2)]
    monkeypatch.setattr(memory_cgroup, "cgroup_dirs", lambda mounts, text: dirs)
    (leaf / "cgroup.subtree_control").write_text("")
    (leaf.parent / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert memory_cgroup.own_parent() == (leaf.parent, 2)  # the innermost that hands it down
    (leaf.parent / "cgroup.subtree_control").write_text("cpu\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    assert memory_cgroup.own_parent() == (leaf, 2)  # enabled on its own leaf, which may
    assert (leaf / "cgroup.subtree_control").read_text() == "+memory"
    (leaf / "cgroup.subtree_control").unlink()
    (leaf / "cgroup.subtree_control").mkdir()  # a write that fails, as EBUSY would
    with pytest.raises(CgroupUnavailable, match="memory controller is not delegated"):
        memory_cgroup.own_parent()
    monkeypatch.setattr(memory_cgroup, "cgroup_dirs", lambda mounts, text: [])
    with pytest.raises(CgroupUnavailable, match="no memory cgroup controller"):
        memory_cgroup.own_parent()


def test_a_v2_cgroup_is_made_beside_modelmon_with_its_limit(tmp_path: Path) -> None:
    made = MemoryCgroup.create(512 * MiB, parent=(tmp_path, 2))
    assert made.directory.parent == tmp_path and made.directory.name.startswith("modelmon-")
    assert (made.directory / "memory.max").read_text() == str(512 * MiB)
    memory_cgroup._live.discard(made)  # a fake: nothing to remove at exit


# In a run's cgroup, a process that takes a second to end when its parent dies, as a watched
# command may on the SIGTERM it gets then (PR_SET_PDEATHSIG); it says when that is set.
STRAGGLER = """
import ctypes, os, signal, sys, time
def end(*_):
    time.sleep(1.0)
    os._exit(0)
signal.signal(signal.SIGTERM, end)
ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    os._exit(0)
print("ready", flush=True)
time.sleep(600)
"""
# A run under a limit: its cgroup (and its guardian), the straggler in it; then it waits.
OWNER = """
import os, subprocess, sys, time
from modelmon.core.system.memory_cgroup import limited
with limited(64 << 20) as cgroup:
    straggler = subprocess.Popen(
        [sys.executable, "-c", sys.argv[1], str(os.getpid())],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=cgroup.join_in_child(),
    )
    cgroup.child_started()
    assert straggler.stdout.readline() == "ready\\n"
    print(cgroup.directory, straggler.pid, flush=True)
    time.sleep(600)
"""


@REAL
def test_a_killed_runs_guardian_removes_its_cgroup_once_its_last_process_is_gone() -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, STRAGGLER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        where, pid = owner.stdout.readline().split()
        directory, straggler = Path(where), psutil.Process(int(pid))
        assert (directory / "cgroup.procs").read_text().split() == [pid]
        owner.kill()
        owner.wait()
        straggler.wait(timeout=30)  # a second after its parent, while its cgroup is kept
        deadline = time.monotonic() + 30
        while directory.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # the guardian's work, in another process: polled
        assert not directory.exists()
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()


def test_a_guardian_guards_only_a_cgroup_of_this_process(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a cgroup of this process's"):
        cgroup_guardian(tmp_path / f"modelmon-{os.getpid() + 1}-5-0")
