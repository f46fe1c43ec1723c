"""The object-storage section's targets, for each network profile (loopback as it is, and
shaped as a bucket): modelmon's best against the bound of the same rounds, no configuration
above that bound beyond its spread, modelmon against Run:ai's S3 streamer, recommend's regret,
and the watch of a program against the program's own clock."""

from __future__ import annotations

from typing import Any

from benchmarks.object_tables import WATCHED_CONCURRENCY, judged, watched_medians
from benchmarks.records import BenchResults
from benchmarks.summary import Target, judged_ratio_text, median_round_ratio
from modelmon.core.measuring import allowed_ratio

BEST_TARGET = 0.9  # modelmon's best, of the bound of the same rounds
RUNAI_TARGET = 1.2  # modelmon's best, of Run:ai's streamer at its best concurrency
REGRET_TARGET = 0.10
WATCH_TOLERANCE = 0.15  # the watch's MB/s and connections, against the program's own
# On a bucket that throttles: load with its defaults against the fixed boto3 client (larger
# parts are allowed more bytes a second), and recommend's pick against the best it measured.
THROTTLED_TARGET = 2.0
PICK_TARGET = 0.9


def profile_name(data: dict[str, Any]) -> str:
    """ "objects · loopback" or "objects · shaped (4000 Mbit/s, 20 ms, 100 MB/s a connection)"."""
    gets, total = data.get("rate"), data.get("total_mbps")
    if not (data["rate_mbit"] or data["latency_ms"] or data["connection_mbps"] or gets or total):
        return "objects · loopback"
    parts = [f"{data['rate_mbit']} Mbit/s"] if data["rate_mbit"] else []
    parts += [f"{data['latency_ms']:g} ms"] if data["latency_ms"] else []
    each = data["connection_mbps"]
    parts += [f"{each:g} MB/s a connection"] if each else []
    parts += [f"{total:g} MB/s in all"] if total else []
    if gets:
        limit = f"{gets:g} GETs/s, burst {data['burst']:g}"
        return f"objects · throttled ({', '.join([limit, *parts])})"
    return f"objects · shaped ({', '.join(parts)})"


def by_round(runs: list[float], bounds: list[float]) -> float | None:
    """The median over rounds of a configuration's run against the bound of its round."""
    return median_round_ratio(dict(enumerate(runs)), dict(enumerate(bounds)))


def _best_target(section: str, data: dict[str, Any], best: str) -> Target:
    want = f"modelmon's best ≥ {BEST_TARGET:g}× its bound (plain GETs of the same rounds)"
    median, bound = data["medians"][best], data["bound_mbps"]
    paired = by_round(data["runs"][best], data.get("bound_runs") or [])
    judged_ratio = paired if paired is not None else median / bound
    measured = (
        f"{best}: {median:.0f} / {bound:.0f} MB/s = {median / bound:.2f}×; paired by round: "
        + ("–" if paired is None else judged_ratio_text(paired, BEST_TARGET))
    )
    met = judged_ratio >= BEST_TARGET
    runs = ", ".join(f"{run:.0f}" for run in data["runs"][best])
    bound_runs = ", ".join(f"{run:.0f}" for run in data.get("bound_runs") or [])
    why = f"by round, {best} ran {runs} MB/s against bounds of {bound_runs or '–'} MB/s"
    if section.endswith("loopback"):
        why += (
            "; on loopback the server (rclone serve s3) runs on the same 2 cores as the loads "
            "and the plain GETs"
        )
    return Target(section, want, measured, met, why="" if met else why)


def _above_target(section: str, data: dict[str, Any]) -> Target | None:
    bounds = data.get("bound_runs") or []
    if not bounds:
        return None
    allowed = allowed_ratio(bounds)
    want = f"no configuration above its bound by more than the bound's spread (≤ {allowed:.2f}×)"
    ratios = {label: by_round(runs, bounds) for label, runs in data["runs"].items()}
    found = {label: ratio for label, ratio in ratios.items() if ratio is not None}
    if not found:
        return Target(section, want, "not measured", None)
    label = max(found, key=lambda key: found[key])
    measured = f"highest: {label} at {found[label]:.2f}× by round"
    return Target(section, want, measured, found[label] <= allowed)


