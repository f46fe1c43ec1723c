"""The bench's core.load-vs-measure and regret tables, from a job's runs: the arithmetic and
what a run stopped at the time limit shows (bounded, not dropped)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.jobs import Entry, Job
from benchmarks.matrix import side_by_side
from benchmarks.records import CandidateRow, CeilingRuns, JobResult, RecommendationRecord, Run
from benchmarks.regret_tables import CONFIRM_PAIRS, regret_of, regret_table
from benchmarks.summary import job_targets
from benchmarks.tables import (
    PROCESSES_SPEC,
    THREADS_SPEC,
    applied_table,
    applied_targets,
)
from modelmon.core.options import LoadOptions

GB = 2_000_000_000
PROCESSES = LoadOptions(workers=4, threads=1, chunk=16 << 20)
THREADS = LoadOptions(workers=1, threads=4, chunk=16 << 20)


def _run(entry: Entry, mbps: float, repeat: int, status: str = "ok") -> Run:
    stopped = status != "ok"
    return Run(
        entry.label,
        entry.kind,
        entry.name,
        entry.role,
        repeat,
        status,
        "stopped at the time limit of 20 s" if stopped else None,
        0 if stopped else GB,
        20.0 if stopped else GB / mbps / 1e6,
        0.0 if stopped else mbps,
        True,
        False,
        0.0,
        peak_rss=int(1.05 * GB),
        bound_mbps=GB / 20 / 1e6 if stopped else None,
    )


def _record(pick: str, evidence: float | None = None) -> RecommendationRecord:
    rows = () if evidence is None else (CandidateRow(pick, "", False, 3, evidence, 0, 0, "", ""),)
    return RecommendationRecord(pick, pick, False, "rec.toml", 60.0, 63.0, 5, False, (), rows)


def _job() -> JobResult:
    pick_load = Entry("load", "sequential", PROCESSES, role="recommended")
    pick_measure = Entry("strategy", "sequential", PROCESSES, role="recommended")
    threads_load = Entry("load", "sequential", THREADS)
    threads_measure = Entry("strategy", "sequential", THREADS)
    direct = Entry("load", "direct", PROCESSES)
    runai = Entry("peer", "runai")
    crawler = Entry("peer", "cattensors")
    speeds = [
        (pick_load, 500),
        (pick_measure, 520),
        (threads_load, 450),
        (threads_measure, 400),
        (direct, 600),
        (runai, 400),
    ]
    runs = [_run(e, mbps + 10 * r, r) for r in range(3) for e, mbps in speeds]
    runs.append(_run(crawler, 0, 0, "cancelled"))
    return JobResult(
        "fuse",
        "m",
        "cold",
        GB,
        3,
        entries=[*(e for e, _ in speeds), crawler],
        runs=runs,
        ceilings={"parallel_read": CeilingRuns(640.0, (640.0,) * 3, "", True)},
        recommendation=_record(pick_load.spec),
        time_limit_s=20.0,
    )


def _rerun(job: JobResult, change: Any) -> None:
    """Every run of ``job`` through ``change(run) -> run``."""
    job.runs = [change(r) for r in job.runs]


def test_regret_is_one_minus_pick_over_the_best_applied() -> None:
    found = regret_of(_job())
    assert found is not None and found.best is not None and found.regret is not None
    assert found.best.label == "core.load: direct workers=4 threads=1 chunk=16MiB"
    # sequential 1×4 applies the pick's load (4 reader threads in one process): its runs
    # (450, 460, 470) count as the pick's (500, 510, 520), so the pick is the median of the six
    assert [t.label for t in found.twins] == ["core.load: sequential chunk=16MiB"]
    assert found.pick_runs == 6
    assert found.regret == pytest.approx(1 - 485 / 610)
    text = "".join(regret_table(_job()))
    assert "regret = 1 − pick / best = **20.5%**" in text
    assert "core.load: sequential chunk=16MiB (the pick's load)" in text
    assert "so their runs count as the pick's (6 runs, median 485 MB/s" in text
    assert "< 100 (stopped at the 20 s limit)" in text  # the crawler: bounded, not dropped


def test_a_rival_that_is_the_pick_s_own_load_is_no_regret() -> None:
    """On FUSE the pick's core.load may draw slow runs and its 1×4 twin fast ones; a user
    applying either gets the same 4 reader threads, so there is nothing to regret."""
    job = _job()
    pick = Entry("load", "sequential", PROCESSES, role="recommended")
    twin = Entry("load", "sequential", THREADS)
    direct = Entry("load", "direct", PROCESSES)
    keep = {pick.label, twin.label}
    job.entries = [e for e in job.entries if e.label in keep]
    speeds = {pick.label: (435, 562, 425), twin.label: (592, 600, 598)}
    job.runs = [_run(e, speeds[e.label][r], r) for r in range(3) for e in (pick, twin)]
    found = regret_of(job)
    assert found is not None and found.regret == 0.0 and found.best is not None
    assert found.best.label == pick.label and found.pick_mbps == (562 + 592) / 2
    job.entries.append(direct)  # a different load: a rival
    job.runs += [_run(direct, 700, r) for r in range(3)]
    found = regret_of(job)
    assert found is not None and found.best is not None and found.best.label == direct.label


def test_confirmation_pairs_count_in_the_regret_only() -> None:
    job = _job()
    pick = Entry("load", "sequential", PROCESSES, role="recommended")
    direct = Entry("load", "direct", PROCESSES)
    job.confirm_runs = [
        _run(e, mbps, 3 + n) for n in range(3) for e, mbps in ((pick, 560), (direct, 540))
    ]
    found = regret_of(job)
    assert found is not None
    # pick: 450 460 470 500 510 520 560 560 560 → 510; direct: 600 610 620 540 540 540 → 570
    assert found.pick_runs == 9 and found.pick_mbps == 510
    assert found.regret == pytest.approx(1 - 510 / 570)
    text = "".join(regret_table(job))
    assert "Rounds 4–6 are 3 confirmation pairs" in text
    # the other tables read the rounds alone
    from benchmarks.summary import rows_of

    row = next(r for r in rows_of(job) if r.label == pick.label)
    assert (row.runs, row.low, row.high) == (3, 500, 520)


def test_load_against_measure_and_the_targets() -> None:
    job = _job()
    table = applied_table(job)
    assert f"| **{PROCESSES_SPEC}** (recommended) | 510 | 0.80× | 530 | 0.83× | 0.96× |" in table
    targets = {t.target: t for t in applied_targets(job)}
    within = targets["core.load vs measure of the recommended configuration within 10%"]
    assert within.met is True and "0.96×" in within.measured
    threads = next(t for name, t in targets.items() if name.startswith("core.load `"))
    assert THREADS_SPEC in threads.target and threads.met is True  # 460 / 530 ≥ 0.8
    in_workers = next(t for name, t in targets.items() if name.startswith("measure `"))
    assert in_workers.met is False and "0.77×" in in_workers.measured  # 410 / 530
    assert "3% short" in in_workers.why
    peer = targets[PEER_TARGET]
    assert peer.met is True and "610 / peer: runai 410" in peer.measured
    rss = next(t for name, t in targets.items() if name.startswith("peak RSS"))
    assert rss.met is True and rss.measured == "1.05×"


PEER_TARGET = (
    "modelmon's best ≥ 1.2× the best peer, or ≥ 0.9× its bound where 1.2× the peer would "
    "be past that"
)


def test_a_peer_near_the_bound_is_beaten_by_reaching_the_bound() -> None:
    """Run:ai at 0.94× the bound: 1.2× it would be 1.13× the bound, which no load reaches,
    so modelmon's best is judged at 0.9× the bound (and ahead of the peer)."""
    job = _job()
    _rerun(job, lambda run: dataclasses.replace(run, mbps=590.0) if run.kind == "peer" else run)
    peer = next(t for t in applied_targets(job) if t.target == PEER_TARGET)
    assert "610 / peer: runai 590 MB/s = 1.03×" in peer.measured
    assert "the peer ran at 0.92× the bound (640 MB/s), so the target is 0.9× the bound: 0.95×" in (
        peer.measured
    )
    assert peer.met is True
    _rerun(job, lambda run: dataclasses.replace(run, mbps=620.0) if run.kind == "peer" else run)
    behind = next(t for t in applied_targets(job) if t.target == PEER_TARGET)
    assert behind.met is False  # at 0.95× the bound, but behind the peer


