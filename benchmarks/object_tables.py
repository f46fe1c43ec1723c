"""The object-storage section's figures and text, from one network profile's results as
``benchmarks.objects`` writes them: each configuration's medians, modelmon's best against the
ceiling, its bound and Run:ai, recommend's regret (the rounds with the confirmation pairs),
the watch against a program's own clock; and the section of docs/benchmarks.md."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.object_peers import DEFAULTS_LABEL, FIXED_TRIES, MOUNT_LABEL, fixed_label
from benchmarks.regret_tables import CONFIRM_PAIRS

# The Run:ai concurrency the watch is checked at (``objects.watch_check``), and the
# connections of the program that times its own GETs.
WATCHED_CONCURRENCY = 16


def watched_medians(rows: list[dict[str, float]]) -> tuple[float, float, float]:
    """Medians of watched runs: the watch's MB/s, the program's own, the connections seen."""
    seen, own, peak = (
        statistics.median(row[key] for row in rows)
        for key in ("watch_mbps", "own_mbps", "peak_connections")
    )
    return seen, own, peak


def regret_medians(data: dict[str, Any]) -> dict[str, float]:
    """modelmon's configurations' medians over the rounds and the confirmation pairs: what
    the regret reads (every other figure reads the rounds alone)."""
    extra = data.get("confirm_runs") or {}
    return {
        label: statistics.median([*runs, *extra.get(label, [])])
        for label, runs in data["runs"].items()
        if label.startswith("ranged") and [*runs, *extra.get(label, [])]
    }


def finished(data: dict[str, Any]) -> dict[str, float]:
    """The medians of the configurations that finished a run (a failed one has none)."""
    return {label: v for label, v in data["medians"].items() if v is not None}


def throttled(data: dict[str, Any]) -> dict[str, Any]:
    """On a bucket that throttles: ``load`` with its defaults against the fixed boto3 client
    that finished (its ten tries), the defaults' pace, and recommend's pick against the best
    it measured itself; {} elsewhere."""
    if not data.get("rate"):
        return {}
    medians = finished(data)
    defaults = medians.get(DEFAULTS_LABEL)
    fixed = {tries: medians.get(fixed_label(tries)) for tries in FIXED_TRIES}
    finishing = next((v for v in reversed(list(fixed.values())) if v is not None), None)
    paced = (data.get("paced") or {}).get(DEFAULTS_LABEL) or []
    searched = data.get("searched") or {}
    best_searched = max(searched.values()) if searched else None
    return {
        "defaults_mbps": defaults,
        "fixed_mbps": finishing,
        "fixed_failed": {label: why[0] for label, why in (data.get("failed") or {}).items()},
        "defaults_vs_fixed": defaults / finishing if defaults and finishing else None,
        "defaults_throttles": [run["throttles"] for run in paced],
        "defaults_requests": [run["requests"] for run in paced],
        "defaults_fewest": [min(p[1] for p in run["pace"]) for run in paced if run["pace"]],
        "defaults_largest_mib": [
            max(p[2] for p in run["pace"]) / (1 << 20) for run in paced if run["pace"]
        ],
        "pick_vs_searched_best": (
            searched[data["pick"]] / best_searched
            if best_searched and data["pick"] in searched
            else None
        ),
    }


def judged(data: dict[str, Any]) -> dict[str, Any]:
    medians = finished(data)
    own = {k: v for k, v in medians.items() if k.startswith("ranged")}
    runai = {k: v for k, v in medians.items() if k.startswith("runai")}
    best_own = max(own, key=lambda k: own[k])
    best_runai = max(runai, key=lambda k: runai[k]) if runai else None
    pooled = regret_medians(data)
    top = max(pooled, key=lambda label: pooled[label])
    mount = medians.get(MOUNT_LABEL)
    return {
        "best_own": best_own,
        "best_own_vs_ceiling": own[best_own] / data["ceiling_mbps"],
        "best_own_vs_bound": own[best_own] / data["bound_mbps"],
        "best_own_vs_runai": own[best_own] / runai[best_runai] if best_runai else None,
        "best_runai": best_runai,
        # 1 − the pick / the best, on the medians of the rounds and the confirmation pairs.
        "regret": 1 - pooled.get(data["pick"], 0.0) / pooled[top],
        "regret_pick_mbps": pooled.get(data["pick"], 0.0),
        "regret_best": top,
        "regret_best_mbps": pooled[top],
        "stream_vs_mount": own[best_own] / mount if mount else None,
        **throttled(data),
    }


def _runs_text(runs: list[float]) -> str:
    return ", ".join(f"{run:.0f}" for run in runs) or "–"


def markdown(data: dict[str, Any]) -> list[str]:
    """The section's lines for docs/benchmarks.md (``data`` with its verdict)."""
    verdict = judged(data)  # from the runs: a results.json of an older text may lack a key
    rate = f"{data['rate_mbit']} Mbit/s" if data["rate_mbit"] else "no rate limit"
    rate += f", {data['latency_ms']:g} ms before each request" if data["latency_ms"] else ""
    each = data["connection_mbps"]
    rate += f", {each:g} MB/s per connection at most" if each else ""
    total = data.get("total_mbps")
    rate += f", {total:g} MB/s in all at most" if total else ""
    gets = data.get("rate")
    rate += f", 503 SlowDown above {gets:g} GETs/s (burst {data['burst']:g})" if gets else ""
    gb = data["bytes"] / 1e9
    out = [f"### rclone serve s3 on loopback, {rate} ({gb:.2f} GB model)\n"]
    out += ["| plain GETs (the curve) | MB/s |", "| --- | ---: |"]
    out += [f"| {setting} | {mbps:.0f} |" for setting, mbps in data["curve"]]
    out.append(
        f"\nCeiling (the best of the curve, measured at the start of every round; the "
        f"median of the rounds' {_runs_text(data.get('ceiling_runs', []))}): "
        f"{data['ceiling_mbps']:.0f} MB/s; a load that keeps its bytes is bound by "
        f"{data['bound']}: {data['bound_mbps']:.0f} MB/s.\n"
    )
    out += ["| configuration | median MB/s | runs |", "| --- | ---: | --- |"]
    extra = data.get("confirm_runs") or {}
    failed = data.get("failed") or {}
    order = sorted(data["medians"].items(), key=lambda kv: -(kv[1] or 0.0))
    for label, median in order:
        runs = ", ".join(f"{v:.0f}" for v in data["runs"][label])
        if extra.get(label):
            runs += f"; confirming: {_runs_text(extra[label])}"
        if failed.get(label):
            runs += f"{'; ' if runs else ''}{len(failed[label])} failed: {failed[label][0]}"
        mark = " (recommend's pick)" if label == data["pick"] else ""
        rate = "failed" if median is None else f"{median:.0f}"
        out.append(f"| {label}{mark} | {rate} | {runs} |")
    against = verdict["best_own_vs_runai"]
    runai_failed = any(label.startswith("runai") for label in data.get("failed") or {})
    runai = (
        f"{against:.2f}× Run:ai's best ({verdict['best_runai']})"
        if against is not None
        else "Run:ai failed at every concurrency"
        if runai_failed
        else "Run:ai not measured"
    )
    out.append(
        f"\nmodelmon's best ({verdict['best_own']}): {verdict['best_own_vs_ceiling']:.2f}× the "
        f"storage ceiling, {verdict['best_own_vs_bound']:.2f}× its bound, {runai}; "
        f"recommend's regret {verdict['regret']:.0%}"
        + (f" ({data['duel']})" if data.get("duel") else "")
        + (
            f"; stream {verdict['stream_vs_mount']:.2f}× the mount.\n"
            if verdict["stream_vs_mount"]
            else ".\n"
        )
    )
    out += _throttled_lines(verdict)
    program = data.get("watched_program") or []
    if program:
        seen, own, peak = watched_medians(program)
        out.append(
            f"A program timing its own GETs (`benchmarks/stream_program.py`, "
            f"{WATCHED_CONCURRENCY} connections, {len(program)} runs), watched from outside: "
            f"{seen:.0f} MB/s over its connections against {own:.0f} MB/s by its own clock "
            f"({seen / own:.2f}×); {peak:.0f} connections seen.\n"
        )
    watched = data.get("watched") or []
    if watched:
        seen, own, peak = watched_medians(watched)
        out.append(
            f"Watched from outside (`engine: runai RUNAI_STREAMER_CONCURRENCY="
            f"{WATCHED_CONCURRENCY}`, {len(watched)} runs): {seen:.0f} MB/s over its "
            f"connections against {own:.0f} MB/s by its own clock ({seen / own:.2f}×); "
            f"{peak:.0f} connections at most.\n"
        )
    return out


