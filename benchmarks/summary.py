"""Numbers out of a job's runs: per-entry medians, ratios, verified cache state, the targets."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from benchmarks.records import CeilingRuns, JobResult, PeerMemory, Run
from modelmon.core.measuring import allowed_ratio

MiB = 1 << 20
# What a load is judged against: cold, the bound of a load that keeps its bytes (the lower of
# the storage's best plain reader and the memory fill, round by round: matrix.py); a result
# file written before the bounds existed has the plain parallel read instead.
CEILING_FOR = {"cold": "bound", "warm": "parallel_read_warm"}
OLD_CEILING_FOR = {"cold": "parallel_read", "warm": "parallel_read_warm"}
# (env, cache) → fraction of its bound (cold) or of the warm parallel read the best must reach.
CEILING_TARGETS = {
    ("local", "cold"): 0.9,
    ("hdd", "cold"): 0.9,
    ("fuse", "cold"): 0.9,
    ("local", "warm"): 0.95,
    ("hdd", "warm"): 0.95,
    ("fuse", "warm"): 0.95,
}
SHARED_FD_SLOWER = 10.0
RSS_TARGET = 1.1
PLAN_TARGET_S = 1.0
HDD_MBPS = 150 * MiB / 1e6


@dataclass(frozen=True)
class Row:
    label: str
    kind: str  # "ceiling" | "strategy" | "load" | "peer"
    name: str
    role: str
    runs: int
    ok: int
    median: float
    low: float
    high: float
    verified: bool | None  # every run started in the requested cache state
    resident: float | None  # worst resident_before (cold: max, warm: min)
    error: str | None
    peak_rss: float | None  # median of the runs' peak RSS (workers summed)
    bytes: int


def rows_of(job: JobResult, runs: list[Run] | None = None) -> list[Row]:
    """Ceilings first, then every entry, fastest first (of ``runs``: default the rounds')."""
    every = job.runs if runs is None else runs
    rows = [
        Row(
            f"ceiling: {name.replace('_', ' ')}",
            "ceiling",
            name,
            "",
            len(c.runs),
            len(c.runs),
            c.mbps,
            min(c.runs),
            max(c.runs),
            c.verified,
            None,
            None,
            None,
            0,
        )
        for name, c in job.ceilings.items()
    ]
    entries = []
    for entry in job.entries:
        runs_ = [r for r in every if r.label == entry.label]
        good = [r for r in runs_ if r.status == "ok"]
        speeds = [r.mbps for r in good] or [0.0]
        residents = [r.resident_before for r in runs_]
        worst = (max(residents) if job.cache == "cold" else min(residents)) if residents else None
        errors = [r.error for r in runs_ if r.error]
        entries.append(
            Row(
                entry.label,
                entry.kind,
                entry.name,
                entry.role,
                len(runs_),
                len(good),
                statistics.median(speeds),
                min(speeds),
                max(speeds),
                bool(runs_) and all(r.cold if job.cache == "cold" else r.warm for r in runs_),
                worst,
                errors[0] if errors else None,
                statistics.median(r.peak_rss for r in good) if good else None,
                max((r.bytes for r in good), default=0),
            )
        )
    entries.sort(key=lambda row: row.median, reverse=True)
    return rows + entries


REFERENCE_WORDS = {"cold": "bound", "warm": "warm parallel-read ceiling"}


def reference(job: JobResult) -> CeilingRuns | None:
    """The runs a job's loads are judged against (``CEILING_FOR``)."""
    return job.ceilings.get(CEILING_FOR[job.cache]) or job.ceilings.get(OLD_CEILING_FOR[job.cache])


def ceiling_of(job: JobResult) -> float | None:
    found = reference(job)
    return found.mbps if found else None


def library_of(rows: list[Row]) -> float | None:
    """The library baseline: modelmon's ``library`` strategy, else the plain library call."""
    for kind, name in (("strategy", "library"), ("peer", "safetensors"), ("peer", "gguf-reader")):
        for row in rows:
            if row.kind == kind and row.name == name and row.ok:
                return row.median
    return None


def round_rates(job: JobResult, label: str) -> dict[int, float]:
    """Round → MB/s of the entry's completed runs."""
    return {r.repeat: r.mbps for r in job.runs if r.label == label and r.status == "ok"}


def median_round_ratio(
    top: dict[int, float], bottom: dict[int, float], rounds: int = 1
) -> float | None:
    """Median over the rounds both have of top / bottom (a ratio of runs made in the same
    round, so the machine's drift between rounds cancels); None with fewer than ``rounds``."""
    ratios = [top[r] / bottom[r] for r in top.keys() & bottom.keys() if top[r] > 0 < bottom[r]]
    return statistics.median(ratios) if ratios and len(ratios) >= rounds else None


# Reported bytes that set two runs of one round apart: a report pass is 200-1,000 MiB.
REPORTED_APART = 256 << 20
# Passes come every 2-2.5 s while a load runs (the load's own allocations leave free memory
# to report). Between runs that both lasted this long, the slower one meets more passes
# because it lasted longer: the count follows its speed, and may not set it.
PASS_EVERY_S = 2.0


def reported_in_rounds(
    runs: list[Run], one: str, other: str, names: dict[str, str] | None = None
) -> str:
    """The rounds where free page reporting gave the host far more during one entry's run
    than during the other's (``host_reported``): "; in round 2 measure ran 473 MB/s with
    1792 MiB reported to the host while it ran, core.load 567 with 896", or "". ``names``:
    what to call each label (default: its form, core.load or measure)."""
    called = names or {}
    by_round = {
        (r.label, r.repeat): r
        for r in runs
        if r.label in (one, other) and r.status == "ok" and r.host_reported is not None
    }
    found = []
    paced = True  # every run named lasted long enough to meet passes at their own pace
    for repeat in sorted({key[1] for key in by_round}):
        a, b = by_round.get((one, repeat)), by_round.get((other, repeat))
        if a is None or b is None:
            continue
        a_mib, b_mib = a.host_reported or 0, b.host_reported or 0
        if abs(a_mib - b_mib) < REPORTED_APART:
            continue
        first, second = (a, b) if a_mib > b_mib else (b, a)
        paced = paced and min(a.seconds, b.seconds) >= PASS_EVERY_S
        found.append(
            f"in round {repeat + 1} {called.get(first.label, _form(first.label))} ran "
            f"{first.mbps:.0f} MB/s with {(first.host_reported or 0) >> 20} MiB reported to "
            f"the host while it ran, {called.get(second.label, _form(second.label))} "
            f"{second.mbps:.0f} with {(second.host_reported or 0) >> 20}"
        )
    text = "".join(f"; {text}" for text in found)
    if found and paced:
        text += (
            f" (runs of {PASS_EVERY_S:g} s or more meet a report pass every {PASS_EVERY_S:g}-2.5 s"
            " while they run: the slower run met more because it lasted longer, which says "
            "nothing of what made it slower)"
        )
    return text


def _form(label: str) -> str:
    return "core.load" if label.startswith("core.load: ") else "measure"


def paired_ratio(job: JobResult, label: str) -> float | None:
    """Median over rounds of (the entry's MB/s / the ceiling's MB/s in the same round)."""
    ceiling = reference(job)
    if not ceiling:
        return None
    return median_round_ratio(round_rates(job, label), dict(enumerate(ceiling.runs)))


def best_row(rows: list[Row]) -> Row | None:
    """modelmon's best: measured in worker processes or applied with core.load."""
    strategies = [r for r in rows if r.kind in ("strategy", "load") and r.ok]
    return max(strategies, key=lambda r: r.median) if strategies else None


def bound_of(job: JobResult, row: Row) -> float | None:
    """The bound of an entry stopped at the time limit (MB/s it stayed under), else None."""
    return next((r.bound_mbps for r in job.runs_of(row.label) if r.bound_mbps), None)


@dataclass(frozen=True)
class Target:
    section: str
    target: str
    measured: str
    met: bool | None  # None: could not be measured
    job: JobResult | None = None
    why: str = ""  # what the same run says about a miss (explain.py adds the monitored run)


def judged_ratio_text(value: float, want: float) -> str:
    """ "0.98×", or "0.997×" where two decimals would read as the target it missed (or met)."""
    text = f"{value:.2f}×"
    return f"{value:.3f}×" if text == f"{want:.2f}×" and value != want else text


def job_targets(job: JobResult) -> list[Target]:
    rows = rows_of(job)
    section = f"{job.env} · {job.model_key} · {job.cache}"
    want = CEILING_TARGETS.get((job.env, job.cache))
    best, ceiling = best_row(rows), ceiling_of(job)
    found: list[Target] = []
    if want is not None:
        named = "its bound" if job.cache == "cold" else "the warm parallel-read ceiling"
        text = f"modelmon's best ≥ {want:g}× {named}"
        if best is None or not ceiling:
            found.append(Target(section, text, "not measured", None, job))
        else:
            ratio = best.median / ceiling
            paired = paired_ratio(job, best.label)
            judged = ratio if paired is None else paired
            found.append(
                Target(
                    section,
                    text,
                    f"{best.label}: {best.median:.0f} / "
                    f"{ceiling:.0f} MB/s = {ratio:.2f}×; paired by round: "
                    f"{'–' if paired is None else judged_ratio_text(paired, want)}"
                    + ("" if judged >= want else f" ({1 - judged / want:.1%} short)"),
                    judged >= want,
                    job,
                )
            )
    above = _above_bound_target(job, rows, section)
    if above is not None:
        found.append(above)
    sequential = job.ceilings.get("sequential_read")
    if job.env == "hdd" and sequential:
        ratio = sequential.mbps / HDD_MBPS
        found.append(
            Target(
                section,
                f"the throttle bites: sequential-read ceiling ≈ 150 MiB/s ({HDD_MBPS:.0f} MB/s)",
                f"{sequential.mbps:.0f} MB/s",
                0.85 <= ratio <= 1.15,
                job,
            )
        )
    if job.env == "fuse" and job.cache == "cold":
        found.append(_shared_fd_target(job, rows, best, section))
    return found


def _above_bound_target(job: JobResult, rows: list[Row], section: str) -> Target | None:
    """No configuration measured in the same rounds beats its bound by more than the
    bound's own spread (a load that does is served by a cache cold cannot drop, or passes a
    throttle faster than the bound's plain reads: the run says which)."""
    bound = job.ceilings.get("bound")
    if job.cache != "cold" or bound is None or not bound.runs:
        return None
    allowed = allowed_ratio(bound.runs, bound.slack)
    ratios = [
        (row.label, paired)
        for row in rows
        if row.kind != "ceiling" and row.ok
        for paired in [median_round_ratio(round_rates(job, row.label), dict(enumerate(bound.runs)))]
        if paired is not None
    ]
    text = f"no configuration above its bound by more than the bound's spread (≤ {allowed:.2f}×"
    if allowed > allowed_ratio(bound.runs):
        text += ": the two slices its throttle lets a load's reads run ahead, over one of its runs"
    text += ")"
    if not ratios:
        return Target(section, text, "not measured", None, job)
    label, worst = max(ratios, key=lambda item: item[1])
    why = ""
    if worst > allowed and bound.throttle:
        why = (
            f"the bound's plain reads passed the disk's throttle ({bound.throttle}) and "
            f"{label} passed it faster: a throttle counts bytes by time slice, not as a disk "
            "serves them, and the block layer's own completions of the file's sectors show "
            "a loader's reads arriving faster than a plain reader's through the same cgroup "
            "(`python -m benchmarks.throttle_trace`)"
        )
    measured = f"highest: {label} at {worst:.2f}× by round"
    return Target(section, text, measured, worst <= allowed, job, why)


def _shared_fd_target(job: JobResult, rows: list[Row], best: Row | None, section: str) -> Target:
    text = f"mmap-shared-fd, 4 workers, ≥ {SHARED_FD_SLOWER:g}× slower than the best"
    shared = next((r for r in rows if r.name == "mmap-shared-fd" and r.kind == "strategy"), None)
    if shared is not None and not shared.ok and best is not None:
        bound = bound_of(job, shared)
        if bound:  # stopped at the time limit
            slower = best.median / bound
            return Target(
                section,
                text,
                f"< {bound:.0f} MB/s (stopped at the {job.time_limit_s or 0:g} s limit) vs "
                f"{best.median:.0f} MB/s: ≥ {slower:.1f}× slower",
                True if slower >= SHARED_FD_SLOWER else None,
                job,
            )
    if shared is None or not shared.ok or best is None or shared.median <= 0:
        return Target(section, text, "not measured", None, job)
    slower = best.median / shared.median
    return Target(
        section,
        text,
        f"{shared.median:.0f} vs {best.median:.0f} MB/s = {slower:.1f}× slower",
        slower >= SHARED_FD_SLOWER,
        job,
    )


def peer_memory(job: JobResult) -> list[PeerMemory]:
    """Peers' own peak RSS (VmHWM of their one process) against bytes loaded."""
    return [
        PeerMemory(row.label, row.bytes, row.peak_rss, row.peak_rss / row.bytes)
        for row in rows_of(job)
        if row.kind == "peer" and row.ok and row.bytes and row.peak_rss is not None
    ]
