"""The benchmark machinery on a tiny model, one repeat, local disk only: it runs end to end and
writes the markdown and JSON with the expected columns (the full run takes ~35 minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import run
from benchmarks.codec import from_json, to_json
from benchmarks.records import BenchResults
from benchmarks.watched_programs import KINDS

# The smoke bench is a whole run of the machinery (ceilings, recommend within its budget, the
# peers, the users'-loader section): about 90 s on an idle 2-core machine, over the suite's
# default per-test limit.
pytestmark = pytest.mark.timeout(600)

COLUMNS = (
    "| configuration | MB/s median | min–max | × bound | × library "
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
        "## Watching other loaders: what the watch saw, their own timing, modelmon's best",
        "## Object storage: the bucket's ceiling, stream or mount, Run:ai",
    ):
        assert heading in text
    # A bucket on loopback: its curve, and modelmon's best against it, Run:ai and the mount.
    assert "| plain GETs (the curve) | MB/s |" in text and "× the storage ceiling" in text
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
    _, data = smoke
    results = from_json(BenchResults, data)
    # results.json reads back as the records it was written from
    assert json.loads(json.dumps(to_json(results))) == data
    job, warm = results.jobs
    assert job.env == "local" and job.cache == "cold" and warm.cache == "warm"
    assert set(job.ceilings) == {
        "sequential_read",
        "parallel_read",
        "storage",
        "memory_fill",
        "bound",  # the lower of storage and memory_fill, round by round
    }
    bound = job.ceilings["bound"]
    lower = [
        min(s, f)
        for s, f in zip(job.ceilings["storage"].runs, job.ceilings["memory_fill"].runs, strict=True)
    ]
    assert list(bound.runs) == lower
    names = {entry.name for entry in job.entries}
    assert {"library", "pread", "sequential", "safetensors"} <= names
    kinds = {(entry.kind, entry.role) for entry in job.entries}
    assert {("load", "recommended"), ("strategy", "recommended"), ("peer", "")} <= kinds
    for run_ in job.runs:
        assert run_.status == "ok", run_
        assert run_.cold is True and run_.resident_before <= 0.01
        assert run_.mbps > 0 and run_.bytes > 0 and run_.seconds > 0 and run_.peak_rss > 0
        assert run_.label in {e.label for e in job.entries}
    assert all(r.warm for r in warm.runs)
    assert job.recommendation is not None and job.recommendation.spec
    assert job.recommendation.evidence_runs >= 1
    assert job.diagnosis is not None and job.diagnosis.kept.mbps > 0
    assert results.plan is not None and results.plan.target_met is True
    assert results.memory is not None and results.memory.discard.runs
    assert results.overhead is not None and results.overhead.pairs == 1
    assert results.machine.cores >= 1


def test_render_writes_the_same_report_from_results_json(
    smoke: tuple[str, dict], tmp_path: Path
) -> None:
    """``--render`` reads results.json back into the records and writes the report again."""
    text, data = smoke
    results = tmp_path / "results.json"
    results.write_text(json.dumps(data))
    out = tmp_path / "again.md"
    assert run.main(["--render", str(results), "--out", str(out)]) == 0
    again = out.read_text()
    assert "rendered again from that run's results.json" in again
    assert again.split("## Targets")[1] == text.split("## Targets")[1]


def test_the_users_loader_is_measured_as_users_run_it(smoke: tuple[str, dict]) -> None:
    """The safetensors library as users run it, recommend --engine's pick and modelmon's
    best, each run watched in a fresh process; the row compares what recommend reported
    with the same configuration applied again."""
    text, data = smoke
    section = from_json(BenchResults, data).engines
    assert section is not None
    (row,) = section.rows
    assert row.failed is None, row.failed
    assert row.job.engine == "safetensors" and row.loader is not None
    assert row.loader.as_is == "engine: safetensors"
    assert row.as_is is not None and row.modelmon is not None
    (as_is,) = row.as_is.runs
    assert as_is.status == "ok" and as_is.cold and as_is.mbps > 0
    assert row.modelmon.runs[0].status == "ok", row.modelmon.runs
    assert row.all_cold
    assert row.reported_mbps is not None and row.reported_mbps > 0
    assert row.applied_again is not None and row.applied_again > 0
    assert "| local | safetensors |" in text and "reported → applied again" in text


def test_other_loaders_are_watched_beside_modelmon_s_best(smoke: tuple[str, dict]) -> None:
    """In --smoke on the local disk: every watched program ran cold to its end and was seen,
    one overhead pair and one control pair, and the section sits beside the local cold job's
    best for the same model."""
    text, data = smoke
    section = from_json(BenchResults, data).watch
    assert section is not None and section.env == "local" and not section.failed
    assert section.model_key == "tiny-f16" and section.model.endswith(".safetensors")
    assert [r.kind for r in section.programs] == list(KINDS)
    for row in section.programs:
        assert row.exit_code == 0 and row.cold and row.watched_bytes > 0, row
    assert section.overhead is not None and section.overhead.pairs == 1
    assert section.control is not None and section.control.control
    assert "modelmon's best for this model in this session (local · tiny-f16 · cold table)" in text
    assert "| watched vs not | `read-whole` | 1 |" in text
    assert "| watch | watched MB/s within 15% of the program's own (read-whole) |" in text
