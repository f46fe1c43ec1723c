"""Tables of what a user applies, from a job's rounds (every number from the same runs):

- core.load (in-process, what a user applies) against measure (worker processes) for the same
  configurations, against the parallel-read ceiling and Run:ai, with the targets met/missed;
- ranks on FUSE: N replicas against 1, aggregate MB/s and the straggler.
"""

from __future__ import annotations

import statistics

from benchmarks.records import BenchResults, JobResult
from benchmarks.summary import (
    CEILING_TARGETS,
    REFERENCE_WORDS,
    RSS_TARGET,
    Row,
    Target,
    bound_of,
    ceiling_of,
    median_round_ratio,
    paired_ratio,
    reported_in_rounds,
    round_rates,
    rows_of,
)
from modelmon.core.options import LoadOptions, format_spec
from modelmon.core.runs import get_strategy

RUNAI = "runai"
LOAD_VS_MEASURE = 0.10  # core.load within 10 % of measure
RUNAI_TARGET = 1.2
THREADS_TARGET = 0.8
THREADS_SPEC = format_spec("sequential", LoadOptions(workers=1, threads=4, chunk=16 << 20))
PROCESSES_SPEC = format_spec("sequential", LoadOptions(workers=4, threads=1, chunk=16 << 20))


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def ratio_text(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def by_form(job: JobResult) -> dict[tuple[str, str], Row]:
    """(kind, spec) → row, for the job's entries ("strategy" is measure, "load" core.load)."""
    rows = {r.label: r for r in rows_of(job)}
    return {(e.kind, e.spec): rows[e.label] for e in job.entries}


def shown(job: JobResult, row: Row | None) -> str:
    if row is None:
        return "–"
    if row.ok:
        return _mb(row.median)
    bound = bound_of(job, row)
    if bound is not None:
        return f"< {bound:,.0f} (stopped at the {job.time_limit_s or 0:g} s limit)"
    return f"failed: {row.error or '?'}"


def runai_of(job: JobResult) -> Row | None:
    """Run:ai's fastest measured setting (its defaults, or the one recommend picked)."""
    found = [r for r in rows_of(job) if r.kind == "peer" and r.name == RUNAI]
    return max(found, key=lambda r: (r.ok, r.median)) if found else None


def modelmon_best(job: JobResult) -> Row | None:
    mine = [r for r in rows_of(job) if r.kind in ("strategy", "load") and r.ok]
    return max(mine, key=lambda r: r.median) if mine else None


def applied_table(job: JobResult) -> str:
    forms = by_form(job)
    ceiling, runai = ceiling_of(job), runai_of(job)
    specs = list(dict.fromkeys(spec for kind, spec in forms if kind == "load"))
    cache = job.cache
    lines = [
        f"| configuration | core.load MB/s | × ceiling | measure MB/s | × ceiling | load / "
        f"measure | × Run:ai (load) | core.load peak RSS / bytes | {cache} |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for spec in specs:
        load, measured = forms.get(("load", spec)), forms.get(("strategy", spec))
        name = f"**{spec}** (recommended)" if load and load.role == "recommended" else spec
        load_mbps = load.median if load is not None and load.ok else None
        measure_mbps = measured.median if measured is not None and measured.ok else None
        both = load_mbps / measure_mbps if load_mbps and measure_mbps else None
        to_runai = load_mbps / runai.median if load_mbps and runai and runai.ok else None
        rss = _rss_ratio(job, load) if load else None
        lines.append(
            f"| {name} | {shown(job, load)} | "
            f"{ratio_text(load_mbps / ceiling if load_mbps and ceiling else None)} | "
            f"{shown(job, measured)} | "
            f"{ratio_text(measure_mbps / ceiling if measure_mbps and ceiling else None)} | "
            f"{ratio_text(both)} | {ratio_text(to_runai)} | {ratio_text(rss)} | "
            f"{'✓' if load and load.verified else '✗'} |"
        )
    name = REFERENCE_WORDS[cache]
    lines.append(f"| {name} | {_mb(ceiling)} | 1.00× | | | | | | |")
    if runai is not None:
        lines.append(
            f"| peer: Run:ai Model Streamer | {shown(job, runai)} | "
            f"{ratio_text(runai.median / ceiling if runai.ok and ceiling else None)} "
            "| | | | 1.00× | | |"
        )
    return "\n".join(lines)


def _rss_ratio(job: JobResult, row: Row) -> float | None:
    peaks = [r.peak_rss for r in job.runs_of(row.label) if r.status == "ok"]
    if not peaks or not job.model_bytes:
        return None
    return float(statistics.median(peaks)) / job.model_bytes


def _rss_before(job: JobResult, row: Row) -> float | None:
    """The child's RSS when it said ready (interpreter, imports, parsed model), median."""
    found = [r.rss_ready for r in job.runs_of(row.label) if r.status == "ok" and r.rss_ready]
    return float(statistics.median(found)) if found else None


def best_peer(job: JobResult) -> Row | None:
    """The fastest other loader measured in the job's rounds (Run:ai, the library...)."""
    peers = [r for r in rows_of(job) if r.kind == "peer" and r.ok]
    return max(peers, key=lambda r: r.median) if peers else None


def _peer_target(job: JobResult, section: str, best: Row | None) -> Target:
    """modelmon's best ≥ 1.2× the best peer; where that would be past 0.9× of the bound
    (the peer is itself near the bound), the bound's target takes its place: no loader can
    beat a peer by 1.2× when the storage gives less than that."""
    wanted_of_bound = CEILING_TARGETS[(job.env, job.cache)]
    text = (
        f"modelmon's best ≥ {RUNAI_TARGET:g}× the best peer, or ≥ {wanted_of_bound:g}× its "
        f"bound where {RUNAI_TARGET:g}× the peer would be past that"
    )
    peer = best_peer(job)
    if best is None or peer is None:
        return Target(section, text, "no peer measured" if best else "not measured", None, job)
    ratio, ceiling = best.median / peer.median, ceiling_of(job)
    measured = (
        f"{best.label}: {best.median:.0f} / {peer.label} {peer.median:.0f} MB/s = {ratio:.2f}×"
    )
    if ceiling and RUNAI_TARGET * peer.median > wanted_of_bound * ceiling:
        of_bound = best.median / ceiling
        measured += (
            f"; the peer ran at {peer.median / ceiling:.2f}× the bound ({ceiling:.0f} MB/s), "
            f"so the target is {wanted_of_bound:g}× the bound: {of_bound:.2f}×"
        )
        return Target(section, text, measured, of_bound >= wanted_of_bound and ratio >= 1, job)
    why = (
        f"{peer.label} ran at {peer.low:.0f}–{peer.high:.0f} MB/s, the best modelmon "
        f"configuration ({best.label}) at {best.low:.0f}–{best.high:.0f} MB/s; "
        f"it is {RUNAI_TARGET / ratio - 1:.0%} short of the target"
    )
    return Target(section, text, measured, ratio >= RUNAI_TARGET, job, why)


def applied_targets(job: JobResult) -> list[Target]:
    """The targets on core.load and measure for one job: each against the parallel-read
    ceiling and Run:ai."""
    env, cache = job.env, job.cache
    section = f"{env} · {job.model_key} · {cache}"
    forms, found = by_form(job), []
    best = modelmon_best(job)
    if env in ("local", "fuse") and cache == "cold":
        found.append(_peer_target(job, section, best))
    if env == "fuse" and cache == "cold":
        processes = forms.get(("strategy", PROCESSES_SPEC))
        for kind, form in (("load", "core.load"), ("strategy", "measure")):
            threads = forms.get((kind, THREADS_SPEC))
            text = (
                f"{form} `{THREADS_SPEC}` (1 worker, 4 threads) ≥ {THREADS_TARGET:g}× "
                f"`{PROCESSES_SPEC}` (4 processes)"
            )
            if threads is None or processes is None or not processes.ok:
                found.append(Target(section, text, "not measured", None, job))
                continue
            value = threads.median if threads.ok else (bound_of(job, threads) or 0.0)
            ratio = value / processes.median
            found.append(
                Target(
                    section,
                    text,
                    f"{shown(job, threads)} / {processes.median:.0f} MB/s = {ratio:.2f}×",
                    threads.ok and ratio >= THREADS_TARGET,
                    job,
                    f"the threads reached {ratio:.2f}× the processes' MB/s, "
                    f"{1 - ratio / THREADS_TARGET:.0%} short",
                )
            )
    load = next((r for (k, _), r in forms.items() if k == "load" and r.role == "recommended"), None)
    measured = next(
        (r for (k, _), r in forms.items() if k == "strategy" and r.role == "recommended"), None
    )
    if load is not None and measured is not None:
        text = f"core.load vs measure of the recommended configuration within {LOAD_VS_MEASURE:.0%}"
        if load.ok and measured.ok:
            ratio = load.median / measured.median
            paired = paired_forms(job, load.label, measured.label)
            judged = ratio if paired is None else paired
            found.append(
                Target(
                    section,
                    text,
                    f"{load.median:.0f} / {measured.median:.0f} MB/s = {ratio:.2f}×; paired by "
                    f"round: {'–' if paired is None else f'{paired:.2f}×'}",
                    abs(judged - 1) <= LOAD_VS_MEASURE,
                    job,
                    f"core.load ran at {load.low:.0f}–{load.high:.0f} MB/s and measure at "
                    f"{measured.low:.0f}–{measured.high:.0f} MB/s over the same rounds; "
                    f"{abs(judged - 1) - LOAD_VS_MEASURE:.0%} beyond the tolerance"
                    + reported_in_rounds(job.runs, load.label, measured.label),
                )
            )
        else:
            found.append(Target(section, text, "a run failed", False, job, "see the table"))
        rss = _rss_ratio(job, load) if load.ok else None
        before = _rss_before(job, load) if load.ok else None
        if rss is not None and cache == "cold":
            size = job.model_bytes
            beside = "" if before is None else f", of which {before / 2**20:,.0f} MiB before go"
            why = (
                f"the child's peak ({rss * size / 2**20:,.0f} MiB, VmHWM{beside}) against "
                f"{size / 2**20:,.0f} MiB of arrays"
            )
            if get_strategy(load.name).maps_file:
                why += (
                    f"; {load.name} reads through a mapping of the file, whose pages count in "
                    "RSS beside the copies while it is mapped"
                )
            # Judged on what the load added to the process: the interpreter, numpy and the
            # parsed model (RSS at ready) are there before any load, and on a 0.36 GB model
            # they alone were 0.12× its bytes.
            grew = rss if before is None else rss - before / size
            found.append(
                Target(
                    section,
                    f"peak RSS of core.load (recommended) ≤ {RSS_TARGET}× bytes "
                    "(peak VmHWM − RSS at ready)",
                    f"{grew:.2f}×"
                    + (
                        ""
                        if before is None
                        else f" (VmHWM {rss:.2f}×, {before / size:.2f}× at ready)"
                    ),
                    grew <= RSS_TARGET,
                    job,
                    why,
                )
            )
    return found


def paired_forms(job: JobResult, load: str, measured: str) -> float | None:
    """Median over rounds of core.load's MB/s / measure's in the same round (the two run side
    by side: ``matrix.side_by_side``), so that the disk's drift between rounds cancels; None
    with fewer than 3 such rounds."""
    return median_round_ratio(round_rates(job, load), round_rates(job, measured), rounds=3)


# --- ranks -------------------------------------------------------------------------------------


def ranks_section(results: BenchResults) -> list[str]:
    out = []
    for job in results.jobs:
        found = job.ranks
        if not found:
            continue
        one, many, n = found.one, found.many, found.replicas
        lines = [
            f"{job.env} · {job.model_key}: `{found.spec}`, discard mode (N copies of "
            "the model would not fit in RAM beside the rest), cold, alternating.\n",
            "| ranks | runs | aggregate MB/s (median) | per-rank MB/s (last run) | straggler "
            "(max / median seconds) | all cold |",
            "| ---: | ---: | ---: | --- | ---: | --- |",
        ]
        for count, part in ((1, one), (n, many)):
            last = part.rounds[-1].rank_mbps if part.rounds else ()
            straggler = part.median_straggler
            lines.append(
                f"| {count} | {part.ok}/{len(part.rounds)} | {_mb(part.median_mbps)} | "
                f"{', '.join(f'{x:,.0f}' for x in last)} | "
                f"{'–' if straggler is None else f'{straggler:.2f}'} | "
                f"{'✓' if part.all_cold else '✗'} |"
            )
        out.append("\n".join(lines) + "\n")
        if one.median_mbps and many.median_mbps:
            out.append(
                f"{n} replicas together received {many.median_mbps / one.median_mbps:.2f}× "
                "the bytes per second of one. Replicas read the same files, so the page cache "
                "may serve a byte fetched by one rank to the others: the aggregate counts what "
                "the ranks received, not what the storage served.\n"
            )
    return out or ["Not run (no FUSE environment in this run).\n"]


def applied_sections(results: BenchResults) -> list[str]:
    out = []
    for job in results.jobs:
        if not any(e.kind == "load" for e in job.entries):
            continue
        out.append(f"#### {job.env} · {job.model_key} · {job.cache}\n")
        out.append(applied_table(job) + "\n")
        paired = [
            (e.label, paired_ratio(job, e.label))
            for e in job.entries
            if e.kind == "load" and e.role == "recommended"
        ]
        for label, ratio in paired:
            if ratio is not None:
                out.append(f"{label}: {ratio:.2f}× the ceiling paired by round.\n")
    return out or ["No job measured core.load.\n"]
