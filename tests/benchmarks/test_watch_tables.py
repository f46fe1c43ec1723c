"""The watch section of the bench report and its targets, from records: each program's row
beside modelmon's best for the same model, the overhead rows, and which targets are met,
missed (with the evidence why) or not judged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks import report
from benchmarks.codec import from_json, to_json
from benchmarks.jobs import Entry
from benchmarks.machine import facts
from benchmarks.records import BenchResults, CeilingRuns, JobResult, Run
from benchmarks.watch import WatchedRun, WatchOverhead, WatchReport
from benchmarks.watch_tables import beyond_noise_chance, watch_section, watch_targets
from modelmon.core.options import LoadOptions

SIZE = 1_260_000_000
BEST = Entry("load", "mmap-view", LoadOptions(workers=4, threads=1))
SLOWER = Entry("strategy", "pread", LoadOptions(workers=4, threads=1))


def _watched(kind: str, own_mbps: float, watched_mbps: float, **changes: object) -> WatchedRun:
    own_seconds = SIZE / own_mbps / 1e6
    run = WatchedRun(
        kind=kind,
        exit_code=0,
        cold=True,
        own_seconds=own_seconds,
        own_mbps=own_mbps,
        watched_seconds=SIZE / watched_mbps / 1e6,
        own_start_s=0.2,
        first_byte_s=0.25,
        last_byte_s=0.25 + SIZE / watched_mbps / 1e6,
        own_end_s=0.2 + own_seconds,
        watched_mbps=watched_mbps,
        watched_bytes=SIZE,
        ratio=watched_mbps / own_mbps,
        findings=[],
        shared_pids=[],
        program_pids=[100],
        partial_fraction=None,
        loader="safetensors",
        watch_cpu_share=0.03,
    )
    return dataclasses.replace(run, **changes)  # type: ignore[arg-type]


def _overhead(ratios: list[float], control: bool = False) -> WatchOverhead:
    ordered = sorted(ratios)
    median = ordered[len(ordered) // 2]
    return WatchOverhead(
        kind="read-whole",
        control=control,
        pairs=len(ratios),
        median_seconds_watched=3.3 * median,
        median_seconds_plain=3.3,
        ratios=ratios,
        overhead=round(median - 1, 4),
        watch_core_share_median=None if control else 0.028,
    )


def _report(**changes: object) -> WatchReport:
    programs = [
        _watched(
            "forked-mapping",
            12.0,
            12.1,
            findings=["shared-descriptor"],
            shared_pids=[100, 101, 102, 103, 104],
            program_pids=[100, 101, 102, 103, 104],
        ),
        _watched(
            "lazy-slices",
            0.01,
            40.0,
            watched_bytes=SIZE // 2000,
            findings=["partial-read"],
            partial_fraction=0.0004,
        ),
        _watched("load-file", 90.0, 93.0),
        _watched("read-whole", 380.0, 372.0),
    ]
    made = WatchReport(
        "/mnt/model-00001-of-00002.safetensors",
        SIZE,
        programs,
        overhead=_overhead([1.01, 0.99, 1.02, 1.0, 1.03, 0.98]),
        control=_overhead([1.0, 0.97, 1.04, 1.01, 0.99, 1.02], control=True),
        seconds=210.0,
        env="fuse",
        model_key="tinyllama-f16",
        time_limit_s=240.0,
    )
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def _job() -> JobResult:
    runs = [
        Run(e.label, e.kind, e.name, e.role, 0, "ok", None, 2 * SIZE, 1.0, mbps, True, False, 0.0)
        for e, mbps in ((BEST, 584.0), (SLOWER, 402.0))
    ]
    return JobResult(
        "fuse",
        "tinyllama-f16",
        "cold",
        2 * SIZE,
        1,
        entries=[BEST, SLOWER],
        runs=runs,
        ceilings={"parallel_read": CeilingRuns(499.0, (499.0,), "", True)},
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> BenchResults:
    machine = facts(tmp_path_factory.mktemp("machine"))
    return BenchResults("cmd", "./dev bench", machine, jobs=[_job()], watch=_report())


def _targets(results: BenchResults, watch: WatchReport) -> dict[str, tuple[str, bool | None]]:
    found = watch_targets(dataclasses.replace(results, watch=watch))
    assert all(t.section == "watch" for t in found)
    return {t.target: (t.measured, t.met) for t in found}


def test_each_program_beside_modelmon_s_best_for_the_same_model(results: BenchResults) -> None:
    text = "\n".join(watch_section(results))
    assert "**core.load: mmap-view workers=4 threads=1 584 MB/s**" in text
    assert "the parallel-read ceiling 499 MB/s" in text
    assert "(1.26 GB, the largest file of tinyllama-f16)" in text
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    forked = rows["| forked-mapping"]
    assert "| 12 | 12 | 1.01× |" in forked and "`shared-descriptor`" in forked
    assert "| 100, 101, 102, 103, 104 | 100, 101, 102, 103, 104 | 0.02× | ✓ |" in forked
    assert "`partial-read` (0.04%)" in rows["| lazy-slices"]
    assert "| 372 | 380 | 0.98× | 1,260 MB (100.0%) |" in rows["| read-whole"]
    assert "| 0.64× | ✓ |" in rows["| read-whole"]  # 372 / 584
    assert "| watched vs not | `read-whole` | 6 |" in text
    assert "| neither watched (control) | `read-whole` | 6 |" in text
    assert "+1.0% | 2.80% |" in text  # the watched pairs' median and the watch's CPU
    assert "bound by CPU" not in text  # nothing measured that


def test_a_program_that_failed_is_its_row_and_a_missed_target(results: BenchResults) -> None:
    failed = _report(programs=_report().programs[1:], failed={"forked-mapping": "stopped"})
    changed = dataclasses.replace(results, watch=failed)
    assert "| forked-mapping | 4 forked readers" in "\n".join(watch_section(changed))
    assert _targets(results, failed)["forked-mapping watched"] == ("failed: stopped", False)


def test_targets_met(results: BenchResults) -> None:
    found = _targets(results, _report())
    assert {met for _, met in found.values()} == {True}
    assert len(found) == 6  # 3 speeds (not the lazy one's), shared, lazy, overhead
    overhead = next(v for k, v in found.items() if k.startswith("watching costs"))
    assert overhead[0].startswith("+1.0% (median of 6 pairs; neither watched: +1.0%")


def test_targets_missed_say_why(results: BenchResults) -> None:
    base = _report().programs
    programs = [
        dataclasses.replace(base[0], shared_pids=[100, 101]),  # three readers not seen
        dataclasses.replace(base[1], partial_fraction=0.2),
        dataclasses.replace(base[2], watched_mbps=120.0, ratio=120 / 90),
        base[3],
    ]
    slow = _report(programs=programs, overhead=_overhead([1.05, 1.06, 1.04, 1.08, 1.02]))
    changed = dataclasses.replace(results, watch=slow)
    missed = {t.target: t.why for t in watch_targets(changed) if t.met is False}
    assert len(missed) == 4
    assert (
        "2 of the program's 5 processes"
        in missed["the shared-descriptor program is named as such, with its pids"]
    )
    assert (
        "MB of 1,260 MB arrive"
        in missed["the lazy program is reported as having read < 10% of the file"]
    )
    assert (
        "the program loaded 1,260 MB"
        in missed["watched MB/s within 15% of the program's own (load-file)"]
    )
    overhead = next(why for target, why in missed.items() if target.startswith("watching"))
    assert "spread 1.020–1.080" in overhead and "neither side watched" in overhead
    # Missed targets are explained in the report from what the records hold.
    assert "**Why the missed targets were missed**" in report.render(changed)


def test_fewer_than_five_pairs_are_not_judged(results: BenchResults) -> None:
    few = _report(overhead=_overhead([1.2]), control=None)
    overhead = next(v for k, v in _targets(results, few).items() if k.startswith("watching"))
    assert overhead == (
        "+20.0% (median of 1 pairs; the watch's CPU 2.80% of one core); not judged: < 5 pairs",
        None,
    )


def test_a_results_json_from_before_the_section_renders(
    results: BenchResults, tmp_path: Path
) -> None:
    data = to_json(results)
    del data["watch"]
    old = from_json(BenchResults, json.loads(json.dumps(data)))
    assert old.watch is None and watch_targets(old) == []
    text = report.render(old)
    assert "## Watching other loaders" in text and "Not run: not in this run." in text
    again = from_json(BenchResults, json.loads(json.dumps(to_json(results))))
    assert again.watch == results.watch


def test_a_file_under_a_gigabyte_is_shown_but_not_judged(results: BenchResults) -> None:
    small = _report(size=4_000_000)
    found = _targets(results, small)
    assert {met for _, met in found.values()} == {None}
    assert all(
        m.endswith("not judged: a 4.0 MB file, the targets are for ≥ 1 GB")
        for m, _ in found.values()
    )
    assert "(4.0 MB, the largest file of" in "\n".join(
        watch_section(dataclasses.replace(results, watch=small))
    )


def test_a_watched_median_is_beyond_the_noise_only_when_chance_rarely_gives_it() -> None:
    # Apart: only the splits that keep the high ratios together put a median that far above.
    apart = beyond_noise_chance([1.10, 1.11, 1.12, 1.13, 1.14, 1.15], [1.0] * 6)
    assert apart < 0.05
    # Drawn from one spread: most splits put their medians as far apart.
    mixed = [1.05, 0.95, 1.10, 0.92, 1.06, 1.00]
    assert beyond_noise_chance(mixed, [1.08, 0.90, 1.02, 0.97, 1.05, 0.99]) > 0.2


def test_sixteen_pairs_each_are_judged_on_a_sample_of_their_splits() -> None:
    """601 million splits of 32 ratios: a seeded sample of them, so the bench ends (the
    exact test of every split ran for minutes); the same pairs give the same chance."""
    apart = [1.10 + i / 100 for i in range(16)]
    assert beyond_noise_chance(apart, [1.0] * 16) < 0.05
    mixed = [1.05, 0.95, 1.10, 0.92, 1.06, 1.00, 1.03, 0.97] * 2
    other = [1.08, 0.90, 1.02, 0.97, 1.05, 0.99, 1.01, 0.96] * 2
    chance = beyond_noise_chance(mixed, other)
    assert chance > 0.2 and chance == beyond_noise_chance(mixed, other)


def test_an_overhead_above_the_target_within_the_pairs_noise_is_met(
    results: BenchResults,
) -> None:
    noisy = _report(
        overhead=_overhead([1.05, 0.95, 1.10, 0.92, 1.06, 1.04]),
        control=_overhead([1.08, 0.90, 1.02, 0.97, 1.05, 0.99], control=True),
    )
    found = _targets(results, noisy).items()
    measured, met = next(v for k, v in found if k.startswith("watching"))
    assert met is True and measured.startswith("+5.0% (median of 6 pairs")
    assert "within the noise of such pairs" in measured and "permutation test" in measured