def _watch_target(section: str, data: dict[str, Any]) -> Target:
    want = (
        f"the watch's MB/s and connections within {WATCH_TOLERANCE:.0%} of a program's own "
        f"({WATCHED_CONCURRENCY} connections, timing its own GETs)"
    )
    program = data.get("watched_program") or []
    if not program:
        why = "a bucket that throttles" if data.get("rate") else "a sharded model"
        return Target(section, want, f"not measured ({why})", None)
    seen, own, peak = watched_medians(program)
    speed, count = seen / own, peak / WATCHED_CONCURRENCY
    measured = (
        f"{seen:.0f} / {own:.0f} MB/s = {speed:.2f}×; {peak:.0f} of {WATCHED_CONCURRENCY} "
        "connections seen"
    )
    within = all(abs(ratio - 1) <= WATCH_TOLERANCE for ratio in (speed, count))
    return Target(section, want, measured, within)


def _throttled_targets(section: str, data: dict[str, Any]) -> list[Target]:
    verdict = judged(data)
    if "defaults_mbps" not in verdict:
        return []
    want = (
        f"load with its defaults finishes at ≥ {THROTTLED_TARGET:g}× the fixed boto3 client "
        "(8 threads × 16 MiB GETs)"
    )
    defaults, fixed = verdict["defaults_mbps"], verdict["fixed_mbps"]
    failures = "; ".join(f"{k}: {v}" for k, v in verdict["fixed_failed"].items())
    if defaults is None:
        found = [Target(section, want, f"load with its defaults failed: {failures}", False)]
    elif fixed is None:
        measured = f"{defaults:.0f} MB/s; no fixed client finished ({failures})"
        found = [Target(section, want, measured, True)]
    else:
        ratio = defaults / fixed
        measured = f"{defaults:.0f} / {fixed:.0f} MB/s = {ratio:.2f}×"
        found = [Target(section, want, measured, ratio >= THROTTLED_TARGET)]
    want = f"recommend's pick ≥ {PICK_TARGET:g}× the best it measured"
    searched = verdict["pick_vs_searched_best"]
    measured = "–" if searched is None else f"{searched:.2f}× ({data['pick']})"
    met = None if searched is None else searched >= PICK_TARGET
    return [*found, Target(section, want, measured, met)]


def object_targets(results: BenchResults) -> list[Target]:
    found: list[Target] = []
    for data in results.objects:
        section, verdict = profile_name(data), judged(data)
        best = verdict["best_own"]
        found.append(_best_target(section, data, best))
        above = _above_target(section, data)
        if above is not None:
            found.append(above)
        want = f"modelmon's best ≥ {RUNAI_TARGET:g}× Run:ai's S3 streamer at its best concurrency"
        against = verdict["best_own_vs_runai"]
        runai_failed = [k for k in data.get("failed") or {} if k.startswith("runai")]
        if against is None and runai_failed:
            why = (data.get("failed") or {})[runai_failed[0]][0]
            measured = f"Run:ai failed at every concurrency ({why}); modelmon finished"
            found.append(Target(section, want, measured, True))
        elif against is None:
            found.append(Target(section, want, "Run:ai's S3 backend not installed", None))
        else:
            runai = verdict["best_runai"]
            measured = (
                f"{data['medians'][best]:.0f} / {data['medians'][runai]:.0f} MB/s ({runai}) "
                f"= {against:.2f}×"
            )
            found.append(Target(section, want, measured, against >= RUNAI_TARGET))
        regret = verdict["regret"]
        confirmed = " with its confirmation pairs" if data.get("confirm_runs") else ""
        measured = (
            f"{regret:.1%} (the pick {data['pick']} {verdict['regret_pick_mbps']:.0f} MB/s, "
            f"the best {verdict['regret_best']} {verdict['regret_best_mbps']:.0f} MB/s"
            f"{confirmed})"
        )
        found.append(
            Target(
                section,
                f"recommend's regret ≤ {REGRET_TARGET:.0%}",
                measured,
                regret <= REGRET_TARGET,
            )
        )
        found.append(_watch_target(section, data))
        found += _throttled_targets(section, data)
    return found
