"""Sessions: samples cover the whole load at the configured rate, on local disk and FUSE."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from modelmon.core.metrics.read_bins import RATE_BIN_S
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs.session import Session, SessionResult

from ...fuse import mounted_or_skip

# Cold 4 KiB reads without readahead: a load of a second or more, so coverage means something.
SLOW = LoadOptions(workers=2, threads=1, chunk=4096, fadvise="random", discard=True, cache="cold")


@pytest.fixture(scope="module")
def slow_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("slow")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096)


def assert_covers(outcome: SessionResult, interval_s: float) -> None:
    duration = outcome.result.seconds
    starts, ends = outcome.spans
    times, values = outcome.series["load_mbps"]
    # The samples tile the load: the first interval starts with it (the sampler begins once
    # the workers are told go), each starts where the one before ended, and the last ends
    # once the load has (its final sample is taken when the last worker is done).
    assert len(times) == len(starts) == outcome.samples_taken > 0
    assert 0 <= starts[0] < duration
    assert np.array_equal(starts[1:], ends[:-1]) and np.all(ends > starts)
    assert ends[-1] >= duration
    # A rate sits at the middle of the interval it covers.
    assert np.allclose(times, (starts + ends) / 2, atol=1e-6)
    # At the configured rate: at most one sample per slot (a busy machine may make the
    # sampler skip slots, never add samples).
    assert outcome.samples_taken <= (ends[-1] - starts[0]) / interval_s + 1
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
    load_mbps = data["samples"]["series"]["load_mbps"]
    assert load_mbps["unit"] == "MB/s" and load_mbps["over"] == "interval"
    assert len(load_mbps["t_start"]) == len(load_mbps["t_end"]) == len(load_mbps["t"])
    assert data["samples"]["series"]["workers_rss"]["over"] == "instant"
    assert "t_start" not in data["samples"]["series"]["workers_rss"]
    assert "middle" in data["samples"]["placement"]
    assert len(data["samples"]["access_pattern"]["offset"]) == len(outcome.reads["offset"])


def test_rates_line_up_with_a_load_of_known_start_and_end(slow_model: Path) -> None:
    """The load starts at 0 and ends when its last worker is done (its reads say when): no
    rate is placed before it starts nor more than half an interval after it ends, and the
    load's own MB/s over the intervals adds up to the bytes it read."""
    interval_s = 0.1
    outcome = Session(slow_model, "pread", SLOW, interval_s=interval_s).run()
    assert outcome.result.status == "ok"
    end = outcome.result.seconds
    assert float(outcome.reads["end"].max()) <= end + 1e-6  # the reads lie inside the load
    starts, ends = outcome.spans
    for name, spec in outcome.specs.items():
        times, values = outcome.series[name]
        if spec.over == "interval":
            placed = times[np.isfinite(values)]
            assert np.all(placed >= 0) and np.all(placed <= end + interval_s / 2), name
    rates = outcome.series["load_mbps"][1]
    assert np.isfinite(rates).all()
    # Counted by the reads' own times: every byte read inside the sampled intervals, less
    # no more than the reads begun before the sampler's first look (its thread wakes a
    # moment after the load starts), to the bin that look falls in.
    counted = sum(rates * 1e6 * (ends - starts))
    reads = outcome.reads
    early = float(reads["length"][reads["start"] < starts[0] + RATE_BIN_S].sum())
    assert outcome.result.bytes - early - 1 <= counted <= outcome.result.bytes + 1


def test_fuse_session_covers_the_load(slow_model: Path, tmp_path: Path) -> None:
    with mounted_or_skip(slow_model.parent, tmp_path / "mnt") as mounted:
        outcome = Session(
            mounted / slow_model.name, "pread", SLOW.with_(chunk=64 << 10), interval_s=0.1
        ).run()
    assert outcome.result.status == "ok"
    assert_covers(outcome, 0.1)
    # No block device behind FUSE: the device source says so instead of showing zeros.
    assert "device" in outcome.unavailable and "device_read_mbps" not in outcome.series


def test_session_without_monitoring(slow_model: Path) -> None:
    outcome = Session(slow_model, "sequential", LoadOptions(discard=True), monitor=False).run()
    assert outcome.result.status == "ok" and outcome.series == {} and outcome.samples_taken == 0


def test_a_run_stopped_before_its_load_began_is_drawn_from_its_first_look(
    slow_model: Path,
) -> None:
    """Walk 26: an A/B run cancelled at its start gate kept the residency map the sampler
    takes before the workers go, timed against a load start of 0: the Page cache plot's
    "time since load start" ran to 19,000 s (the machine's uptime). With no load start, its
    looks are timed from the first one."""
    session = Session(slow_model, "sequential", SLOW, interval_s=0.1)
    session.start_gate = lambda state: False  # the gate refuses: the workers never go
    outcome = session.run()
    assert outcome.result.status == "cancelled" and session.load.t0_ns == 0
    times = [t for t, _ in outcome.residency_maps]
    assert times == [0.0], times