ABOVE = "no configuration above its bound by more than the bound's spread (≤ 1.02×)"


def test_a_load_above_a_bound_read_through_a_throttle_is_explained_by_the_throttle() -> None:
    """The bound's plain reads passed a cgroup's throttle: a load above it passed it faster,
    and the miss says so (from the run's own record of the throttle); with no throttle it
    says nothing of one."""
    job = _job()
    throttle = "reads throttled to 150 MiB/s (157 MB/s) by the cgroup /sys/fs/cgroup/blkio/x"
    job.ceilings["bound"] = CeilingRuns(500.0, (500.0,) * 3, "", True, throttle)
    above = next(t for t in job_targets(job) if t.target == ABOVE)
    assert above.met is False and above.measured.startswith("highest: core.load: direct")
    assert above.why.startswith(f"the bound's plain reads passed the disk's throttle ({throttle})")
    job.ceilings["bound"] = CeilingRuns(500.0, (500.0,) * 3, "", True)
    assert next(t for t in job_targets(job) if t.target == ABOVE).why == ""


def test_a_throttled_bound_allows_its_slice_over_one_of_its_runs() -> None:
    """The throttle lets a load's reads run two slices ahead of its rate: the target allows
    that share (recorded with the bound) and says so; a load past it still misses."""
    job = _job()  # its highest configuration runs 1.22× a bound of 500 MB/s, round by round
    words = "reads throttled to 150 MiB/s (157 MB/s) by the cgroup /x"
    job.ceilings["bound"] = CeilingRuns(500.0, (500.0,) * 3, "", True, words, 0.25)
    within = next(t for t in job_targets(job) if t.target.startswith(ABOVE[:-9]))
    assert within.met is True and within.measured.endswith("at 1.22× by round")
    assert within.target == (
        "no configuration above its bound by more than the bound's spread (≤ 1.25×: the two "
        "slices its throttle lets a load's reads run ahead, over one of its runs)"
    )
    job.ceilings["bound"] = CeilingRuns(500.0, (500.0,) * 3, "", True, words, 0.2)
    past = next(t for t in job_targets(job) if t.target.startswith(ABOVE[:-9]))
    assert past.met is False and past.why.startswith("the bound's plain reads passed")


