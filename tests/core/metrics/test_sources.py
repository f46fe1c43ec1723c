"""Each source on fakes shaped like psutil's results: values right, failures become gaps."""

from __future__ import annotations

import math
from pathlib import Path

import psutil
import pytest

from modelmon.core.metrics import memory as memory_module
from modelmon.core.metrics import procfs
from modelmon.core.metrics.cpu import CpuSource
from modelmon.core.metrics.memory import MemorySource, parse_meminfo_fields
from modelmon.core.metrics.throughput import LoadThroughputSource
from modelmon.core.metrics.worker_io import WorkerIoSource, hit_estimate

from .fakes import (
    FakeSystem,
    cpu_times,
    denied,
    gone,
    pio_bsd,
    scputimes_macos,
    svmem,
    svmem_macos,
    target,
    zombie,
)

MS = 1_000_000


@pytest.fixture
def system(monkeypatch: pytest.MonkeyPatch) -> FakeSystem:
    """Workers and system CPU read through psutil (as off Linux), which the fakes stand in for;
    test_procfs.py reads the real /proc files."""
    fake = FakeSystem()
    monkeypatch.setattr(procfs, "have_procfs", lambda: False)
    monkeypatch.setattr(psutil, "Process", fake.process_class())
    return fake


def nan(value: float) -> bool:
    return math.isnan(value)


# --- cpu ---------------------------------------------------------------------------------------


def test_cpu_percentages_come_from_deltas_of_cpu_times(monkeypatch, system):
    times = iter([cpu_times(user=10, idle=80, iowait=10), cpu_times(user=13, idle=85, iowait=12)])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(times))
    system.busy = {101: 1.0, 102: 2.0}
    source = CpuSource(target(2, {0: 101, 1: 102}))
    assert [s.name for s in source.specs()] == [
        "iowait_pct",
        "cpu_pct",
        "worker_cpu_pct.0",
        "worker_cpu_pct.1",
        "workers_cpu_pct",
    ]
    first = source.sample(0)
    assert all(nan(v) for v in first.values())  # baselines only
    system.busy = {101: 1.05, 102: 2.1}
    values = source.sample(100 * MS)
    assert values["iowait_pct"] == pytest.approx(20.0)  # 2 of 10 s of CPU time
    assert values["cpu_pct"] == pytest.approx(30.0)  # 3 of 10 s busy
    assert values["worker_cpu_pct.0"] == pytest.approx(50.0)  # 0.05 s in 0.1 s: half a core
    assert values["worker_cpu_pct.1"] == pytest.approx(100.0)
    assert values["workers_cpu_pct"] == pytest.approx(150.0)
    assert source.failing(at_least=1) is None


def test_cpu_without_iowait_on_another_os_gives_an_iowait_gap(monkeypatch, system):
    times = iter([scputimes_macos(10, 0, 0, 90), scputimes_macos(14, 0, 1, 95)])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(times))
    source = CpuSource(target(0))
    source.sample(0)
    values = source.sample(100 * MS)
    assert nan(values["iowait_pct"])
    assert values["cpu_pct"] == pytest.approx(50.0)
    assert values["workers_cpu_pct"] == 0.0  # no workers yet: none use CPU


def test_system_cpu_that_always_fails_is_reported_while_the_workers_still_measure(
    monkeypatch, system
):
    def broken() -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(psutil, "cpu_times", broken)
    system.busy = {101: 1.0}
    source = CpuSource(target(1, {0: 101}))
    for step in range(3):
        values = source.sample(step * 100 * MS)
        system.busy[101] += 0.02
    assert nan(values["iowait_pct"]) and nan(values["cpu_pct"])
    assert values["worker_cpu_pct.0"] == pytest.approx(20.0)
    assert source.failing() == (
        "system CPU times failed on every sample (OSError: [Errno 5] Input/output error)"
    )


