"""docs/benchmarks.md from the results of one run (``run.py``): every number comes from it."""

from __future__ import annotations

import statistics
from collections import Counter

from benchmarks import extras, knobs, servers
from benchmarks.diagnose import summary_line
from benchmarks.engine_tables import markdown as engines_markdown
from benchmarks.explain import explain_miss
from benchmarks.jobs import PEER_ENGINES
from benchmarks.limits import section as limits_section
from benchmarks.object_tables import section as objects_section
from benchmarks.records import BenchResults, JobResult, ModelInfo
from benchmarks.regret_tables import (
    APPLIED_TARGET,
    CONFIRM_PAIRS,
    CONFIRM_RIVALS,
    regret_summary,
    regret_table,
)
from benchmarks.summary import REFERENCE_WORDS, MiB, Row, ceiling_of, library_of, rows_of
from benchmarks.tables import applied_sections, ranks_section, ratio_text, shown
from benchmarks.targets import all_targets
from benchmarks.watch_tables import watch_section
from modelmon.core import ENGINES
from modelmon.core.system import FREE_WORTH_NOTING

ENV_TITLES = {
    "local": "local disk",
    "hdd": "hdd: the same disk throttled like a hard disk (blkio cgroup v1: 150 MiB/s, 200 IOPS)",
    "fuse": "fuse: rclone serve http on loopback + rclone mount (no VFS cache; cold evicts the "
    "mounted files, the files behind the server stay as the page cache keeps them)",
}
TABLE_HEAD = (
    "| configuration | MB/s median | min–max | × {ceiling} | × library "
    "| {cache} verified (resident before) |\n| --- | ---: | ---: | ---: | ---: | --- |"
)


def _mb(value: float) -> str:
    return f"{value:,.0f}"


def _verified(row: Row, cache: str) -> str:
    if row.kind == "ceiling":
        return "–" if row.verified is None else ("✓" if row.verified else "✗")
    if row.resident is None:
        return "–"
    mark = "✓" if row.verified else "✗"
    return f"{mark} ({row.resident:.1%})"


def job_table(job: JobResult) -> str:
    rows = rows_of(job)
    cache = job.cache
    ceiling, library = ceiling_of(job), library_of(rows)
    lines = [TABLE_HEAD.format(ceiling=REFERENCE_WORDS[cache], cache=cache)]
    for row in rows:
        if not row.ok and row.kind != "ceiling":
            lines.append(f"| {row.label} | {shown(job, row)} | – | – | – | {row.error or ''} |")
            continue
        spread = f"{_mb(row.low)}–{_mb(row.high)}"
        to_ceiling = row.median / ceiling if ceiling else None
        to_library = row.median / library if library and row.kind != "ceiling" else None
        label = f"**{row.label}**" if row.role == "recommended" else row.label
        lines.append(
            f"| {label} | {_mb(row.median)} | {spread} | {ratio_text(to_ceiling)} | "
            f"{ratio_text(to_library)} | {_verified(row, cache)} |"
        )
    return "\n".join(lines)


def _job_title(job: JobResult, models: dict[str, ModelInfo]) -> str:
    model = models.get(job.model_key)
    size = f"{model.bytes / 1e9:.2f} GB" if model else "?"
    return f"{job.model_key} ({size}) · {job.cache}"


def _recommendation(job: JobResult) -> str:
    pick = job.recommendation
    if pick is None:
        return ""
    ranked = ", ".join(f"{c.spec} {c.median_mbps:.0f}" for c in pick.measured[:4])
    text = (
        f"`recommend(model, budget_s={pick.budget_s:g})` picked **{pick.spec}** in "
        f"{pick.elapsed_s:.0f} s (its own ranking, MB/s: {ranked})."
    )
    rows = rows_of(job)
    chosen = next((r for r in rows if r.role == "recommended"), None)
    best = max(
        (r for r in rows if r.kind == "strategy" and r.ok), key=lambda r: r.median, default=None
    )
    if chosen and best and chosen is not best and chosen.median < 0.8 * best.median:
        measured = {c.spec for c in pick.measured}
        why = (
            "within the budget each candidate got about one cold run, and on this machine "
            "one run can mislead (see the min–max columns)"
            if best.label in measured
            else f"recommend() did not get to measure {best.label} within its budget"
        )
        text += (
            f" Over the rounds above the pick ran at {chosen.median:.0f} MB/s, below "
            f"{best.label} at {best.median:.0f} MB/s: {why}."
        )
    if pick.elapsed_s > 1.5 * pick.budget_s:
        text += (
            f" It took {pick.elapsed_s:.0f} s for a {pick.budget_s:g} s budget: "
            "recommend() always measures the ceilings and makes one complete load, however "
            "slow."
        )
    return text


