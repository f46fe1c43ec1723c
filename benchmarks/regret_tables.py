"""The regret of recommend()'s pick, from a job's rounds: the pick applied through
``core.load(config=)`` in a fresh process, against every strong alternative and the installed
peers applied as a user would; its table, the summary over environments and the targets
(regret, evidence runs, budget kept)."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.summary import Target, judged_ratio_text, reported_in_rounds, rows_of
from benchmarks.tables import ratio_text, shown
from modelmon.core import LoadOptions, in_process

REGRET_TARGET = 0.10
BUDGET_SLACK = 0.15
APPLIED_TARGET = 0.9  # the written config, applied cold, against the search's own evidence
CONFIRM_PAIRS = 3  # the pick and the alternative that beat it, after the rounds (matrix.confirm)
CONFIRM_RIVALS = 2  # alternatives confirmed in turn, while one still beats the pick


def with_confirmation(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` with its confirmation pairs (``confirm_runs``, see ``matrix.confirm``) among its
    runs: only the regret reads them; every other table compares the rounds alone."""
    return {**job, "runs": [*job["runs"], *job.get("confirm_runs", [])]}


def regret_of(job: dict[str, Any]) -> dict[str, Any] | None:
    """The pick applied (core.load with recommend's config) against every applied
    alternative and the peers, from the job's rounds and confirmation pairs; None without a
    recommendation. A core.load entry that applies the same in-process load as the pick
    (``same_load``) is the same choice for a user: its runs count as the pick's
    (``pick_mbps`` is the median of them all), and it is not a rival."""
    rec = job.get("recommendation")
    if not rec:
        return None
    every = with_confirmation(job)
    rows = [r for r in rows_of(every) if r.kind in ("load", "peer")]
    kind = "peer" if rec.get("pick_is_peer") else "load"
    pick = next((r for r in rows if r.kind == kind and r.role == "recommended"), None)
    found: dict[str, Any] = {"rec": rec, "rows": rows, "pick": pick, "twins": [], "load": None}
    if pick is None or not pick.ok:
        return {**found, "best": None, "regret": None, "pick_mbps": None, "pick_runs": 0}
    shared = {r.label: same_load(job, pick.label, r.label) for r in rows if r is not pick}
    twins = [r for r in rows if shared.get(r.label) is not None]
    pooled = {pick.label, *(r.label for r in twins)}
    rates = [r["mbps"] for r in every["runs"] if r["label"] in pooled and r["status"] == "ok"]
    pick_mbps = statistics.median(rates)
    rivals = [r for r in rows if r.ok and r.label not in pooled]
    best = max(rivals, key=lambda r: r.median, default=None)
    if best is None or best.median <= pick_mbps:
        best = pick
    return {
        **found,
        "twins": twins,
        "load": shared[twins[0].label] if twins else None,  # the in-process load they share
        "best": best,
        "pick_mbps": pick_mbps,
        "pick_runs": len(rates),
        "regret": 0.0 if best is pick else 1 - pick_mbps / best.median,
    }