def test_load_against_measure_is_judged_on_the_rounds_pairs() -> None:
    """The disk drifts between rounds: each round's core.load / measure ratio cancels it.
    Medians 510 / 530 alone would pass; the pairs say core.load ran 0.8× in every round."""
    job = _job()
    measured = {1: 600.0, 2: 700.0, 3: 400.0}

    def paired(run: Run) -> Run:
        if run.role != "recommended":
            return run
        base = measured[run.repeat + 1]
        return dataclasses.replace(run, mbps=base * (0.8 if run.kind == "load" else 1.0))

    _rerun(job, paired)
    within = next(t for t in applied_targets(job) if t.target.startswith("core.load vs measure"))
    assert "paired by round: 0.80×" in within.measured and within.met is False


def test_each_core_load_runs_right_after_its_measured_form() -> None:
    seq_load = Entry("load", "sequential", PROCESSES)
    seq = Entry("strategy", "sequential", PROCESSES)
    pread_load = Entry("load", "pread", LoadOptions(workers=4, threads=1))
    runai = Entry("peer", "runai")
    order = side_by_side([seq_load, runai, pread_load, seq])
    assert order == [runai, pread_load, seq, seq_load]  # pread has no measured form here


def test_peak_rss_says_what_was_resident_before_go() -> None:
    job = _job()
    _rerun(job, lambda run: dataclasses.replace(run, rss_ready=int(0.2 * GB)))
    rss = next(t for t in applied_targets(job) if t.target.startswith("peak RSS"))
    assert rss.measured == "0.85× (VmHWM 1.05×, 0.20× at ready)"
    assert "of which 381 MiB before go" in rss.why


def test_a_ratio_that_two_decimals_would_round_onto_its_target_shows_three() -> None:
    from benchmarks.summary import judged_ratio_text

    assert judged_ratio_text(0.998, 1.0) == "0.998×"  # "1.00×" beside "missed" would mislead
    assert judged_ratio_text(1.003, 1.0) == "1.003×"
    assert judged_ratio_text(0.93, 0.95) == "0.93×"
    assert judged_ratio_text(1.0, 1.0) == "1.00×"


def test_runs_with_a_report_pass_inside_their_timing_are_counted_by_form() -> None:
    from benchmarks.report import host_report_line

    mib = 1 << 20
    base = _run(Entry("strategy", "pread"), 500, 0)

    def job(*reported: tuple[str, int | None]) -> JobResult:
        runs = [dataclasses.replace(base, label=a, host_reported=b) for a, b in reported]
        return JobResult("local", "m", "cold", GB, 1, runs=runs)

    line = host_report_line(
        job(
            ("mmap-view", 900 * mib),
            ("mmap-view", 700 * mib),
            ("core.load: mmap-view", 1000 * mib),
            ("pread", 3 * mib),  # a few pages: no pass
            ("peer: safetensors", None),
        )
    )
    assert line.startswith("Free page reporting: 3 of 4 timed runs")
    assert "median 900 MiB" in line and line.endswith("mmap-view ×2, core.load: mmap-view ×1.")
    quiet = job(("pread", 0))
    assert host_report_line(quiet).startswith("Free page reporting: none of the 1 timed runs")
    assert host_report_line(job(("pread", None))) == ""  # no counter on that kernel