def _caveat(results: BenchResults) -> list[str]:
    loads = [x for j in results.jobs for x in (j.loadavg or ())]
    cores = results.machine.cores or 1
    if not loads or max(loads) <= cores:
        return []
    return [
        f"**Caveat:** other processes shared this {cores}-core machine during the run "
        f"(1-minute load average up to {max(loads):.1f}, see each table), and the local "
        "disk is a virtual one whose host we cannot see or drop caches on: the local "
        "numbers spread (min–max columns), so small ratios there are noise. The "
        "hdd and fuse numbers are set by the throttle and by rclone and spread far "
        "less.\n"
    ]


def environment_sections(results: BenchResults) -> list[str]:
    out: list[str] = []
    for env in ("local", "hdd", "fuse"):
        jobs = [j for j in results.jobs if j.env == env]
        skipped = results.skipped_envs.get(env)
        out.append(f"### {ENV_TITLES[env]}\n")
        if skipped:
            out.append(f"Skipped: {skipped}\n")
            continue
        if not jobs:
            out.append("Not run (not asked for).\n")
            continue
        for cache in ("cold", "warm"):
            plot = results.plots.get(f"{env}-{cache}")
            if plot:
                out.append(f"![{env} {cache}](benchmarks/{plot})\n")
        for job in jobs:
            out.append(f"#### {env} · {_job_title(job, results.models)}\n")
            out.append(job_table(job) + "\n")
            load = job.loadavg
            if load:
                out.append(
                    f"Load average (1 min) at start / end of this job: {load[0]:.1f} / "
                    f"{load[1]:.1f} on {results.machine.cores} cores; "
                    f"{job.elapsed_s:.0f} s in all.\n"
                )
            reported = host_report_line(job)
            if reported:
                out.append(reported + "\n")
            line = _recommendation(job)
            if line:
                out.append(line + "\n")
            out += regret_table(job)
            diagnosis = job.diagnosis
            if diagnosis is not None:
                out.append(
                    f"Monitored run of the best configuration ({diagnosis.strategy}): "
                    f"{summary_line(diagnosis)}.\n"
                )
    return out


def host_report_line(job: JobResult) -> str:
    """How many timed runs had free memory reported to the VM's host inside their timing
    (``host_memory.reported_notes``), and of which forms; "" where the kernel counts none."""
    counted = [r for r in job.runs if r.host_reported is not None]
    if not counted:
        return ""
    hit = [r for r in counted if (r.host_reported or 0) >= FREE_WORTH_NOTING]
    if not hit:
        return (
            f"Free page reporting: none of the {len(counted)} timed runs had free memory "
            "reported to the VM's host while it ran."
        )
    forms = Counter(r.label for r in hit)
    which = ", ".join(f"{label} ×{n}" for label, n in forms.most_common())
    mib = statistics.median(r.host_reported or 0 for r in hit) / 2**20
    return (
        f"Free page reporting: {len(hit)} of {len(counted)} timed runs had free memory reported "
        f"to the VM's host while they ran (median {mib:.0f} MiB; host work inside the timing, "
        f"such a run may read slower): {which}."
    )


def targets_section(results: BenchResults) -> list[str]:
    lines = ["| where | target | measured | met |", "| --- | --- | --- | --- |"]
    misses = []
    for target in all_targets(results):
        unknown = "not decided (a bound only)" if "limit)" in target.measured else "not measured"
        unknown = "not judged" if "not judged" in target.measured else unknown
        mark = {True: "✓ met", False: "✗ **missed**", None: unknown}[target.met]
        lines.append(f"| {target.section} | {target.target} | {target.measured} | {mark} |")
        if target.met is False:
            misses.append(target)
    out = ["\n".join(lines) + "\n"]
    if misses:
        out.append("**Why the missed targets were missed** (from the monitored runs above):\n")
        for target in misses:
            out.append(f"- *{target.section}: {target.target}.* {explain_miss(target, results)}")
        out.append("")
    return out


def peers_section(results: BenchResults) -> list[str]:
    lines = ["| peer | how it is run | status |", "| --- | --- | --- |"]
    for name in PEER_ENGINES:
        peer = ENGINES[name]
        how, formats = peer.description or peer.label, peer.formats
        why = results.peers.get(name)
        status = f"skipped: {why}" if why else f"measured ({', '.join(formats)} models)"
        lines.append(f"| {name} | {how} | {status} |")
    return ["\n".join(lines) + "\n"]