@pytest.mark.parametrize("error", [denied, gone, zombie])
def test_a_worker_that_cannot_be_read_is_a_gap(monkeypatch, system, error):
    monkeypatch.setattr(psutil, "cpu_times", lambda: cpu_times(1, 1, 1))
    system.busy = {101: 1.0, 102: 1.0}
    system.raises = {102: error}
    source = CpuSource(target(2, {0: 101, 1: 102}))
    for step in range(4):
        values = source.sample(step * 100 * MS)
        system.busy[101] += 0.03
    assert values["worker_cpu_pct.0"] == pytest.approx(30.0)
    assert nan(values["worker_cpu_pct.1"])
    if error is denied:  # unknown: the total cannot be known, and it is reported
        assert nan(values["workers_cpu_pct"])
        assert source.failing() == (
            "worker CPU times of worker 1 failed on every sample (AccessDenied: (pid=102))"
        )
    else:  # exited: uses no CPU, is not asked again, and is nothing to report
        assert values["workers_cpu_pct"] == pytest.approx(30.0)
        assert system.calls.count(102) == 1
        assert source.failing(at_least=1) is None


def test_a_replaced_worker_starts_a_new_baseline(monkeypatch, system):
    monkeypatch.setattr(psutil, "cpu_times", lambda: cpu_times(1, 1, 1))
    pids = {0: 101}
    source = CpuSource(target(1))
    source.target.pids = lambda: dict(pids)
    system.busy = {101: 5.0, 202: 0.5}
    source.sample(0)
    pids[0] = 202  # less CPU than the old process: not a negative rate, a new baseline
    assert nan(source.sample(100 * MS)["worker_cpu_pct.0"])
    system.busy[202] = 0.51
    assert source.sample(200 * MS)["worker_cpu_pct.0"] == pytest.approx(10.0)
    assert system.made == [101, 202]  # one Process per pid, not one per sample


# --- memory ------------------------------------------------------------------------------------


MEMINFO = b"""MemTotal:       24684096 kB
MemFree:        23321832 kB
MemAvailable:   24259204 kB
Buffers:           11748 kB
Cached:          1196588 kB
SReclaimable:      65536 kB
"""


def test_meminfo_gives_available_and_cached_without_slab():
    assert parse_meminfo_fields(MEMINFO) == {
        "available": 24259204 * 1024.0,
        "cached": 1196588 * 1024.0,
    }