def test_rounds_with_far_more_reported_on_one_side_are_named() -> None:
    from benchmarks.summary import reported_in_rounds

    mib = 1 << 20
    base = _run(Entry("strategy", "pread"), 500, 0)

    def run(
        label: str, repeat: int, mbps: float, reported: int | None, seconds: float = 1.0
    ) -> Run:
        mib_reported = None if reported is None else reported * mib
        return dataclasses.replace(
            base, label=label, repeat=repeat, mbps=mbps, seconds=seconds, host_reported=mib_reported
        )

    load, measure = "core.load: sequential workers=4", "sequential workers=4"
    runs = [
        run(load, 0, 658, 768),
        run(measure, 0, 586, 896),  # 128 MiB apart: not named
        run(load, 1, 567, 896),
        run(measure, 1, 473, 1792),
        run(load, 2, 575, None),  # no counter on that kernel
        run(measure, 2, 585, 768),
    ]
    assert reported_in_rounds(runs, load, measure) == (
        "; in round 2 measure ran 473 MB/s with 1792 MiB reported to the host while it ran, "
        "core.load 567 with 896"
    )
    assert reported_in_rounds(runs[:2], load, measure) == ""
    # 2.5 GB on FUSE: 4.4 and 5.3 s, passes every ~2.2 s: one met two because it lasted longer
    slow = [run(load, 0, 567, 896, 4.4), run(measure, 0, 473, 1792, 5.3)]
    assert reported_in_rounds(slow, load, measure).endswith(
        "the slower run met more because it lasted longer, which says nothing of what made "
        "it slower)"
    )


def test_two_core_loads_that_split_the_same_readers_differently_are_the_same_load() -> None:
    from benchmarks.regret_tables import same_load

    def entry(name: str, workers: int, threads: int) -> Entry:
        return Entry("load", name, LoadOptions(workers=workers, threads=threads, chunk=16 << 20))

    pick, one, two, pread = (
        entry("sequential", 4, 1),
        entry("sequential", 1, 4),
        entry("sequential", 2, 1),
        entry("pread", 4, 1),
    )
    job = JobResult("local", "m", "cold", GB, 1, entries=[pick, one, two, pread])
    load = same_load(job, pick.label, one.label)
    assert load is not None and (load.workers, load.threads) == (1, 4)
    assert same_load(job, pick.label, two.label) is None  # fewer readers: another load
    assert same_load(job, pick.label, pread.label) is None


def _confirming(
    monkeypatch: Any, job: JobResult, speed: dict[str, float]
) -> tuple[Job, list[Entry], list[tuple[str, int]]]:
    """The bench job of ``job``'s entries, its entries, and the (strategy, round) of every run
    ``matrix.confirm`` makes, each at ``speed[strategy]`` MB/s."""
    from benchmarks import matrix

    entries = list(job.entries)
    ran: list[tuple[str, int]] = []

    def fake(spec: Any, model: Any, entry: Entry, config: Any, repeat: int) -> Run:
        ran.append((entry.name, repeat))
        return _run(entry, speed[entry.name], repeat)

    monkeypatch.setattr(matrix, "run_entry", fake)
    return Job("fuse", "m", "/nowhere", "cold", 3, entries, []), entries, ran


def test_a_pick_beaten_over_the_rounds_is_confirmed_in_alternating_pairs(
    monkeypatch: Any,
) -> None:
    from benchmarks import matrix

    job = _job()  # direct beat the pick over the rounds
    spec, entries, ran = _confirming(monkeypatch, job, {"sequential": 500, "direct": 500})
    lines: list[str] = []
    runs = matrix.confirm(spec, None, entries, {}, job, lines.append)  # type: ignore[arg-type]
    assert ran == [
        ("sequential", 3),
        ("direct", 3),
        ("direct", 4),
        ("sequential", 4),
        ("sequential", 5),
        ("direct", 5),
    ]
    assert len(runs) == 2 * CONFIRM_PAIRS == len(lines)
    assert lines[0].startswith("[fuse/m/cold confirming] core.load: sequential workers=4")
    job.runs = [r for r in job.runs if r.label != entries[4].label]  # no rival left
    ran.clear()
    assert matrix.confirm(spec, None, entries, {}, job, lines.append) == [] and ran == []  # type: ignore[arg-type]


