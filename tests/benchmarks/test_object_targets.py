"""The object-storage section's targets, from one profile's figures as the bench writes them."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.machine import facts
from benchmarks.object_targets import by_round, object_targets, profile_name
from benchmarks.records import BenchResults

SHAPED = {
    "rate_mbit": 4000,
    "latency_ms": 20.0,
    "connection_mbps": 100.0,
    "bound": "storage",
    "ceiling_mbps": 470.0,
    "ceiling_runs": [470.0, 460.0, 480.0],
    "bound_mbps": 470.0,
    "bound_runs": [470.0, 460.0, 480.0],
    "pick": "ranged 16×16 MiB",
    "medians": {
        "ranged 16×16 MiB": 450.0,
        "ranged 8×16 MiB": 430.0,
        "runai concurrency=4": 320.0,
        "mount: sequential ×4 (cold)": 350.0,
    },
    "runs": {
        "ranged 16×16 MiB": [450.0, 440.0, 455.0],
        "ranged 8×16 MiB": [430.0, 425.0, 440.0],
        "runai concurrency=4": [320.0, 310.0, 330.0],
        "mount: sequential ×4 (cold)": [350.0, 345.0, 355.0],
    },
    "watched_program": [
        {"watch_mbps": 460.0, "own_mbps": 450.0, "peak_connections": 16.0},
        {"watch_mbps": 455.0, "own_mbps": 449.0, "peak_connections": 16.0},
    ],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> BenchResults:
    return BenchResults("cmd", "./dev bench", facts(tmp_path_factory.mktemp("machine")))


def _targets(results: BenchResults, data: dict) -> dict[str, tuple[str, bool | None]]:
    found = object_targets(dataclasses.replace(results, objects=[data]))
    assert {t.section for t in found} == {profile_name(data)}
    return {t.target.split(" (")[0]: (t.measured, t.met) for t in found}


def test_a_shaped_profile_is_judged_against_the_bound_of_its_own_rounds(
    results: BenchResults,
) -> None:
    found = _targets(results, SHAPED)
    assert profile_name(SHAPED) == "objects · shaped (4000 Mbit/s, 20 ms, 100 MB/s a connection)"
    measured, met = found["modelmon's best ≥ 0.9× its bound"]
    assert met is True and measured.startswith("ranged 16×16 MiB: 450 / 470 MB/s")
    assert found["no configuration above its bound by more than the bound's spread"][1] is True
    assert found["modelmon's best ≥ 1.2× Run:ai's S3 streamer at its best concurrency"] == (
        "450 / 320 MB/s (runai concurrency=4) = 1.41×",
        True,
    )
    assert found["recommend's regret ≤ 10%"][1] is True
    watch = found["the watch's MB/s and connections within 15% of a program's own"]
    assert watch[1] is True and "16 of 16 connections seen" in watch[0]


def test_a_load_above_the_rounds_bound_and_a_watch_off_by_more_are_missed(
    results: BenchResults,
) -> None:
    runs = dict(SHAPED["runs"], **{"ranged 16×16 MiB": [520.0, 510.0, 530.0]})
    medians = dict(SHAPED["medians"], **{"ranged 16×16 MiB": 520.0})
    watched = [{"watch_mbps": 600.0, "own_mbps": 450.0, "peak_connections": 9.0}]
    data = dict(SHAPED, runs=runs, medians=medians, watched_program=watched)
    found = _targets(results, data)
    above = found["no configuration above its bound by more than the bound's spread"]
    assert above == ("highest: ranged 16×16 MiB at 1.11× by round", False)
    assert found["the watch's MB/s and connections within 15% of a program's own"][1] is False


def test_a_round_s_run_is_held_against_that_round_s_bound() -> None:
    assert by_round([100.0, 200.0, 300.0], [100.0, 100.0, 300.0]) == pytest.approx(1.0)
    assert by_round([100.0], []) is None
    assert profile_name(dict(SHAPED, rate_mbit=0, latency_ms=0.0, connection_mbps=0.0)) == (
        "objects · loopback"
    )


THROTTLED = dict(
    SHAPED,
    rate_mbit=0,
    latency_ms=0.0,
    connection_mbps=0.0,
    rate=4.0,
    burst=4.0,
    pick="ranged 2×256 MiB",
    searched={"ranged 2×256 MiB": 380.0, "ranged 4×256 MiB": 400.0},
    medians={
        "ranged 2×256 MiB": 390.0,
        "ranged 4×256 MiB": 395.0,
        "load defaults: ranged 4×8 MiB": 300.0,
        "boto3 fixed 8×16 MiB (default retries)": None,
        "boto3 fixed 8×16 MiB (10 tries)": 60.0,
        "runai concurrency=4": None,
        "mount: sequential ×4 (cold)": 100.0,
    },
    runs={
        "ranged 2×256 MiB": [390.0, 380.0, 400.0],
        "ranged 4×256 MiB": [395.0, 390.0, 400.0],
        "load defaults: ranged 4×8 MiB": [300.0, 290.0, 310.0],
        "boto3 fixed 8×16 MiB (default retries)": [],
        "boto3 fixed 8×16 MiB (10 tries)": [60.0, 58.0, 61.0],
        "runai concurrency=4": [],
        "mount: sequential ×4 (cold)": [100.0, 100.0, 100.0],
    },
    failed={
        "boto3 fixed 8×16 MiB (default retries)": ["reached max retries: 2"] * 3,
        "runai concurrency=4": ["File access error"] * 3,
    },
    paced={
        "load defaults: ranged 4×8 MiB": [
            {"throttles": 10, "requests": 22, "pace": [[0.0, 4, 8 << 20], [0.1, 1, 256 << 20]]}
        ]
    },
    watched_program=[],
    bytes=1_100_000_000,
    curve=[["1 connection(s), 16 MiB GETs, throttled 16 times, stopped after 2 s of it", 88.0]],
)


def test_a_throttling_bucket_holds_the_defaults_against_the_fixed_client_that_finished(
    results: BenchResults,
) -> None:
    from benchmarks.object_tables import markdown

    assert profile_name(THROTTLED) == "objects · throttled (4 GETs/s, burst 4)"
    found = _targets(results, THROTTLED)
    assert found["load with its defaults finishes at ≥ 2× the fixed boto3 client"] == (
        "300 / 60 MB/s = 5.00×",
        True,
    )
    assert found["recommend's pick ≥ 0.9× the best it measured"] == (
        "0.95× (ranged 2×256 MiB)",
        True,
    )
    runai = found["modelmon's best ≥ 1.2× Run:ai's S3 streamer at its best concurrency"]
    assert runai[1] is True and "Run:ai failed at every concurrency (File access error)" in runai[0]
    watch = found["the watch's MB/s and connections within 15% of a program's own"]
    assert watch == ("not measured (a bucket that throttles)", None)
    text = "\n".join(markdown(THROTTLED))
    assert (
        "| boto3 fixed 8×16 MiB (default retries) | failed | 3 failed: reached max retries" in text
    )
    assert "503 SlowDown above 4 GETs/s (burst 4)" in text
    assert "`load` with its defaults: 5.00× the fixed client that finished" in text
    assert "throttled 10 times in 22 GETs; down to 1 connection(s), parts up to 256 MiB" in text
