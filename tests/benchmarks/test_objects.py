"""The object-storage bench, end to end on a tiny model: a real rclone serve s3 on loopback,
the same bucket through rclone mount, the curve, recommend, the rounds; then its judgement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.objects import judged, markdown, session
from benchmarks.objects_env import rclone


def test_the_bench_judges_modelmon_against_the_ceiling_runai_and_the_mount() -> None:
    data = {
        "ceiling_mbps": 400.0,
        "bound_mbps": 380.0,
        "pick": "ranged 8×16 MiB",
        "medians": {
            "ranged 8×16 MiB": 360.0,
            "ranged 16×8 MiB": 380.0,
            "runai concurrency=16": 300.0,
            "runai concurrency=4": 200.0,
            "mount: sequential ×4 (cold)": 190.0,
        },
    }
    verdict = judged(data)
    assert verdict["best_own"] == "ranged 16×8 MiB"
    assert verdict["best_own_vs_ceiling"] == pytest.approx(0.95)
    assert verdict["best_own_vs_runai"] == pytest.approx(380 / 300)
    assert verdict["regret"] == pytest.approx(1 - 360 / 380)
    assert verdict["stream_vs_mount"] == pytest.approx(2.0)


@pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no FUSE here: no mount to compare")
def test_a_tiny_session_runs_every_side(tmp_path: Path) -> None:
    assert Path(rclone()).exists() or pytest.skip("no rclone")
    before = {k: v for k, v in os.environ.items() if k.startswith("AWS_")}
    data = session(tmp_path / "served", 0.01, 1, 3.0, 0, 0.0, 0.0)
    assert data["curve"] and data["ceiling_mbps"] > 0
    assert "mount: sequential ×4 (cold)" in data["medians"]
    assert all(rate > 0 for rate in data["medians"].values())
    assert any("recommend's regret" in line for line in markdown(data))
    # The session's credentials and endpoint are gone with it.
    assert {k: v for k, v in os.environ.items() if k.startswith("AWS_")} == before
