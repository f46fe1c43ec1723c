"""The regret of recommend()'s pick (#11), from a job's rounds: the pick applied through
``core.load(config=)`` in a fresh process, against every strong alternative and the installed
peers applied as a user would; its table, the summary over environments and the targets
(regret, evidence runs, budget kept)."""

from __future__ import annotations

from typing import Any

from benchmarks.summary import Target, reported_in_rounds, rows_of
from benchmarks.tables import ratio_text, shown
from modelmon.core.loading.inproc import in_process
from modelmon.core.options import LoadOptions

REGRET_TARGET = 0.10
BUDGET_SLACK = 0.15


def regret_of(job: dict[str, Any]) -> dict[str, Any] | None:
    """The pick applied (core.load with recommend's config) against every applied
    alternative and the peers, from the job's rounds; None without a recommendation."""
    rec = job.get("recommendation")
    if not rec:
        return None
    rows = [r for r in rows_of(job) if r.kind in ("load", "peer")]
    kind = "peer" if rec.get("pick_is_peer") else "load"
    pick = next((r for r in rows if r.kind == kind and r.role == "recommended"), None)
    measured = [r for r in rows if r.ok]
    if pick is None or not pick.ok or not measured:
        return {"rec": rec, "rows": rows, "pick": pick, "best": None, "regret": None}
    best = max(measured, key=lambda r: r.median)
    return {
        "rec": rec,
        "rows": rows,
        "pick": pick,
        "best": best,
        "regret": 1 - pick.median / best.median,
    }


def regret_table(job: dict[str, Any]) -> list[str]:
    found = regret_of(job)
    if found is None:
        return []
    rec, pick, best = found["rec"], found["pick"], found["best"]
    lines = [
        "| applied as a user would | runs | MB/s median | min–max | × pick | all cold |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in found["rows"]:
        to_pick = row.median / pick.median if pick and pick.ok and row.ok else None
        name = f"**{row.label}** (pick)" if row is pick else row.label
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
    """One row per environment: the pick, regret, evidence runs, budget kept."""
    lines = [
        "| environment | pick (applied through core.load(config=)) | best re-measured | regret "
        "| evidence runs | budget / took |",
        "| --- | --- | --- | ---: | ---: | --- |",
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
        lines.append(
            f"| {job['env']} · {job['model_key']} | {rec['pick']} | "
            f"{best.label if best else '–'} | "
            f"{'–' if regret is None else f'{regret:.1%}'}"
            f"{'' if regret is None else (' ✓' if regret <= REGRET_TARGET else ' ✗')} | "
            f"{rec['evidence_runs']}{' ✓' if rec['evidence_runs'] >= 3 else ' ✗'} | "
            f"{rec['budget_s']:g} s / {rec['elapsed_s']:.0f} s{' ✓' if kept else ' ✗'} |"
        )
    return ["\n".join(lines) + "\n"] if any_row else ["No job ran recommend().\n"]


def same_load_text(job: dict[str, Any], one: str, other: str) -> str:
    """ "; both apply the same in-process load (...)" when two core.load entries differ only
    in how their readers are split between workers and threads: in one process both run
    workers × threads reader threads (``loading.inproc``), so what separates them is noise."""
    entries = {e["label"]: e for e in job.get("entries", []) if e.get("kind") == "load"}
    a, b = entries.get(one), entries.get(other)
    if a is None or b is None or a["name"] != b["name"]:
        return ""
    load = in_process(LoadOptions(**a["options"]))
    if load != in_process(LoadOptions(**b["options"])):
        return ""
    return (
        f"; both apply the same in-process load ({a['name']}, {load.threads} reader threads in "
        "one process), so the gap between them is the machine's, not the pick's"
    )


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
                f"{regret:.1%} ({pick.label} {pick.median:.0f} vs {best.label} "
                f"{best.median:.0f} MB/s)",
                regret <= REGRET_TARGET,
                job,
                f"over the rounds the pick ran at {pick.low:.0f}–{pick.high:.0f} MB/s and "
                f"{best.label} at {best.low:.0f}–{best.high:.0f} MB/s; recommend() rested "
                f"its pick on {rec['evidence_runs']} runs within its {rec['budget_s']:g} s "
                "budget"
                + same_load_text(job, pick.label, best.label)
                + reported_in_rounds(
                    job, pick.label, best.label, {pick.label: "the pick", best.label: "the best"}
                ),
            )
        )
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
