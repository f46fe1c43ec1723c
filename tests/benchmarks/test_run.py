"""The benchmark machinery on a tiny model, one repeat, local disk only: it runs end to end and
writes the markdown and JSON with the expected columns (the full run takes ~35 minutes)."""

from __future__ import annotations

import json

import pytest

from benchmarks import run

COLUMNS = (
    "| configuration | MB/s median | min–max | × parallel read ceiling | × library "
    "| cold verified (resident before) |"
)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict]:
    folder = tmp_path_factory.mktemp("bench")
    out = folder / "docs" / "benchmarks.md"
    out.parent.mkdir()
    assert run.main(["--smoke", "--out", str(out), "--scratch", str(folder / "scratch")]) == 0
    assert not (folder / "scratch").exists()  # models and scratch files removed
    results = json.loads((out.parent / "benchmarks" / "results.json").read_text())
    return out.read_text(), results


def test_markdown_has_the_tables(smoke: tuple[str, dict]) -> None:
    text, _ = smoke
    for heading in (
        "## Machine",
        "## Models",
        "## Targets",
        "## Throughput by environment",
        "## core.load (what a user applies) against measure (worker processes)",
        "## Regret of recommend()",
        "## Ranks on one node: replicas on FUSE",
        "## Peers",
        "## Monitoring overhead",
        "## Peak memory",
        "## Plan time for a 100 000-tensor model",
        "## GUI event-loop tick latency",
        "## Your loader: as users run it, with recommend's change, and modelmon's best",
    ):
        assert heading in text
    assert COLUMNS in text
    assert "| ceiling: parallel read |" in text
    # recommend() may pick any of them on a tiny model: its row then says "(recommended)".
    assert "| library" in text and "sequential workers=4 threads=1 chunk=16MiB" in text
    assert "(recommended)" in text and "| core.load: pread workers=4 threads=1 |" in text
    assert "| configuration | core.load MB/s | × ceiling | measure MB/s |" in text
    assert "| applied as a user would |" in text and "regret = 1 − pick / best" in text
    assert "| environment | pick (applied through core.load(config=))" in text
    assert "| where | target | measured | met |" in text
    assert "./dev bench" in text
    for row in ("| CPU |", "| RAM |", "| kernel |", "| disk |", "| filesystem |"):
        assert row in text


def test_json_has_every_run(smoke: tuple[str, dict]) -> None:
    _, results = smoke
    job, warm = results["jobs"]
    assert job["env"] == "local" and job["cache"] == "cold" and warm["cache"] == "warm"
    assert set(job["ceilings"]) == {"sequential_read", "parallel_read"}
    names = {entry["name"] for entry in job["entries"]}
    assert {"library", "pread", "sequential", "safetensors"} <= names
    kinds = {(entry["kind"], entry["role"]) for entry in job["entries"]}
    assert {("load", "recommended"), ("strategy", "recommended"), ("peer", "")} <= kinds
    for run_ in job["runs"]:
        assert run_["status"] == "ok", run_
        assert run_["cold"] is True and run_["resident_before"] <= 0.01
        assert run_["mbps"] > 0 and run_["bytes"] > 0
        assert {"label", "kind", "repeat", "seconds", "peak_rss"} <= set(run_)
    assert all(r["warm"] for r in warm["runs"])
    assert job["recommendation"]["spec"] and job["recommendation"]["evidence_runs"] >= 1
    assert "kept" in job["diagnosis"] and "discard" in job["diagnosis"]
    assert results["plan"]["target_met"] is True
    assert results["memory"]["discard"]["runs"]
    assert results["overhead"]["pairs"] == 1
    assert results["machine"]["cores"] >= 1


def test_the_users_loader_is_measured_as_users_run_it(smoke: tuple[str, dict]) -> None:
    """The safetensors library as users run it, recommend --engine's pick and modelmon's
    best, each run watched in a fresh process; the row compares what recommend reported
    with the same configuration applied again."""
    text, results = smoke
    (row,) = results["engines"]["rows"]
    assert row["engine"] == "safetensors" and row["loader"]["as_is"] == "engine: safetensors"
    assert row["runs"]["as_is"][0]["status"] == "ok" and row["runs"]["as_is"][0]["cold"]
    assert row["runs"]["modelmon"][0]["status"] == "ok", row["runs"]["modelmon"]
    assert row["reported"]["mbps"] > 0 and row["applied_again"] > 0
    assert "| local | safetensors |" in text and "reported → applied again" in text
