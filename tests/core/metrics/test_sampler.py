"""The sampler on fake sources: failures become gaps, never a crash; control is safe."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.metrics import SOURCES, residency_rounds
from modelmon.core.metrics import sampler as sampler_module
from modelmon.core.metrics.base import MetricSpec, Source
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.metrics.series import INSTANT, INTERVAL, merged

from .fakes import target


class Counting(Source):
    """Gives its call number; fails on the calls ``fails`` says (all when it says True)."""

    name = "counting"
    description = "test source"
    fails: bool | int = False  # True: always; n: every n-th call
    closed = 0

    def __init__(self, target) -> None:
        super().__init__(target)
        self.calls = 0

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec("calls", "count", "How many times sample() ran."),
            MetricSpec("missing", "count", "Never given: always a gap."),
        ]

    def sample(self, now_ns: int) -> dict[str, float]:
        self.calls += 1
        if self.fails is True or (self.fails and self.calls % self.fails == 0):
            raise OSError(13, "Permission denied")
        return {"calls": float(self.calls), "unknown": 1.0}

    def close(self) -> None:
        Counting.closed += 1


class Unavailable(Counting):
    name = "unavailable"

    def unavailable(self) -> str | None:
        return "not on this machine"


class Broken(Counting):
    name = "broken"

    def __init__(self, target) -> None:
        raise RuntimeError("no such thing")


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampler_module, "SOURCES", (*SOURCES, Counting, Unavailable, Broken))
    monkeypatch.setattr(Counting, "closed", 0)
    monkeypatch.setattr(Counting, "fails", False)


def run(
    sampler: Sampler,
    samples: int,
    timeout_s: float = 5.0,
    until: Callable[[], bool] = lambda: True,
) -> None:
    """Sample until ``samples`` are taken and ``until()`` holds (states, not a time), or the
    timeout passes."""
    sampler.start()
    deadline = time.monotonic() + timeout_s
    try:
        while (sampler.samples_taken < samples or not until()) and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        sampler.stop()


def test_only_available_sources_declare_series(fakes):
    sampler = Sampler(target(1), sources=["counting", "unavailable", "broken"])
    assert set(sampler.specs) == {"calls", "missing"}
    assert sampler.unavailable == {
        "unavailable": "not on this machine",
        "broken": "could not start: RuntimeError: no such thing",
    }
    assert Counting.closed == 1  # the unavailable one, at once
    sampler.stop()  # never started: closes the sources, takes no sample
    assert Counting.closed == 2 and sampler.samples_taken == 0
    sampler.stop()  # twice is fine
    assert Counting.closed == 2
    with pytest.raises(RuntimeError):
        sampler.start()


def test_unknown_sources_and_bad_settings_are_refused(fakes):
    with pytest.raises(OptionsError, match="unknown metric source 'nope'"):
        Sampler(target(1), sources=["nope"])
    with pytest.raises(OptionsError):
        Sampler(target(1), interval_s=0)
    with pytest.raises(OptionsError):
        Sampler(target(1), map_bins=0)


def test_every_source_is_listed_once_in_listing_order():
    names = [source.name for source in SOURCES]
    assert names == [
        "load_throughput",
        "device",
        "cpu",
        "memory",
        "worker_io",
        "residency",
        "memory_limit",
    ]
    with pytest.raises(ValueError, match="share a name"):
        Sampler(target(1), available=(Counting, Unavailable, Counting))


def test_values_are_recorded_and_missing_names_are_gaps(fakes):
    sampler = Sampler(target(1), interval_s=0.01, sources=["counting"])
    run(sampler, 5)
    series = sampler.series()
    assert set(series) == {"calls", "missing"}
    times, calls = series["calls"]
    assert len(times) == sampler.samples_taken >= 5
    assert calls[0] == 3.0  # calls 1 and 2 set the baselines (prepare, begin): not recorded
    # One call a sample; the final one may be folded into the sample before it (its level is
    # then the later reading).
    assert np.all(np.diff(calls[:-1]) == 1) and calls[-1] > calls[-2]
    assert np.all(np.diff(times) > 0)
    assert np.all(np.isnan(series["missing"][1]))
    assert sampler.unavailable == {} and Counting.closed == 1
    assert sampler.cpu_seconds > 0 and set(sampler.source_seconds) == {"counting"}


def test_a_source_failing_sometimes_leaves_gaps_and_is_not_reported(fakes, monkeypatch):
    monkeypatch.setattr(Counting, "fails", 2)
    sampler = Sampler(target(1), interval_s=0.01, sources=["counting"])
    run(sampler, 6)
    calls = sampler.series()["calls"][1]
    assert np.isnan(calls).any() and np.isfinite(calls).any()
    assert "counting" not in sampler.unavailable


def test_a_source_failing_every_time_is_reported_once_and_never_stops_the_rest(fakes, monkeypatch):
    monkeypatch.setattr(Counting, "fails", True)
    loaded = iter(range(0, 10**12, 10**6))
    sampler = Sampler(
        target(1, loaded=lambda: next(loaded)),
        interval_s=0.01,
        sources=["counting", "load_throughput"],
    )
    run(sampler, 5)
    assert sampler.unavailable == {
        "counting": "counting failed on every sample (PermissionError: [Errno 13] Permission "
        "denied)"
    }
    series = sampler.series()
    assert np.all(np.isnan(series["calls"][1]))
    assert np.isfinite(series["load_mbps"][1]).all()


def test_a_failing_part_of_a_source_is_reported(fakes, monkeypatch):
    class HalfBroken(Counting):
        name = "counting"

        def failing(self, at_least: int = 3) -> str | None:
            return "worker thing of worker 1 failed on every sample (AccessDenied)"

    monkeypatch.setattr(sampler_module, "SOURCES", (HalfBroken,))
    sampler = Sampler(target(1), interval_s=0.01, sources=["counting"])
    run(sampler, 2)
    assert sampler.unavailable["counting"].startswith("worker thing of worker 1")


def test_a_final_sample_is_taken_on_stop(fakes):
    sampler = Sampler(target(1), interval_s=10.0, sources=["counting"])
    sampler.start()  # returns with the baselines taken; stop comes long before the first slot
    sampler.stop()
    assert sampler.samples_taken == 1
    calls = sampler.series()["calls"][1]
    assert calls.tolist() == [3.0] and not math.isnan(calls[0])


def test_a_value_that_is_no_number_is_a_gap(fakes, monkeypatch):
    monkeypatch.setattr(Counting, "sample", lambda self, now_ns: {"calls": None})
    sampler = Sampler(target(1), interval_s=0.01, sources=["counting"])
    run(sampler, 3)
    assert np.all(np.isnan(sampler.series()["calls"][1]))


def test_residency_maps_are_taken_at_start_end_and_thinned_when_too_many(monkeypatch, tmp_path):
    model = tmp_path / "model.bin"
    model.write_bytes(b"\1" * (1 << 20))
    monkeypatch.setattr(residency_rounds, "MAP_MEMORY_BYTES", 8 * 16 * 4)  # 8 maps of 16 bins
    sampler = Sampler(
        target(1, paths=(str(model),)),
        interval_s=0.01,
        sources=["residency"],
        map_interval_s=0.01,
        map_bins=16,
    )
    # Rounds are spaced out when they cost CPU (a busy machine makes them dearer): wait for
    # the thinning itself, not for a number of samples that made enough maps on a quiet one.
    run(sampler, 25, timeout_s=20.0, until=lambda: sampler.map_interval_s > 0.01)
    maps = sampler.residency_maps()
    assert 2 < len(maps) <= 9 and sampler.map_interval_s > 0.01  # thinned, interval doubled
    times = [t for t, _ in maps]
    assert times == sorted(times)
    fractions = maps[-1][1][str(model)]
    assert fractions.shape == (16,) and fractions.dtype == np.float32
    assert not fractions.flags.writeable
    assert "residency maps" in sampler.source_seconds


def test_residency_measures_on_its_rounds_and_a_file_gone_is_reported(tmp_path):
    model = tmp_path / "model.bin"
    model.write_bytes(b"\1" * (1 << 20))
    sampler = Sampler(
        target(1, paths=(str(model),)), interval_s=0.01, sources=["residency"], map_bins=16
    )
    model.unlink()  # every measurement fails; the samples between rounds try nothing
    sampler.start()
    deadline = time.monotonic() + 10
    try:
        while sampler.samples_taken < 60 and time.monotonic() < deadline:
            time.sleep(0.005)  # rounds every 0.5 s: at least one inside 60 samples of 10 ms
    finally:
        sampler.stop()
    fractions = sampler.series()["resident_fraction"][1]
    assert np.all(np.isnan(fractions))
    assert sampler.unavailable == {
        "residency": "page-cache residency failed on every sample (FileNotFoundError: [Errno 2] "
        f"No such file or directory: '{model}')"
    }


def test_each_sample_covers_the_interval_since_the_one_before_and_rates_integrate(fakes):
    """Rows tile the time from begin() to the end; a rate sits at its interval's middle, a
    level at its end; rate × interval summed is what the counter grew by from begin()."""
    readings: list[int] = []

    def loaded() -> int:  # a counter that grows by 1 MB at each reading
        readings.append(len(readings) * 1_000_000)
        return readings[-1]

    sampler = Sampler(
        target(1, loaded=loaded), interval_s=0.01, sources=["load_throughput", "counting"]
    )
    before_begin = time.perf_counter_ns()
    run(sampler, 5)
    rows = sampler.sampled()
    assert len(rows.starts) == sampler.samples_taken >= 5
    assert rows.starts[0] >= before_begin  # from begin(), not from the baselines before it
    assert np.array_equal(rows.starts[1:], rows.ends[:-1])  # contiguous
    assert np.all(rows.ends > rows.starts)
    series = sampler.series()
    assert np.array_equal(series["load_mbps"][0], rows.starts + (rows.ends - rows.starts) // 2)
    assert np.array_equal(series["calls"][0], rows.ends)  # an instant: when it was read
    rates = series["load_mbps"][1]
    grown = sum(rates * 1e6 * (rows.ends - rows.starts) / 1e9)
    assert grown == pytest.approx(readings[-1] - readings[1])  # readings[1]: begin()'s baseline


def test_finish_ends_the_sampling_without_waiting_and_its_sample_covers_the_end(fakes):
    sampler = Sampler(target(1), interval_s=10.0, sources=["counting"])
    sampler.start()
    asked = time.perf_counter_ns()
    sampler.finish()  # returns at once; the thread takes the final sample
    sampler.stop()
    rows = sampler.sampled()
    assert sampler.samples_taken == 1 and rows.ends[-1] >= asked


def test_a_short_final_sample_is_folded_into_the_one_before():
    """Over both intervals: rates weighted by time (a gap counts for nothing), levels the
    later one's."""
    first = (0, 100, [10.0, 1.0, math.nan])
    second = (100, 120, [70.0, 2.0, 5.0])
    start, end, row = merged(first, second, [INTERVAL, INSTANT, INTERVAL])
    assert (start, end) == (0, 120)
    assert row[0] == pytest.approx((10.0 * 100 + 70.0 * 20) / 120)
    assert row[1] == 2.0 and row[2] == 5.0


def test_every_rate_is_declared_over_intervals():
    """A rate or share of time placed at its sample's end would be late by half an interval."""
    checked = 0
    for source in SOURCES:
        try:
            specs = source(target(2, pids={})).specs()
        except OSError:  # a source that cannot start here declares nothing to check
            continue
        for spec in specs:
            per_time = spec.unit.endswith("/s") or spec.unit in ("%", "IOPS")
            assert (spec.over == INTERVAL) == (per_time or spec.name == "cache_hit_estimate"), spec
            checked += per_time
    assert checked >= 3, "fewer than three rates were declared: the check saw almost nothing"
