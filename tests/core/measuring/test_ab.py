"""A/B: alternation, statistics and a verdict that follows the pairs."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace
from pathlib import Path

import pytest

from modelmon.core.configuration import Configuration, StrategyConfig
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ab import ABFailed, judge
from modelmon.core.measuring.ab_run import run_ab
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.verdict import verdict_words
from modelmon.core.system import device_use, readahead, storage_rest
from modelmon.core.system.cache import CacheState


def fake_result(mbps: float, cold: bool = True, status: str = "ok") -> LoadResult:
    cache = CacheState("cold", 0.0 if cold else 0.2, 1.0, cold, False, "cachestat")
    return LoadResult(status, "x", {}, "m", "safetensors", ("m",), int(mbps * 1e6), 1.0, cache)


class ScriptedRuns:
    """Stands in for the loads: hands out scripted speeds and records the order of runs."""

    def __init__(self, speeds: dict[str, list[float]], status: str = "ok") -> None:
        self.speeds, self.status = speeds, status
        self.order: list[tuple[str, int, str, str]] = []

    def __call__(self, side: str, pair: int, config: Configuration, *_: object) -> LoadResult:
        assert isinstance(config, StrategyConfig)
        self.order.append((side, pair, config.strategy, config.options.cache))
        return fake_result(self.speeds[config.strategy].pop(0), status=self.status)


def test_alternates_and_forces_the_cache_state(sharded_model: Path) -> None:
    runs = ScriptedRuns({"mmap": [100, 110, 90], "sequential": [200, 210, 190]})
    result = run_ab(
        open_model(sharded_model),
        StrategyConfig("mmap", LoadOptions(cache="keep")),
        StrategyConfig("sequential", LoadOptions()),
        n=3,
        cache="cold",
        run_one=runs,
    )
    # Each run is told its side and pair.
    assert runs.order == [
        (side, pair, strategy, "cold")
        for pair in range(3)
        for side, strategy in (("A", "mmap"), ("B", "sequential"))
    ]
    assert result.ratios == pytest.approx((2.0, 210 / 110, 190 / 90))
    assert result.a.median_mbps == pytest.approx(100) and result.b.max_mbps == pytest.approx(210)
    assert result.verdict.text == "B faster"


def test_on_network_storage_each_run_starts_once_the_last_one_rested(
    sharded_model: Path, own_state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither side is timed with help the other's run left in a network client."""
    monkeypatch.setattr(storage_rest, "_on_network", lambda path: True)
    monkeypatch.setattr(storage_rest, "STORAGE_REST_S", 0.2)
    monkeypatch.setattr(device_use, "_ended", {})
    model = open_model(sharded_model)
    runs = ScriptedRuns({"mmap": [100, 100], "sequential": [200, 200]})
    spans: list[tuple[float, float]] = []

    def announced(side: str, pair: int, config: Configuration, *_: object) -> LoadResult:
        started = time.monotonic()  # as a real run: announced on the model's devices
        with device_use.activity(readahead.device_names(f.path for f in model.files)):
            result = runs(side, pair, config)
            # Read before the device's end is recorded, on leaving: the rest counts from
            # that, and a clock read after it would shorten the rest seen here.
            ended = time.monotonic()
        spans.append((started, ended))
        return result

    rests: list[float] = []
    sides = StrategyConfig("mmap", LoadOptions()), StrategyConfig("sequential", LoadOptions())
    run_ab(model, *sides, n=2, run_one=announced, on_rest=rests.append)
    assert len(spans) == 4
    assert len(rests) == 3 and all(0 < wait <= 0.2 for wait in rests)  # told before each rest
    for (_, ended), (started, _) in itertools.pairwise(spans):
        assert started - ended >= 0.2


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        ([100, 100, 100], [150, 160, 155], "B faster"),
        ([150, 160, 155], [100, 100, 100], "A faster"),
        ([100, 130, 90], [120, 95, 105], "within noise"),  # the pairs disagree
        ([100, 100, 100], [101, 120, 103], "within noise"),  # all agree, but the spread is wide
        ([100, 80, 125], [104, 83, 130], "B faster"),  # the machine drifts, every pair gains 4 %
    ],
)
def test_verdict_follows_the_pairs_and_the_noise(
    a: list[float], b: list[float], verdict: str
) -> None:
    ratios = [y / x for x, y in zip(a, b, strict=True)]
    judged = judge(ratios)
    assert judged.text == verdict
    assert judged.min_ratio <= judged.median_ratio <= judged.max_ratio
    if verdict == "B faster":
        assert all(r > 1 for r in ratios)


