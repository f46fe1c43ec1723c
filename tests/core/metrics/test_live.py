"""A real sampler run at 10 Hz against real processes, one of them reading a real file cold."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.metrics.base import MonitorTarget
from modelmon.core.metrics.device import choose_devices
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.system import cache

FILE_BYTES = 64 << 20
CHUNK = 1 << 20
SAMPLES = 15  # regular samples to take at least: 1.5 s at 10 Hz, past three residency maps
RAMP_BYTES_PER_NS = 0.2  # a fake load at 200 MB/s
CPU_S = 0.3  # CPU the reader spends after reading: 30 ticks of /proc's 10 ms

# Drops the file from the cache itself (so nothing between eviction and reading warms it),
# then, once told the sampler is running, reads it front to back slowly, so the run sees a
# steady cold read. Then it spends CPU_S of CPU: reading 64 MiB costs a few ms, under the
# 10 ms tick /proc counts CPU in, and a run charged no tick showed 0 % in every sample.
READER = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
print("go", flush=True)
sys.stdin.readline()  # the sampler has taken its first samples
while os.read(fd, int(sys.argv[2])):
    time.sleep(0.012)
os.close(fd)
end = time.thread_time() + float(sys.argv[3])
while time.thread_time() < end:
    pass
print("done", flush=True)
sys.stdin.read()  # stays alive (its counters readable) until the test has sampled enough
"""


def integral(times: np.ndarray, rates: np.ndarray) -> float:
    """Bytes from a MB/s series: each rate holds over the interval before its sample."""
    spans = np.diff(times) / 1e9
    rates = rates[1:]
    finite = np.isfinite(rates)
    return float(np.sum(rates[finite] * spans[finite]) * 1e6)


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "weights.bin"
    block = bytes(range(256)) * (CHUNK // 256)
    with open(path, "wb") as out:
        for _ in range(FILE_BYTES // CHUNK):
            out.write(block)
    cache.evict(path)
    return path


def test_sampling_a_cold_read_at_10_hz(model_file: Path):
    on_block_device = choose_devices((str(model_file),)).problem is None
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(model_file), str(CHUNK), str(CPU_S)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "go\n"
        pids = {0: reader.pid, **{i + 1: p.pid for i, p in enumerate(sleepers)}}
        ramp_start = time.perf_counter_ns()
        target = MonitorTarget(
            paths=(str(model_file),),
            workers=4,
            pids=lambda: dict(pids),
            loaded_bytes=lambda: int((time.perf_counter_ns() - ramp_start) * RAMP_BYTES_PER_NS),
        )
        sampler = Sampler(target, interval_s=0.1)
        started = time.perf_counter()
        sampler.start()
        # The reader starts once the sampler runs: a sampler started late on a busy machine
        # would otherwise miss the read it is to see.
        deadline = time.monotonic() + 60
        while sampler.samples_taken < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.stdin is not None
        reader.stdin.write("read\n")
        reader.stdin.flush()
        # Until the states the assertions read hold, not for a time: the reader has read the
        # whole file, the sampler has taken SAMPLES samples, two residency rounds are in the
        # series, and one of them came after the reader was done (however slowly a busy
        # machine runs any of them: a costly round spaces the next one out).
        assert reader.stdout.readline() == "done\n"
        rounds_before_done = sampler.rounds_recorded
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            sampler.samples_taken < SAMPLES
            or sampler.rounds_recorded < max(2, rounds_before_done + 1)
        ):
            time.sleep(0.01)
        sampler.stop()
        duration = time.perf_counter() - started
        assert reader.stdin is not None
        reader.stdin.close()
        reader.wait(timeout=10)
    finally:
        for process in [reader, *sleepers]:
            process.kill()
            process.wait()
        for stream in (reader.stdin, reader.stdout):
            if stream is not None:
                stream.close()

    series = sampler.series()
    cpu_share = sampler.cpu_seconds / duration
    costs = {
        name: f"{seconds / sampler.samples_taken * 1e6:.0f} µs"
        for name, seconds in sampler.source_seconds.items()
    }
    print(
        f"\nsampler: {sampler.samples_taken} samples in {duration:.2f} s, "
        f"{sampler.cpu_seconds * 1e3:.1f} ms CPU = {cpu_share:.2%} of one core; "
        f"per sample: {costs}"
    )

    # At most one sample per 100 ms slot (the baseline at t0 is not recorded), plus the final
    # one: a late sample makes the sampler skip the slots it missed, never catch up in a burst.
    assert SAMPLES <= sampler.samples_taken <= duration * 10 + 1
    times, _ = series["load_mbps"]
    assert len(times) == sampler.samples_taken and np.all(np.diff(times) > 0)
    offsets = (times[:-1] - times[0]) / 1e8  # regular samples sit on t0 + k·100 ms
    assert np.all(np.diff(np.floor(offsets + 0.5)) >= 1), offsets  # one per slot
    # On the grid, not drifting by each sample's cost: most samples land near their slot (a
    # busy 2-core machine may make a few late, which the median ignores).
    assert np.median(np.abs(offsets - np.round(offsets))) < 0.3, offsets

    load = series["load_mbps"][1]
    assert np.nanmedian(load) == pytest.approx(RAMP_BYTES_PER_NS * 1e3, rel=0.02)

    assert sampler.unavailable == {}, sampler.unavailable
    if on_block_device:
        read_from_disk = integral(*series["device_read_mbps"])
        assert read_from_disk >= FILE_BYTES / 2, read_from_disk
        assert np.nanmax(series["device_read_iops"][1]) > 0

    # The reader's own counters: it read the file through read(), and from storage.
    assert series["worker_read_chars.0"][1][-1] >= FILE_BYTES
    assert series["read_bytes"][1][-1] >= FILE_BYTES / 2
    hits = series["cache_hit_estimate"][1]
    assert np.isfinite(hits).sum() >= 3 and np.nanmedian(hits) < 0.5  # read cold
    resident = series["resident_fraction"][1]
    # Measured on the residency rounds (every 0.5 s, and at the end), gaps in between.
    measured = resident[np.isfinite(resident)]
    assert 2 <= len(measured) < len(resident)  # the cold start: the first map, below
    assert measured[-1] > 0.5  # a round after the reader was done (it runs for 1.5 s)
    assert np.all(series["worker_rss.1"][1] > 0) and np.isfinite(series["mem_available"][1]).all()
    assert np.nanmax(series["worker_cpu_pct.0"][1]) > 0

    maps = sampler.residency_maps()
    assert len(maps) >= 3  # at t0, then every 0.5 s
    first, last = maps[0][1][str(model_file)], maps[-1][1][str(model_file)]
    assert first.shape == (256,) and first.mean() < last.mean()

    assert cpu_share < 0.10  # the budget is 5 % of one core; margin for a busy CI machine


def test_a_file_in_ram_has_no_device_series(tmp_path: Path):
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    path = os.path.join("/dev/shm", f"modelmon-test-{os.getpid()}.bin")
    with open(path, "wb") as out:
        out.write(b"\0" * 4096)
    try:
        sampler = Sampler(
            MonitorTarget((path,), 1, dict, lambda: 0), sources=["device", "residency"]
        )
        sampler.stop()
    finally:
        os.unlink(path)
    assert sampler.unavailable["device"] == (
        "no block device: tmpfs on /dev/shm — see load throughput"
    )
    assert "device_read_mbps" not in sampler.specs and "resident_fraction" in sampler.specs