def test_an_alternative_that_beats_the_pick_after_a_confirmation_is_confirmed_too(
    monkeypatch: Any,
) -> None:
    """Confirmation pairs that take the rounds' best below the pick leave an alternative never
    confirmed (3 runs) as the best: it is confirmed too before the regret names it."""
    from benchmarks import matrix

    job = _job()  # direct (600-620) beat the pick (pooled 485) over the rounds
    pread = Entry("load", "pread", LoadOptions(workers=4, threads=1))
    job.entries.append(pread)
    job.runs += [_run(pread, 540 + 10 * r, r) for r in range(3)]  # 550: second best
    speed = {"sequential": 500, "direct": 450, "pread": 450}
    spec, entries, ran = _confirming(monkeypatch, job, speed)
    job.confirm_runs = matrix.confirm(spec, None, entries, {}, job, lambda _: None)  # type: ignore[arg-type]
    # direct's pairs leave it at 525 and pread (550) ahead of the pick (500): pread's turn
    assert ran == [
        ("sequential", 3),
        ("direct", 3),
        ("direct", 4),
        ("sequential", 4),
        ("sequential", 5),
        ("direct", 5),
        ("sequential", 6),
        ("pread", 6),
        ("pread", 7),
        ("sequential", 7),
        ("sequential", 8),
        ("pread", 8),
    ]
    found = regret_of(job)
    assert found is not None and found.best is not None
    assert found.best.name == "direct"  # both confirmed, direct ahead
    assert found.regret == pytest.approx(1 - 500 / 525)
    text = "".join(regret_table(job))
    assert "6 confirmation pairs, alternating, of the pick and core.load: direct" in text
    assert "then core.load: pread workers=4 threads=1, each of which beat it" in text
    ran.clear()  # at most CONFIRM_RIVALS alternatives are confirmed
    monkeypatch.setattr(matrix, "CONFIRM_RIVALS", 1)
    job.confirm_runs = []
    confirmed = matrix.confirm(spec, None, entries, {}, job, lambda _: None)  # type: ignore[arg-type]
    assert len(confirmed) == 2 * CONFIRM_PAIRS


def test_regret_on_its_own_is_one_bench_job_and_its_table(
    monkeypatch: Any, tmp_path: Path, capsys: Any
) -> None:
    """``python -m benchmarks.regret MODEL`` runs the bench's job on the model (recommend,
    rounds, confirmation) and reports the bench's own regret: one definition, not two."""
    from benchmarks import matrix, regret
    from modelmon.core import write_safetensors_model

    path = write_safetensors_model(tmp_path / "m", layers=1, hidden=64, intermediate=128, vocab=256)
    jobs: list[Job] = []

    def fake(job: Job, progress: Any = None) -> JobResult:
        jobs.append(job)
        return _job()

    monkeypatch.setattr(matrix, "run_job", fake)
    out = tmp_path / "r.json"
    assert (
        regret.main(
            [str(path), "--budget", "30", "--json", str(out), "--md", str(tmp_path / "r.md")]
        )
        == 0
    )
    (job,) = jobs
    assert (job.cache, job.repeats, job.recommend_budget_s, job.diagnose) == (
        "cold",
        3,
        30.0,
        False,
    )
    assert {e.kind for e in job.entries} == {"peer"} and "safetensors" in {
        e.name for e in job.entries
    }
    result = json.loads(out.read_text())
    assert result["regret"] == round(1 - 485 / 610, 3) and result["pick_runs"] == 6
    assert "regret = 1 − pick / best = **20.5%**" in (tmp_path / "r.md").read_text()


def test_the_pick_applied_is_judged_against_the_evidence_it_was_picked_on() -> None:
    from benchmarks.regret_tables import regret_targets

    job = _job()
    assert job.recommendation is not None
    pick = job.recommendation.pick
    other = CandidateRow("pread workers=4 threads=1", "", False, 3, 900.0, 0, 0, "", "")
    for evidence, met in ((520.0, True), (600.0, False)):
        rows = (other, *_record(pick, evidence).candidates)
        job.recommendation = dataclasses.replace(job.recommendation, candidates=rows)
        applied = [t for t in regret_targets(job) if t.target.startswith("the pick applied")]
        assert len(applied) == 1 and applied[0].met is met
        # the pick's own core.load runs (500, 510, 520), not its twin's or the rival's
        assert applied[0].measured.startswith(f"510 / {evidence:.0f} MB/s")
    job.recommendation = _record(pick)  # nothing measured for the pick: no evidence to judge
    assert not [t for t in regret_targets(job) if t.target.startswith("the pick applied")]