def memory_section(results: BenchResults) -> list[str]:
    memory = results.memory
    if memory is None:
        return [f"Skipped: {results.skipped.get('memory', 'not run')}\n"]
    out = [
        f"Load to RAM, {memory.model_key}, cold, one run each, measured in a fresh process "
        f"(`benchmarks/memory.py`: its own peak RSS was {memory.parent_peak_rss / MiB:.0f} "
        "MiB). Peak RSS is the sum of the workers' own peaks (VmHWM); *sampled* is the largest "
        "sum of the workers' RSS seen by the Session at 10 Hz. RSS counts the model's file "
        "pages a process maps, so mmap-based loaders show the page cache on top of their "
        "copies. Peers: their one process's VmHWM, from the local cold runs.\n"
    ]
    lines = [
        "| configuration | bytes loaded | peak RSS | sampled | ratio |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in memory.load_to_ram:
        sampled = f"{row.sampled_peak_rss / MiB:,.0f} MiB" if row.sampled_peak_rss else "–"
        lines.append(
            f"| {row.strategy}, {row.workers} worker(s) | {row.bytes / MiB:,.0f} MiB | "
            f"{row.peak_rss / MiB:,.0f} MiB | {sampled} | {ratio_text(row.ratio)} |"
        )
    for peer in memory.peers:
        lines.append(
            f"| {peer.label} | {peer.bytes / MiB:,.0f} MiB | {peer.peak_rss / MiB:,.0f} MiB | "
            f"– | {peer.ratio:.2f}× |"
        )
    out.append("\n".join(lines) + "\n")
    discard = memory.discard
    lines = [
        f"Discard mode on the same {memory.model_bytes / MiB:,.0f} MiB model with "
        f"`memory_limit` = {discard.memory_limit / MiB:,.0f} MiB (a keep-everything load is "
        "refused at that limit): `sequential`, 16 MiB reads, cold.\n",
        "| workers | MB/s | cold | peak RSS per worker | sampled (all workers) |",
        "| ---: | ---: | --- | --- | ---: |",
    ]
    for run in discard.runs:
        peaks = ", ".join(f"{p / MiB:.0f}" for p in run.worker_peak_rss)
        sampled = f"{run.sampled_peak_rss / MiB:,.0f} MiB" if run.sampled_peak_rss else "–"
        lines.append(
            f"| {run.workers} | {_mb(run.mbps)} | {'✓' if run.cold else '✗'} | {peaks} MiB | "
            f"{sampled} |"
        )
    out.append("\n".join(lines) + "\n")
    return out


def render(results: BenchResults) -> str:
    machine = results.machine
    out = [
        "# Benchmarks\n",
        "Reproduce (one command, as long as the run below took on a 2-core machine; run as "
        "root for the hdd and fuse environments):\n",
        f"```sh\n{results.reproduce}\n```\n",
        f"This file was written by `{results.command}` on {machine.date}; the whole run "
        f"took **{results.wall_s / 60:.1f} min**. Raw numbers: "
        "[benchmarks/results.json](benchmarks/results.json).\n",
        *(
            [
                f"The text around the numbers was rendered again from that run's results.json "
                f"(`{results.rendered_again}`): same runs, same numbers.\n"
            ]
            if results.rendered_again
            else []
        ),
        "## Machine\n",
        "| | |\n| --- | --- |\n"
        f"| CPU | {machine.cpu}, {machine.cores} cores |\n"
        f"| RAM | {machine.ram_gib} GiB |\n| kernel | {machine.kernel} ({machine.os}) |\n"
        f"| disk | {machine.disk}; {machine.disk_size or 'size unknown'} |\n"
        f"| filesystem | {machine.filesystem} |\n| Python | {machine.python} |\n"
        f"| libraries | {', '.join(f'{k} {v}' for k, v in machine.libraries.items())} |\n"
        f"| free memory | {machine.free_memory} |\n",
        f"| idle memory | {machine.idle_memory} |\n",
        "## Models\n",
        "| model | what | format | files | tensors | bytes | used in |\n"
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for key, model in results.models.items():
        used = sorted({f"{j.env} {j.cache}" for j in results.jobs if j.model_key == key})
        out.append(
            f"| {key} | {model.description} | {model.format} | {model.files} | "
            f"{model.tensors:,} | {model.bytes / 1e9:.2f} GB | {', '.join(used)} |"
        )
    out.append("")
    for note in results.notes:
        out.append(f"- {note}")
    out += ["", *_caveat(results), "## Targets\n", *targets_section(results)]
    out += ["## Throughput by environment\n", *_method_notes(), *environment_sections(results)]
    out += ["## core.load (what a user applies) against measure (worker processes)\n"]
    out += [*_applied_notes(), *applied_sections(results)]
    out += ["## Regret of recommend()\n", *_regret_notes(), *regret_summary(results)]
    out += ["## Ranks on one node: replicas on FUSE\n", *ranks_section(results)]
    out += ["## Peers\n", *peers_section(results)]
    out += ["## Monitoring overhead\n", *extras.overhead_section(results)]
    out += ["## Peak memory\n", *memory_section(results)]
    out += ["## Plan time for a 100 000-tensor model\n", *extras.plan_section(results)]
    out += ["## GUI event-loop tick latency\n", *extras.gui_section(results)]
    engines_title = (
        "## Your loader: as users run it, with recommend's change, and modelmon's best\n"
    )
    if results.engines is not None:  # benchmarks/engines.py: users' own loaders
        out += [engines_title, *engines_markdown(results.engines)]
    elif "engines" in results.skipped:
        out += [engines_title, f"Not run: {results.skipped['engines']}.\n"]
    out += [
        "## Watching other loaders: what the watch saw, their own timing, modelmon's best\n",
        *watch_section(results),
    ]
    out += objects_section(results.objects, results.skipped.get("objects"))
    out += limits_section(results.limits, results.skipped.get("limits"))
    if results.servers is not None:  # benchmarks/servers.py: a real vLLM server
        out.append(servers.markdown(results.servers))
    elif "servers" in results.skipped:
        out.append(
            f"## A real server: vLLM (CPU build)\n\nNot run: {results.skipped['servers']}.\n"
        )
    if results.knobs is not None:  # benchmarks/knobs.py: readahead, time to the first block
        out.append(knobs.markdown(results.knobs))
    elif "knobs" in results.skipped:
        out.append(f"## The disk's own knobs\n\nNot run: {results.skipped['knobs']}.\n")
    return "\n".join(out).rstrip() + "\n"


def _applied_notes() -> list[str]:
    return [
        "The same rounds as the tables above: each configuration applied as a user would, "
        "`modelmon.core.load(path, config=FILE)` in a fresh process (timed from go to the last "
        "array, after the parent put the page cache in the verified state and primed free "
        "memory for the arrays, with the engine imported before go as the workers are; the "
        "recommended row applies the very config file `recommend` wrote), beside the same "
        "configuration measured in worker processes (`measure`). `sequential chunk=16MiB` is "
        "1 worker with 4 reader threads (the defaults); `workers=4 threads=1` is the same "
        "concurrency in processes. Peak RSS: the child's own VmHWM (interpreter and imports "
        "included).\n"
    ]


def _regret_notes() -> list[str]:
    return [
        "`recommend(model, budget_s)` ran first in each environment; its pick, applied "
        "through `core.load(config=)` in a fresh process, then ran in the rounds alternately "
        "with every strong alternative it measured (as core.load), the standard "
        "configurations and the installed peers, cold. regret = 1 − pick / best (medians). "
        "A core.load entry that applies the same in-process load as the pick (the same "
        "strategy and options, the same workers × threads reader threads in one process) is "
        "the same choice for a user: its runs count as the pick's, and it is no rival. When "
        "an alternative beat the pick over the rounds, the two then ran "
        f"{CONFIRM_PAIRS} more pairs, alternating which went first, and the regret counts "
        "them: the best of several alternatives, chosen by the same runs that rank them, is "
        "the one that drew the luckiest runs. When, with those runs, another alternative "
        f"beat the pick, it was confirmed the same way ({CONFIRM_RIVALS} alternatives at "
        "most), so the best named has been confirmed. *applied / evidence* is the pick's "
        "core.load(config=) median over the rounds against the median recommend() rested "
        "the pick on (its own runs, earlier in the session): what the user applies should "
        f"reach {APPLIED_TARGET:g}× of it. Each environment's table is under its throughput "
        "table above.\n"
    ]


def _method_notes() -> list[str]:
    return [
        "Every number is a median over repeats run in one session; within a repeat every "
        "configuration runs once, in an order rotated each repeat. Every run starts from a "
        "verified page-cache state (cold: fsync + `POSIX_FADV_DONTNEED`, then `cachestat` ≤ 1 % "
        "resident; warm: ≥ 99 % resident), measured just before the load starts; the last "
        "column shows the worst `resident_before` of the runs. MB/s are 10⁶ bytes per second of "
        "tensor bytes, from go to the last tensor (process start and imports not counted, for "
        "peers as for modelmon's workers). Ceilings are `measure_ceilings`: sequential 16 MiB "
        "reads in discard mode, 1 worker (sequential read) or 4 workers with their own "
        "descriptors (parallel read). `× library` compares with modelmon's `library` strategy "
        "(the safetensors / gguf library itself, in one worker). Peers load every tensor, keep "
        "them all and touch every page of every result (see `core/loaders/child.py`).\n",
    ]