def _throttled_lines(verdict: dict[str, Any]) -> list[str]:
    if "defaults_mbps" not in verdict:
        return []
    against = verdict["defaults_vs_fixed"]
    ratio = (
        f"{against:.2f}× the fixed client that finished" if against else "no fixed client finished"
    )
    paced = (
        f"throttled {_runs_text(verdict['defaults_throttles'])} times in "
        f"{_runs_text(verdict['defaults_requests'])} GETs; down to "
        f"{_runs_text(verdict['defaults_fewest'])} connection(s), parts up to "
        f"{_runs_text(verdict['defaults_largest_mib'])} MiB"
    )
    searched = verdict["pick_vs_searched_best"]
    pick = f"{searched:.2f}× the best it measured" if searched else "not among what it measured"
    return [
        f"On this throttling bucket, `load` with its defaults: {ratio}; {paced} (each run). "
        f"recommend's pick: {pick}.\n"
    ]


def notes() -> list[str]:
    return [
        (
            "A model in a bucket of `rclone serve s3` on loopback (ETags off: its local backend "
            "would hash the whole file for each ranged GET), shaped where said: a network "
            "namespace whose loopback a `tbf` qdisc limits, and a proxy that holds each request "
            "(a real bucket's time to first byte) and paces each connection (S3 serves one "
            "connection about 100 MB/s). The ceiling is the best of the curve of plain GETs "
            "(`core/measuring/object_bounds.py`: N connections, each taking the next GET of one "
            "part size from a queue, bytes discarded), measured at the start of every round; the "
            "rounds alternate every configuration "
            "of recommend's search space, Run:ai Model Streamer's S3 backend at each concurrency "
            "(a fresh child timed by itself, one byte of every page touched) and the same bucket "
            "through `rclone mount` read by modelmon's file strategy from a verified-cold page "
            "cache. Where one of modelmon's configurations beat recommend's pick over the rounds, "
            f"{CONFIRM_PAIRS} pairs of the two follow, alternating which goes first (a second "
            "one that then leads too), and recommend's regret reads them with the rounds: the "
            "best of many configurations ranked by three runs is the one that drew the luckiest. "
            "Nothing is cached on this machine between runs of a bucket; the server's own "
            "reads come from its page cache (the model was written just before). Reproduce one "
            "table: `python -m benchmarks.objects --gib 1 --rounds 3 [--rate-mbit R --latency-ms "
            "L --connection-mbps C]`."
            "\n"
        ),
    ]


def section(found: list[dict[str, Any]], skipped: str | None) -> list[str]:
    """docs/benchmarks.md's section: the notes, then each network profile's tables."""
    out = ["## Object storage: the bucket's ceiling, stream or mount, Run:ai\n"]
    if not found:
        return [*out, f"Not run: {skipped or 'not asked for'}.\n"]
    return [*out, *notes(), *(line for data in found for line in markdown(data))]
