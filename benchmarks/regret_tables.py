"""The regret of recommend()'s pick, from a job's rounds: the pick applied through
``core.load(config=)`` in a fresh process, against every strong alternative and the installed
peers applied as a user would; its table, the summary over environments and the targets
(regret, evidence runs, budget kept)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from benchmarks.records import BenchResults, JobResult, RecommendationRecord, Run
from benchmarks.summary import Row, Target, judged_ratio_text, reported_in_rounds, rows_of
from benchmarks.tables import ratio_text, shown
from modelmon.core.options import LoadOptions
from modelmon.core.runs import in_process

REGRET_TARGET = 0.10
BUDGET_SLACK = 0.15
EVIDENCE_TARGET = 3  # cold runs the pick rests on
APPLIED_TARGET = 0.9  # the written config, applied cold, against the search's own evidence
CONFIRM_PAIRS = 3  # the pick and the alternative that beat it, after the rounds (matrix.confirm)
CONFIRM_RIVALS = 2  # alternatives confirmed in turn, while one still beats the pick


@dataclass(frozen=True)
class Regret:
    """The pick applied against the best applied alternative, over the rounds and the
    confirmation pairs."""

    rec: RecommendationRecord
    rows: list[Row]  # every applied entry (core.load and peers)
    pick: Row | None
    best: Row | None  # the pick itself when nothing beat it
    pick_mbps: float | None  # median of the pick's runs and its twins'
    pick_runs: int
    regret: float | None  # 1 − pick / best
    twins: list[Row] = field(default_factory=list)  # core.load entries applying the same load
    load: LoadOptions | None = None  # the in-process load the twins share with the pick


def every_run(job: JobResult) -> list[Run]:
    """The rounds and the confirmation pairs: only the regret reads the pairs; every other
    table compares the rounds alone."""
    return [*job.runs, *job.confirm_runs]


def regret_of(job: JobResult, confirm_runs: list[Run] | None = None) -> Regret | None:
    """The pick applied (core.load with recommend's config) against every applied
    alternative and the peers, from the job's rounds and confirmation pairs (``confirm_runs``:
    in place of the job's own); None without a recommendation. A core.load entry that applies
    the same in-process load as the pick (``same_load``) is the same choice for a user: its
    runs count as the pick's (``pick_mbps`` is the median of them all), and it is no rival."""
    rec = job.recommendation
    if rec is None:
        return None
    runs = [*job.runs, *(job.confirm_runs if confirm_runs is None else confirm_runs)]
    rows = [r for r in rows_of(job, runs) if r.kind in ("load", "peer")]
    kind = "peer" if rec.pick_is_peer else "load"
    pick = next((r for r in rows if r.kind == kind and r.role == "recommended"), None)
    if pick is None or not pick.ok:
        return Regret(rec, rows, pick, None, None, 0, None)
    shared = {r.label: same_load(job, pick.label, r.label) for r in rows if r is not pick}
    twins = [r for r in rows if shared.get(r.label) is not None]
    pooled = {pick.label, *(r.label for r in twins)}
    rates = [r.mbps for r in runs if r.label in pooled and r.status == "ok"]
    pick_mbps = statistics.median(rates)
    rivals = [r for r in rows if r.ok and r.label not in pooled]
    best = max(rivals, key=lambda r: r.median, default=None)
    if best is None or best.median <= pick_mbps:
        best = pick
    regret = 0.0 if best is pick else 1 - pick_mbps / best.median
    load = shared[twins[0].label] if twins else None
    return Regret(rec, rows, pick, best, pick_mbps, len(rates), regret, twins, load)


def regret_table(job: JobResult) -> list[str]:
    found = regret_of(job)
    if found is None:
        return []
    rec, pick, best, twins, pick_mbps = (
        found.rec,
        found.pick,
        found.best,
        found.twins,
        found.pick_mbps,
    )
    lines = [
        "| applied as a user would | runs | MB/s median | min–max | × pick | all cold |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in found.rows:
        to_pick = row.median / pick_mbps if pick_mbps and row.ok else None
        name = f"**{row.label}** (pick)" if row is pick else row.label
        if row in twins:
            name += " (the pick's load)"
        spread = f"{row.low:,.0f}–{row.high:,.0f}" if row.ok else "–"
        lines.append(
            f"| {name} | {row.ok}/{row.runs} | {shown(job, row)} | {spread} | "
            f"{ratio_text(to_pick)} | {'✓' if row.verified else '✗'} |"
        )
    text = (
        f"`recommend(budget_s={rec.budget_s:g})` took {rec.elapsed_s:.0f} s "
        f"({rec.elapsed_s / rec.budget_s - 1:+.0%} of the budget) and picked **{rec.pick}** on "
        f"{rec.evidence_runs} cold runs"
        + (" (the top two were within noise: the more robust one was picked)" if rec.tie else "")
        + "."
    )
    if found.load is not None and pick is not None:
        text += (
            f" {' and '.join(t.label for t in twins)} "
            f"{'applies' if len(twins) == 1 else 'apply'} the same in-process load as the pick "
            f"({pick.name}, {found.load.threads} reader threads in one process): a user gets "
            f"that load either way, so their runs count as the pick's ({found.pick_runs} runs, "
            f"median {pick_mbps:,.0f} MB/s; × pick is against it)."
        )
    confirmed = job.confirm_runs
    if confirmed:
        first = min(r.repeat for r in confirmed) + 1
        rivals = list(dict.fromkeys(r.label for r in confirmed if r.role != "recommended"))
        text += (
            f" Rounds {first}–{max(r.repeat for r in confirmed) + 1} are "
            f"{len(confirmed) // 2} confirmation pairs, alternating, of the pick and "
            + " then ".join(rivals)
            + ", each of which beat it over the runs before; they count in this table only."
        )
    if found.regret is not None and best is not None:
        text += (
            f" Re-measured here, the best was **{best.label}**: regret = 1 − pick / best = "
            f"**{found.regret:.1%}**."
        )
    if rec.pick_is_peer:
        text += (
            f" The pick is a peer loader; the written config holds modelmon's best, "
            f"{rec.spec}, for `core.load(config=)`."
        )
    return ["\n".join(lines) + "\n", text + "\n"]


def _mark(met: bool) -> str:
    return " ✓" if met else " ✗"


def regret_summary(results: BenchResults) -> list[str]:
    """One row per environment: the pick, regret, the pick applied against its evidence,
    evidence runs, budget kept."""
    lines = [
        "| environment | pick (applied through core.load(config=)) | best re-measured | regret "
        "| applied / evidence | evidence runs | budget / took |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    any_row = False
    for job in results.jobs:
        found = regret_of(job)
        if found is None:
            continue
        any_row = True
        rec, regret, pick = found.rec, found.regret, found.pick
        kept = abs(rec.elapsed_s / rec.budget_s - 1) <= BUDGET_SLACK
        evidence = rec.evidence_mbps()
        applied = "–"
        if evidence and pick is not None and pick.ok:
            ratio = pick.median / evidence
            applied = f"{ratio:.2f}×{_mark(ratio >= APPLIED_TARGET)}"
        shown_regret = "–" if regret is None else f"{regret:.1%}{_mark(regret <= REGRET_TARGET)}"
        lines.append(
            f"| {job.env} · {job.model_key} | {rec.pick} | "
            f"{found.best.label if found.best else '–'} | {shown_regret} | {applied} | "
            f"{rec.evidence_runs}{_mark(rec.evidence_runs >= EVIDENCE_TARGET)} | "
            f"{rec.budget_s:g} s / {rec.elapsed_s:.0f} s{_mark(kept)} |"
        )
    return ["\n".join(lines) + "\n"] if any_row else ["No job ran recommend().\n"]


def same_load(job: JobResult, one: str, other: str) -> LoadOptions | None:
    """The in-process load two core.load entries both apply, when they differ only in how
    their readers are split between workers and threads: in one process both run
    workers × threads reader threads (``loading.inproc``), so what separates them is noise;
    None when they are different loads."""
    entries = {e.label: e for e in job.entries if e.kind == "load"}
    a, b = entries.get(one), entries.get(other)
    if a is None or b is None or a.name != b.name:
        return None
    load = in_process(a.options)
    return load if load == in_process(b.options) else None


def applied_target(found: Regret, section: str, job: JobResult) -> list[Target]:
    """The pick applied as a user would (``core.load(config=)`` of the written config, cold,
    in a fresh process) against the evidence recommend() measured it on: a config that
    loads slower than its evidence says tells the user a wrong number."""
    pick, evidence = found.pick, found.rec.evidence_mbps()
    text = f"the pick applied (core.load(config=), cold) ≥ {APPLIED_TARGET:g}× its evidence"
    if evidence is None:
        return []
    if pick is None or not pick.ok:
        return [Target(section, text, "the pick applied: no run finished", False, job)]
    ratio = pick.median / evidence
    return [
        Target(
            section,
            text,
            f"{pick.median:.0f} / {evidence:.0f} MB/s = {judged_ratio_text(ratio, APPLIED_TARGET)}",
            ratio >= APPLIED_TARGET,
            job,
            f"applied, the pick ran at {pick.low:.0f}–{pick.high:.0f} MB/s over the rounds; "
            f"recommend() measured it at a median of {evidence:.0f} MB/s on "
            f"{found.rec.evidence_runs} runs, earlier in the same session",
        )
    ]


def regret_targets(job: JobResult) -> list[Target]:
    found = regret_of(job)
    if found is None:
        return []
    rec, section = found.rec, f"{job.env} · {job.model_key} · regret"
    out = []
    pick, best, regret = found.pick, found.best, found.regret
    if regret is not None and pick is not None and best is not None:
        out.append(
            Target(
                section,
                f"regret ≤ {REGRET_TARGET:.0%}",
                f"{regret:.1%} (the pick {found.pick_mbps:.0f} MB/s on {found.pick_runs} "
                + (
                    "runs, the fastest applied)"
                    if best is pick
                    else f"runs vs {best.label} {best.median:.0f} MB/s)"
                ),
                regret <= REGRET_TARGET,
                job,
                f"over the rounds the pick ran at {pick.low:.0f}–{pick.high:.0f} MB/s and "
                f"{best.label} at {best.low:.0f}–{best.high:.0f} MB/s; recommend() rested "
                f"its pick on {rec.evidence_runs} runs within its {rec.budget_s:g} s budget"
                + reported_in_rounds(
                    every_run(job),
                    pick.label,
                    best.label,
                    {pick.label: "the pick", best.label: "the best"},
                ),
            )
        )
    out.extend(applied_target(found, section, job))
    out.append(
        Target(
            section,
            f"the pick rests on ≥ {EVIDENCE_TARGET} cold runs",
            str(rec.evidence_runs),
            rec.evidence_runs >= EVIDENCE_TARGET,
            job,
            "the budget left room for fewer runs of the pick (see its ranking)",
        )
    )
    ratio = rec.elapsed_s / rec.budget_s
    out.append(
        Target(
            section,
            f"budget kept within {BUDGET_SLACK:.0%}",
            f"{rec.elapsed_s:.0f} s for {rec.budget_s:g} s ({ratio - 1:+.0%})",
            abs(ratio - 1) <= BUDGET_SLACK,
            job,
            (
                "recommend() always measures the ceilings and makes one complete load, however slow"
                if ratio > 1
                else "recommend() stopped when no further run at its measured pace fitted in "
                "what was left of the budget"
            ),
        )
    )
    return out
