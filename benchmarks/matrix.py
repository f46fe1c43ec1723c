"""One environment × model job: the recommendation, then rounds of ceilings + every entry.

A job is plain JSON (``codec``), so the ``hdd`` part can run in a child process placed in
the blkio cgroup, whose spawned workers inherit the cgroup:

    python -m benchmarks.matrix JOBS.json OUT.json

Each repeat (round) measures the ceilings, then runs every entry once, in an order rotated by
one each round, so slow drift of the machine (this disk is a virtual one, shared with other
guests) spreads over all entries instead of favouring the ones that run first, and every
ratio to a ceiling compares runs of the same round.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import applied
from benchmarks.applied import config_for, load_run
from benchmarks.codec import from_json, to_json
from benchmarks.diagnose import diagnose
from benchmarks.jobs import Cache, Entry, Job
from benchmarks.records import Blkio, CeilingRuns, JobResult, Run, entry_run
from benchmarks.regret_tables import CONFIRM_PAIRS, CONFIRM_RIVALS, regret_of
from modelmon.core import Model, ProgramResult, measure_ceilings, open_model, recommend, run_for
from modelmon.core.runs import LoadRun
from modelmon.core.system import FREE_WORTH_NOTING

Progress = Callable[[str], None]


def _strategy_run(model: Model, entry: Entry, cache: str, limit: float | None) -> Run:
    result = LoadRun(model, entry.name, entry.options.with_(cache=cache), time_limit_s=limit).run()
    return entry_run(
        entry,
        result,
        peak_rss=sum(w.peak_rss for w in result.workers),
        worker_seconds=tuple(w.seconds for w in result.workers),
        worker_peak_rss=tuple(w.peak_rss for w in result.workers),
        notes=tuple(result.notes),
    )


def _peer_run(model: Model, entry: Entry, cache: Cache, limit: float | None) -> Run:
    """A peer's run by the child harness: cold, timed by what arrives (its own clock beside
    it); warm, by its own clock (nothing arrives from storage)."""
    outcome = run_for(model, entry.program, cache, time_limit_s=limit, monitor=False).run()
    result = outcome.result
    own = outcome.own if isinstance(outcome, ProgramResult) else None
    own = own or {}
    peak = int(own.get("peak_rss") or max((w.peak_rss for w in result.workers), default=0))
    ready = int(own.get("rss_ready") or 0)
    return entry_run(entry, result, peak_rss=peak, rss_ready=ready, notes=tuple(result.notes))


def blkio_counters() -> tuple[int, int] | None:
    """Read requests and bytes this process's blkio cgroup (v1) has let through, if any."""
    try:
        with open("/proc/self/cgroup") as handle:
            line = next(x for x in handle.read().splitlines() if ":blkio:" in x)
        folder = "/sys/fs/cgroup/blkio" + line.split(":", 2)[2]
        found = []
        for name in ("io_serviced", "io_service_bytes"):
            with open(f"{folder}/blkio.throttle.{name}") as handle:
                found.append(
                    sum(
                        int(x.split()[2])
                        for x in handle.read().splitlines()
                        if len(x.split()) == 3 and x.split()[1] == "Read"
                    )
                )
        return found[0], found[1]
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def run_job(job: Job, progress: Progress | None = None) -> JobResult:
    """Measure the job: ceilings, recommendation and every run."""
    say = progress or (lambda _: None)
    started = time.monotonic()
    load_at_start = os.getloadavg()[0]  # 1-minute load: others' work on this machine shows here
    blkio_start = blkio_counters() if job.env == "hdd" else None
    model = open_model(job.model_path)
    out = JobResult(job.env, job.model_key, job.cache, model.total_bytes, job.repeats)
    entries = list(job.entries)
    folder = Path(tempfile.mkdtemp(prefix="modelmon-bench-"))
    try:
        if job.recommend_budget_s > 0:
            rec = recommend(model, job.recommend_budget_s, workers=job.workers)
            picked, out.recommendation = applied.recommended(rec, folder)
            say(f"recommend picked {rec.used.spec} in {rec.budget.elapsed_s:.0f} s")
            for entry in picked:
                entries = with_recommended(entries, entry)
        written = out.recommendation.config if out.recommendation else None
        configs = {e.label: config_for(e, folder, written) for e in entries if e.kind == "load"}
        rounds(job, model, entries, configs, out, say)
        if out.recommendation is not None:
            out.confirm_runs = confirm(job, model, entries, configs, out, say)
        if job.ranks > 1:
            pick = next((e for e in entries if e.role == "recommended"), None)
            pick = pick or next(e for e in entries if e.kind == "strategy")
            out.ranks = applied.ranks(
                model, pick, job.ranks, max(1, job.repeats // 2), say, job.time_limit_s
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    best = best_strategy(entries, out.runs)
    if job.diagnose and best is not None:
        out.diagnosis = diagnose(model, best.name, best.options, job.cache)
        say(f"diagnosis of {best.label}: done")
    out.elapsed_s = time.monotonic() - started
    out.loadavg = (load_at_start, os.getloadavg()[0])
    blkio_end = blkio_counters() if blkio_start else None
    if blkio_start and blkio_end:  # what the throttle saw: requests and their average size
        reads, done = blkio_end[0] - blkio_start[0], blkio_end[1] - blkio_start[1]
        out.blkio = Blkio(reads, done, done / reads if reads else None)
    return out


def rounds(
    job: Job,
    model: Model,
    entries: list[Entry],
    configs: dict[str, str],
    out: JobResult,
    say: Progress,
) -> None:
    """Every round: the ceilings, then every entry once, rotated; a run stopped at the time
    limit bounds its entry, which is not run again (reported as bounded, not dropped)."""
    out.entries = list(entries)
    ceiling_runs: dict[str, list[float]] = {name: [] for name in job.ceilings}
    verified: dict[str, bool] = dict.fromkeys(job.ceilings, True)
    specs: dict[str, str] = {}
    throttles: dict[str, str] = {}
    slacks: dict[str, float] = {}
    for repeat in range(job.repeats):
        at = f"[{job.where} {repeat + 1}/{job.repeats}]"
        # The ceilings open every round, so each ratio compares runs made minutes apart at most.
        measured = measure_ceilings(model, job.ceilings, repeats=1, workers=job.workers)
        for ceiling in measured.items:
            ceiling_runs[ceiling.name].append(ceiling.mbps)
            verified[ceiling.name] = verified[ceiling.name] and bool(ceiling.verified)
            specs[ceiling.name] = ceiling.spec
            throttles[ceiling.name] = ceiling.throttle
            slacks[ceiling.name] = max(slacks.get(ceiling.name, 0.0), ceiling.slack)
            say(f"{at} ceiling {ceiling.name}: {ceiling.mbps:.0f}")
        # The bound of a load that keeps its bytes, this round: the lower of both.
        bound = measured.bound(keeps=True) if "memory_fill" in job.ceilings else None
        if bound is not None:
            ceiling_runs.setdefault("bound", []).append(bound.mbps)
            verified["bound"] = verified.get("bound", True) and bool(bound.verified)
            specs["bound"] = "the lower of storage and memory_fill, round by round"
            throttles["bound"] = bound.throttle
            slacks["bound"] = max(slacks.get("bound", 0.0), bound.slack)
        shift = repeat % len(entries) if entries else 0
        for entry in side_by_side(entries[shift:] + entries[:shift]):
            if entry.label in out.bounded:
                continue
            run = run_entry(job, model, entry, configs.get(entry.label), repeat)
            if run.status == "cancelled" and "time limit" in (run.error or ""):
                out.bounded.append(entry.label)
                bound = out.model_bytes / (job.time_limit_s or 1) / 1e6
                run = dataclasses.replace(run, bound_mbps=bound)
            out.runs.append(run)
            say(f"{at} {run_line(job, run)}")
    out.time_limit_s = job.time_limit_s
    out.ceilings = {
        name: CeilingRuns(
            statistics.median(runs),
            tuple(runs),
            specs.get(name, ""),
            verified[name],
            throttles.get(name, ""),
            slacks.get(name, 0.0),
        )
        for name, runs in ceiling_runs.items()
        if runs
    }


def run_entry(job: Job, model: Model, entry: Entry, config: str | None, repeat: int) -> Run:
    """One cold (or warm) run of ``entry`` as its kind is applied, labelled with its round."""
    limit = job.time_limit_s
    if entry.kind == "peer":
        run = _peer_run(model, entry, job.cache, limit)
    elif entry.kind == "load":
        assert config is not None
        run = load_run(model, entry, job.cache, config, limit)
    else:
        run = _strategy_run(model, entry, job.cache, limit)
    return dataclasses.replace(run, repeat=repeat)


def run_line(job: Job, run: Run) -> str:
    """A run for the progress lines: its speed, its cache state, a report pass inside it."""
    state = "cold" if run.cold else "warm" if run.warm else "NOT " + job.cache
    reported = run.host_reported or 0
    if reported >= FREE_WORTH_NOTING:  # a report pass inside the timing
        state += f"; {reported >> 20} MiB reported to the host while it ran"
    return f"{run.label}: {run.status} {run.mbps:.0f} MB/s ({state})" + (
        f" {run.error}" if run.error else ""
    )


def confirm(
    job: Job,
    model: Model,
    entries: list[Entry],
    configs: dict[str, str],
    out: JobResult,
    say: Progress,
) -> list[Run]:
    """When an applied alternative beat recommend()'s pick over the rounds, ``CONFIRM_PAIRS``
    more runs of the two, alternating which goes first: the best of several alternatives
    picked by the same runs that rank them is the one that drew the luckiest runs, so its
    lead over the rounds alone overstates the regret. When, with those runs, another
    alternative beats the pick, it is confirmed the same way (``CONFIRM_RIVALS`` at most):
    the best the regret names has then always been confirmed. Only the regret reads these."""
    by_label = {e.label: e for e in entries}
    confirmed: set[str] = set()
    runs: list[Run] = []
    while len(confirmed) < CONFIRM_RIVALS:
        found = regret_of(out, runs)
        if found is None or not found.regret or found.best is None or found.pick is None:
            break
        if found.best.label in confirmed:
            break
        confirmed.add(found.best.label)
        pair = (by_label[found.pick.label], by_label[found.best.label])
        first = job.repeats + len(runs) // 2
        for number in range(CONFIRM_PAIRS):
            for entry in pair if number % 2 == 0 else pair[::-1]:
                run = run_entry(job, model, entry, configs.get(entry.label), first + number)
                runs.append(run)
                say(f"[{job.where} confirming] {run_line(job, run)}")
    return runs


def side_by_side(order: list[Entry]) -> list[Entry]:
    """``order`` with each core.load entry run right after the same configuration measured in
    worker processes (where both are there): the load-vs-measure ratio of a round then
    compares two runs seconds apart, not a minute, on a disk whose speed drifts."""
    measured = {e.spec for e in order if e.kind == "strategy"}
    paired = [e for e in order if e.kind == "load" and e.spec in measured]
    out: list[Entry] = []
    for entry in order:
        if entry in paired:
            continue
        out.append(entry)
        out += [e for e in paired if entry.kind == "strategy" and e.spec == entry.spec]
    return out


def with_recommended(entries: list[Entry], pick: Entry) -> list[Entry]:
    """``entries`` with ``pick`` in place of the same kind and spec (added when not there);
    it keeps its role ("recommended" unless it says otherwise)."""
    marked = pick.marked(pick.role or "recommended")
    same = [i for i, e in enumerate(entries) if (e.kind, e.spec) == (pick.kind, pick.spec)]
    if not same:
        return [*entries, marked]
    if entries[same[0]].role == "recommended":  # an alternative does not unmark the pick
        return entries
    return [marked if i == same[0] else e for i, e in enumerate(entries)]


def best_strategy(entries: list[Entry], runs: list[Run]) -> Entry | None:
    """The modelmon configuration with the highest median MB/s (ok runs only)."""
    speeds: list[tuple[float, int]] = []
    for number, entry in enumerate(entries):
        mine = [r.mbps for r in runs if r.label == entry.label and r.status == "ok"]
        if entry.kind == "strategy" and mine:
            speeds.append((statistics.median(mine), number))
    return entries[max(speeds)[1]] if speeds else None


def main(argv: list[str]) -> int:
    """JOBS.json (a list of jobs) → OUT.json (a list of results), progress on stderr."""
    job_path, out_path = argv
    jobs = [from_json(Job, data) for data in json.loads(Path(job_path).read_text())]
    results = []
    for job in jobs:
        print(f"{job.env} · {job.model_key} · {job.cache}", file=sys.stderr, flush=True)
        results.append(run_job(job, lambda line: print(line, file=sys.stderr, flush=True)))
    Path(out_path).write_text(json.dumps(to_json(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