def regret_table(job: dict[str, Any]) -> list[str]:
    found = regret_of(job)
    if found is None:
        return []
    rec, pick, best, twins = found["rec"], found["pick"], found["best"], found["twins"]
    pick_mbps = found["pick_mbps"]
    lines = [
        "| applied as a user would | runs | MB/s median | min–max | × pick | all cold |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in found["rows"]:
        to_pick = row.median / pick_mbps if pick_mbps and row.ok else None
        name = f"**{row.label}** (pick)" if row is pick else row.label
        if row in twins:
            name += " (the pick's load)"
        spread = f"{row.low:,.0f}–{row.high:,.0f}" if row.ok else "–"
        lines.append(
            f"| {name} | {row.ok}/{row.runs} | {shown(job, row)} | {spread} | "
            f"{ratio_text(to_pick)} | {'✓' if row.verified else '✗'} |"
        )
    elapsed, budget = rec["elapsed_s"], rec["budget_s"]
    text = (
        f"`recommend(budget_s={budget:g})` took {elapsed:.0f} s "
        f"({elapsed / budget - 1:+.0%} of the budget) and picked **{rec['pick']}** on "
        f"{rec['evidence_runs']} cold runs"
        + (" (the top two were within noise: the more robust one was picked)" if rec["tie"] else "")
        + "."
    )
    load = found["load"]
    if load is not None:
        text += (
            f" {' and '.join(t.label for t in twins)} "
            f"{'applies' if len(twins) == 1 else 'apply'} the same in-process load as the pick "
            f"({pick.name}, {load.threads} reader threads in one process): a user gets that "
            f"load either way, so their runs count as the pick's ({found['pick_runs']} runs, "
            f"median {pick_mbps:,.0f} MB/s; × pick is against it)."
        )
    confirmed = job.get("confirm_runs", [])
    if confirmed:
        first = min(r["repeat"] for r in confirmed) + 1
        rivals = list(dict.fromkeys(r["label"] for r in confirmed if r["role"] != "recommended"))
        text += (
            f" Rounds {first}–{max(r['repeat'] for r in confirmed) + 1} are "
            f"{len(confirmed) // 2} confirmation pairs, alternating, of the pick and "
            + " then ".join(rivals)
            + ", each of which beat it over the runs before; they count in this table only."
        )
    if found["regret"] is not None:
        text += (
            f" Re-measured here, the best was **{best.label}**: regret = 1 − pick / best = "
            f"**{found['regret']:.1%}**."
        )
    if rec.get("pick_is_peer"):
        text += (
            f" The pick is a peer loader; the written config holds modelmon's best, "
            f"{rec['spec']}, for `core.load(config=)`."
        )
    return ["\n".join(lines) + "\n", text + "\n"]


def regret_summary(results: dict[str, Any]) -> list[str]:
    """One row per environment: the pick, regret, the pick applied against its evidence,
    evidence runs, budget kept."""
    lines = [
        "| environment | pick (applied through core.load(config=)) | best re-measured | regret "
        "| applied / evidence | evidence runs | budget / took |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    any_row = False
    for job in results.get("jobs", []):
        found = regret_of(job)
        if found is None:
            continue
        any_row = True
        rec, best = found["rec"], found["best"]
        regret = found["regret"]
        kept = abs(rec["elapsed_s"] / rec["budget_s"] - 1) <= BUDGET_SLACK
        pick, evidence = found["pick"], evidence_mbps(rec)
        applied = "–"
        if evidence and pick is not None and pick.ok:
            ratio = pick.median / evidence
            applied = f"{ratio:.2f}×{' ✓' if ratio >= APPLIED_TARGET else ' ✗'}"
        lines.append(
            f"| {job['env']} · {job['model_key']} | {rec['pick']} | "
            f"{best.label if best else '–'} | "
            f"{'–' if regret is None else f'{regret:.1%}'}"
            f"{'' if regret is None else (' ✓' if regret <= REGRET_TARGET else ' ✗')} | "
            f"{applied} | {rec['evidence_runs']}{' ✓' if rec['evidence_runs'] >= 3 else ' ✗'} | "
            f"{rec['budget_s']:g} s / {rec['elapsed_s']:.0f} s{' ✓' if kept else ' ✗'} |"
        )
    return ["\n".join(lines) + "\n"] if any_row else ["No job ran recommend().\n"]


def same_load(job: dict[str, Any], one: str, other: str) -> LoadOptions | None:
    """The in-process load two core.load entries both apply, when they differ only in how
    their readers are split between workers and threads: in one process both run
    workers × threads reader threads (``loading.inproc``), so what separates them is noise;
    None when they are different loads."""
    entries = {e["label"]: e for e in job.get("entries", []) if e.get("kind") == "load"}
    a, b = entries.get(one), entries.get(other)
    if a is None or b is None or a["name"] != b["name"]:
        return None
    load = in_process(LoadOptions(**a["options"]))
    return load if load == in_process(LoadOptions(**b["options"])) else None


def evidence_mbps(rec: dict[str, Any]) -> float | None:
    """The median MB/s recommend() rested its pick on (its ranking's row for the pick)."""
    row = next((r for r in rec.get("ranked", []) if r["spec"] == rec["pick"]), None)
    return row["median_mbps"] if row and row["median_mbps"] else None


def applied_target(found: dict[str, Any], section: str, job: dict[str, Any]) -> list[Target]:
    """The pick applied as a user would (``core.load(config=)`` of the written config, cold,
    in a fresh process) against the evidence recommend() measured it on: a config that
    loads slower than its evidence says tells the user a wrong number."""
    pick, evidence = found["pick"], evidence_mbps(found["rec"])
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
            f"{found['rec']['evidence_runs']} runs, earlier in the same session",
        )
    ]


def regret_targets(job: dict[str, Any]) -> list[Target]:
    found = regret_of(job)
    if found is None:
        return []
    rec, section = found["rec"], f"{job['env']} · {job['model_key']} · regret"
    out = []
    regret = found["regret"]
    if regret is not None:
        pick, best = found["pick"], found["best"]
        out.append(
            Target(
                section,
                f"regret ≤ {REGRET_TARGET:.0%}",
                f"{regret:.1%} (the pick {found['pick_mbps']:.0f} MB/s on {found['pick_runs']} "
                + (
                    "runs, the fastest applied)"
                    if best is pick
                    else f"runs vs {best.label} {best.median:.0f} MB/s)"
                ),
                regret <= REGRET_TARGET,
                job,
                f"over the rounds the pick ran at {pick.low:.0f}–{pick.high:.0f} MB/s and "
                f"{best.label} at {best.low:.0f}–{best.high:.0f} MB/s; recommend() rested "
                f"its pick on {rec['evidence_runs']} runs within its {rec['budget_s']:g} s "
                "budget"
                + reported_in_rounds(
                    with_confirmation(job),
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
            "the pick rests on ≥ 3 cold runs",
            str(rec["evidence_runs"]),
            rec["evidence_runs"] >= 3,
            job,
            "the budget left room for fewer runs of the pick (see its ranking)",
        )
    )
    ratio = rec["elapsed_s"] / rec["budget_s"]
    out.append(
        Target(
            section,
            f"budget kept within {BUDGET_SLACK:.0%}",
            f"{rec['elapsed_s']:.0f} s for {rec['budget_s']:g} s ({ratio - 1:+.0%})",
            abs(ratio - 1) <= BUDGET_SLACK,
            job,
            (
                "recommend() always measures the ceilings and screens its first candidates "
                "once, however slow they are"
                if ratio > 1
                else "recommend() stopped when no further run at its measured pace fitted in "
                "what was left of the budget"
            ),
        )
    )
    return out