def test_programs_timed_to_samples_are_faster_only_past_their_timing(
    sharded_model: Path,
) -> None:
    """Two watched programs' 1-second loads, sampled every 0.1 s, are each known to a sample:
    B's 6 % in every pair is within what their timing tells apart; the same pairs timed by
    their own clocks (strategies) are not."""
    model = open_model(sharded_model)
    sides = StrategyConfig("mmap", LoadOptions()), StrategyConfig("sequential", LoadOptions())
    speeds = {"mmap": [100.0] * 3, "sequential": [106.0] * 3}

    def sampled(side: str, pair: int, config: Configuration, *_: object) -> LoadResult:
        assert isinstance(config, StrategyConfig)
        result = fake_result(speeds[config.strategy][pair])
        return replace(result, timed_every_s=0.1)

    watched = run_ab(model, *sides, n=3, run_one=sampled)
    assert watched.verdict.text == "within noise"
    assert watched.verdict.resolution == pytest.approx(0.2)  # a sample of ten, on each side
    assert verdict_words(watched.verdict, 3) == (
        "B is 6.0 % faster by the median pair; not certain: timed to the watch's samples, no finer "
        "than 20 % (B/A per pair 1.06–1.06×, 2 of the 3 pairs within ±0 % of their median): a "
        "larger model times finer"
    )
    own_clocks = ScriptedRuns({strategy: list(rates) for strategy, rates in speeds.items()})
    timed = run_ab(model, *sides, n=3, run_one=own_clocks)
    assert timed.verdict.text == "B faster" and timed.verdict.resolution == 0


@pytest.mark.parametrize("gain", [1.19, 1.21])
def test_timing_weighs_alike_whichever_side_leads(gain: float) -> None:
    """A ratio known to ±20 %: a leader's 19 % is within it and 21 % past it, A's as B's."""
    for ratios in ([gain] * 3, [1 / gain] * 3):
        verdict = judge(ratios, resolution=0.2)
        assert (verdict.text == "within noise") is (gain < 1.2), (ratios, verdict)
        if gain < 1.2:
            assert "no finer than 20 %" in verdict_words(verdict, 3)


def test_a_failed_run_voids_the_comparison(sharded_model: Path) -> None:
    with pytest.raises(ABFailed, match="A run 1 failed"):
        run_ab(
            open_model(sharded_model),
            StrategyConfig("a", LoadOptions()),
            StrategyConfig("b", LoadOptions()),
            n=2,
            run_one=ScriptedRuns({"a": [1, 1], "b": [1, 1]}, status="failed"),
        )


def test_real_cold_ab_shared_fd_against_sequential(sharded_model: Path) -> None:
    """The issue's check: a cold A/B whose verdict agrees with its own pairs."""
    model = open_model(sharded_model)
    result = run_ab(
        model,
        StrategyConfig("mmap-shared-fd", LoadOptions(workers=4)),
        StrategyConfig("sequential", LoadOptions(workers=4)),
        n=2,
        cache="cold",
    )
    assert [side for side, _ in result.runs] == ["A", "B", "A", "B"]
    assert all(r.cache.resident_before <= 0.01 and r.cache.cold for _, r in result.runs)
    ratios = result.ratios
    if result.verdict.text == "B faster":
        assert min(ratios) > 1
    elif result.verdict.text == "A faster":
        assert max(ratios) < 1
    low, high = sorted(ratios)
    assert result.verdict.median_ratio == pytest.approx((low * high) ** 0.5)  # median of logs
    assert set(result.to_dict()) >= {"a", "b", "ratios", "verdict", "runs"}


def test_cancel_between_runs_voids_the_comparison(sharded_model: Path) -> None:
    import threading

    cancel = threading.Event()
    runs = ScriptedRuns({"a": [100, 100], "b": [200, 200]})
    with pytest.raises(ABFailed, match="cancelled"):
        run_ab(
            open_model(sharded_model),
            StrategyConfig("a", LoadOptions()),
            StrategyConfig("b", LoadOptions()),
            n=2,
            cancel=cancel,
            run_one=runs,
            on_result=lambda side, pair, result: cancel.set(),
        )
    assert [side for side, *_ in runs.order] == ["A"]