def test_memory_reads_meminfo_and_worker_rss(monkeypatch, system, tmp_path: Path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_bytes(MEMINFO)
    monkeypatch.setattr(memory_module, "MEMINFO", str(meminfo))
    monkeypatch.setattr(psutil, "virtual_memory", lambda: pytest.fail("meminfo was enough"))
    system.rss = {101: 1000, 102: 2000}
    source = MemorySource(target(3, {0: 101, 1: 102}))
    values = source.sample(0)
    source.close()
    assert values == {
        "worker_rss.0": 1000.0,
        "worker_rss.1": 2000.0,
        "workers_rss": 3000.0,
        "workers_mapped": 0.0,
        "mem_available": 24259204 * 1024.0,
        "page_cache": 1196588 * 1024.0,
    }


def test_without_meminfo_psutil_is_asked_and_a_missing_cached_is_a_gap(monkeypatch, system):
    monkeypatch.setattr(memory_module, "MEMINFO", "/nonexistent/meminfo")
    monkeypatch.setattr(
        psutil, "virtual_memory", lambda: svmem_macos(16e9, 8e9, 50.0, 8e9, 1e9, 4e9, 3e9, 1e9)
    )
    values = MemorySource(target(0)).sample(0)
    assert values["mem_available"] == 8e9 and nan(values["page_cache"])
    monkeypatch.setattr(
        psutil, "virtual_memory", lambda: svmem(16e9, 8e9, 50.0, 8e9, 1e9, 4e9, 3e9, 0, 2e9, 0, 1e8)
    )
    assert MemorySource(target(0)).sample(0)["page_cache"] == 2e9


def test_memory_failures_are_gaps_and_reported_when_constant(monkeypatch, system):
    monkeypatch.setattr(memory_module, "MEMINFO", "/nonexistent/meminfo")

    def denied_everything() -> None:
        raise psutil.AccessDenied()

    monkeypatch.setattr(psutil, "virtual_memory", denied_everything)
    system.rss = {101: 1000}
    system.raises = {102: zombie}
    source = MemorySource(target(2, {0: 101, 1: 102}))
    for step in range(3):
        values = source.sample(step)
    assert "mem_available" not in values and "page_cache" not in values  # gaps
    assert values["worker_rss.0"] == 1000.0 and nan(values["worker_rss.1"])
    assert values["workers_rss"] == 1000.0  # a zombie holds no memory
    assert source.failing() == "system memory failed on every sample (AccessDenied)"


# --- worker IO ---------------------------------------------------------------------------------


def test_worker_io_counters_totals_and_the_cache_hit_estimate(system):
    system.io = {101: (0, 1 << 20), 102: (0, 0)}
    source = WorkerIoSource(target(2, {0: 101, 1: 102}))
    first = source.sample(0)
    assert first["read_chars"] == 1 << 20 and nan(first["cache_hit_estimate"])  # baseline
    # Worker 0 reads 4 MiB through read(), 1 MiB of it from disk; worker 1 reads 4 MiB cold.
    system.io = {101: (1 << 20, 5 << 20), 102: (4 << 20, 4 << 20)}
    values = source.sample(100 * MS)
    assert values["worker_read_bytes.0"] == 1 << 20 and values["worker_read_chars.0"] == 5 << 20
    assert values["read_bytes"] == 5 << 20 and values["read_chars"] == 9 << 20
    assert values["cache_hit_estimate"] == pytest.approx(1 - 5 / 8)


def test_mmap_reads_make_no_read_calls_so_the_estimate_is_a_gap():
    assert nan(hit_estimate(read_bytes_change=64 << 20, read_chars_change=120))  # faults
    assert hit_estimate(read_bytes_change=3 << 20, read_chars_change=2 << 20) == 0.0  # readahead
    assert hit_estimate(read_bytes_change=0, read_chars_change=8 << 20) == 1.0


def test_an_exited_worker_keeps_its_bytes_in_the_totals(system):
    system.io = {101: (4096, 8192), 102: (100, 200)}
    pids = {0: 101, 1: 102}
    source = WorkerIoSource(target(2))
    source.target.pids = lambda: dict(pids)
    source.sample(0)
    system.raises = {101: gone}
    values = source.sample(100 * MS)
    assert nan(values["worker_read_bytes.0"])
    assert values["read_bytes"] == 4196 and values["read_chars"] == 8392
    assert source.failing(at_least=1) is None


def test_io_counters_without_read_chars_give_chars_gaps(system):
    system.io, system.io_shape = {101: (4096, 0)}, pio_bsd
    source = WorkerIoSource(target(1, {0: 101}))
    source.sample(0)
    values = source.sample(100 * MS)
    assert values["worker_read_bytes.0"] == 4096 and values["read_bytes"] == 4096
    assert nan(values["worker_read_chars.0"]) and nan(values["read_chars"])
    assert nan(values["cache_hit_estimate"])


def test_worker_io_always_denied_is_reported(system):
    system.io, system.raises = {101: (0, 0)}, {101: denied}
    source = WorkerIoSource(target(1, {0: 101}))
    for step in range(3):
        values = source.sample(step)
    assert all(nan(value) for value in values.values())
    assert source.failing() == "worker IO counters failed on every sample (AccessDenied: (pid=101))"


# --- load throughput ---------------------------------------------------------------------------


def test_load_throughput_is_the_rate_of_loaded_bytes():
    loaded = iter([0, 50_000_000, 50_000_000])
    source = LoadThroughputSource(target(1, loaded=lambda: next(loaded)))
    assert nan(source.sample(0)["load_mbps"])
    assert source.sample(250 * MS)["load_mbps"] == pytest.approx(200.0)
    assert source.sample(500 * MS)["load_mbps"] == 0.0
