"""Sessions: samples cover the whole load at the configured rate, on local disk and FUSE."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.measuring.session import Session, SessionResult
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from benchmarks.envs import EnvUnavailable, fuse_mount

# Cold 4 KiB reads without readahead: a load of a second or more, so coverage means something.
SLOW = LoadOptions(workers=2, threads=1, chunk=4096, fadvise="random", discard=True, cache="cold")


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("slow")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096)


def assert_covers(outcome: SessionResult, interval_s: float) -> None:
    duration = outcome.result.seconds
    times, values = outcome.series["load_mbps"]
    # Covers the load: the first sample falls inside it (how soon depends on the scheduler of a
    # busy machine, not on the sampler), the last one at or after its end (the sampler stops
    # after the run). At the configured rate: at most one sample per slot over the span
    # sampled (a busy machine may make it skip slots, never add samples).
    assert times[0] < duration and times[-1] >= duration - 1.5 * interval_s
    assert len(times) == outcome.samples_taken
    assert outcome.samples_taken <= (times[-1] - times[0]) / interval_s + 2, (
        outcome.samples_taken,
        times[-1] - times[0],
    )
    assert np.all(np.diff(times) > 0)
    assert np.median(np.diff(times)) == pytest.approx(interval_s, rel=0.5)
    assert np.nanmax(values) > 0
    assert len(outcome.reads["offset"]) > 0
    assert outcome.sampler_cpu_seconds < 0.05 * duration + 0.05  # < 5 % of one core


def test_local_disk_session_covers_the_load(slow_model: Path) -> None:
    outcome = Session(slow_model, "pread", SLOW, interval_s=0.1).run()
    assert outcome.result.status == "ok" and outcome.result.cache.cold
    assert outcome.result.seconds > 0.5
    assert_covers(outcome, 0.1)
    assert "device_read_mbps" in outcome.series  # ext4 on a block device here
    assert {b.worker for b in outcome.block_workers} == {0, 1}
    data = outcome.to_dict()
    assert data["samples"]["series"]["load_mbps"]["unit"] == "MB/s"
    assert len(data["samples"]["access_pattern"]["offset"]) == len(outcome.reads["offset"])


def test_fuse_session_covers_the_load(slow_model: Path, tmp_path: Path) -> None:
    try:
        with fuse_mount(slow_model.parent, tmp_path / "mnt") as mounted:
            outcome = Session(
                mounted / slow_model.name, "pread", SLOW.with_(chunk=64 << 10), interval_s=0.1
            ).run()
    except EnvUnavailable as exc:
        pytest.skip(str(exc))
    assert outcome.result.status == "ok"
    assert_covers(outcome, 0.1)
    # No block device behind FUSE: the device source says so instead of showing zeros.
    assert "device" in outcome.unavailable and "device_read_mbps" not in outcome.series


def test_session_without_monitoring(slow_model: Path) -> None:
    outcome = Session(slow_model, "sequential", LoadOptions(discard=True), monitor=False).run()
    assert outcome.result.status == "ok" and outcome.series == {} and outcome.samples_taken == 0
