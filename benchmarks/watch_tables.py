"""The watch section of docs/benchmarks.md and its targets: other loaders watched from outside
(``watch.run_section``, ``results.watch``) against their own timing, beside modelmon's best
for the same model in the same session (the cold job of the same environment and model)."""

from __future__ import annotations

import itertools
import math
import random
import statistics
from collections.abc import Iterator
from dataclasses import replace

from benchmarks.records import BenchResults, JobResult
from benchmarks.summary import Target, best_row, ceiling_of, rows_of
from benchmarks.watch import (
    OVERHEAD_TARGET,
    SPEED_TOLERANCE,
    WatchedRun,
    WatchOverhead,
    WatchReport,
)
from benchmarks.watched_programs import WHAT

SHARED_KIND = "forked-mapping"  # the program whose readers share one descriptor
LAZY_KIND = "lazy-slices"  # the program that maps the file and reads almost nothing
LAZY_TARGET = 0.10  # of the file, reported read by the lazy program
MIN_PAIRS = 5  # the overhead is judged on a median of at least this many pairs
MIN_FILE_BYTES = 1_000_000_000  # the targets are for a file this large (loads of seconds)
SECTION = "watch"


def reference_job(results: BenchResults) -> JobResult | None:
    """The cold job that loaded the watched file's model in the same environment."""
    report = results.watch
    if report is None:
        return None
    return next(
        (
            j
            for j in results.jobs
            if j.env == report.env and j.model_key == report.model_key and j.cache == "cold"
        ),
        None,
    )


def _mb(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}" if value >= 0.001 else f"{value:.2%}"


def _size(size: int) -> str:
    return f"{size / 1e9:.2f} GB" if size >= 100_000_000 else f"{size / 1e6:.1f} MB"


def _pids(pids: list[int]) -> str:
    return ", ".join(str(p) for p in pids) or "–"


def _table_row(*cells: str) -> str:
    """A row of a markdown table."""
    return "| " + " | ".join(cells) + " |"


def _program_row(run: WatchedRun, size: int, best: float | None) -> str:
    arrived = f"{run.watched_bytes / 1e6:,.0f} MB ({_pct(run.watched_bytes / size)})"
    ratio = f"{run.ratio:.2f}×" if run.ratio is not None else "–"
    to_best = f"{run.watched_mbps / best:.2f}×" if best and run.watched_mbps else "–"
    own = _mb(run.own_mbps) if (run.own_mbps or 0) >= 1 else f"{run.own_mbps or 0:.2f}"
    if run.kind == LAZY_KIND:  # its own figure is of the few rows it loads, not the file
        ratio, to_best = "– (a few rows)", "–"
    findings = ", ".join(f"`{code}`" for code in run.findings) or "none"
    if run.partial_fraction is not None:
        findings = findings.replace(
            "`partial-read`", f"`partial-read` ({_pct(run.partial_fraction)})"
        )
    cold = "✓" if run.cold else "✗"
    exit_code = "" if run.exit_code == 0 else f" (exit {run.exit_code})"
    return _table_row(
        f"{run.kind}{exit_code}",
        WHAT.get(run.kind, ""),
        _mb(run.watched_mbps),
        own,
        ratio,
        arrived,
        findings,
        _pids(run.shared_pids),
        _pids(run.program_pids),
        to_best,
        cold,
    )


def _overhead_row(name: str, over: WatchOverhead) -> str:
    share = over.watch_core_share_median
    ratios = ", ".join(f"{r:.3f}" for r in over.ratios)
    either = " (not watched either)" if over.control else ""
    return _table_row(
        name,
        f"`{over.kind}`",
        f"{over.pairs}",
        f"{over.median_seconds_watched:.2f} s{either}",
        f"{over.median_seconds_plain:.2f} s",
        ratios,
        f"{over.overhead:+.1%}",
        "–" if share is None else f"{share:.2%}",
    )


def _why_this_load(report: WatchReport, over: WatchOverhead) -> str:
    plain = over.median_seconds_plain
    others = ", ".join(
        f"{run.kind} {run.own_seconds:.1f} s" for run in report.programs if run.kind != over.kind
    )
    text = (
        f"The overhead is measured on `{over.kind}` ({WHAT.get(over.kind, '')}, like "
        "`--no-mmap` loaders) on this same file: it reads every byte once at the storage's "
        f"pace, {plain:.1f} s a load here (median, unwatched), so {OVERHEAD_TARGET:.0%} of it "
        f"is {OVERHEAD_TARGET * plain * 1000:.0f} ms; each program times itself from its first "
        "read, so its start-up is outside the figure. The other programs' own load times in "
        f"the table above ({others or 'none'}) are either too short for {OVERHEAD_TARGET:.0%} "
        "of them to mean anything (the lazy one reads a few rows) or too long for "
        f"{4 * over.pairs} cold runs within the section's few minutes."
    )
    return text


def watch_section(results: BenchResults) -> list[str]:
    report = results.watch
    if report is None:
        return [f"Not run: {results.skipped.get('watch', 'not in this run')}.\n"]
    job = reference_job(results)
    best = best_row(rows_of(job)) if job is not None else None
    ceiling = ceiling_of(job) if job is not None else None
    where = f"{report.env} · {report.model_key} · cold"
    mine = (
        f"modelmon's best for this model in this session ({where} table): **{best.label} "
        f"{best.median:,.0f} MB/s**; the parallel-read ceiling {_mb(ceiling)} MB/s."
        if best is not None
        else f"modelmon's best for this model: not measured in this session ({where})."
    )
    out = [
        f"Each program of `benchmarks/watched_programs.py` ran once on {report.env}, cold "
        f"(verified), watched from outside by the engine's `Watch` (what `modelmon watch` "
        f"runs), loading `{report.model}` ({_size(report.size)}, the largest file of "
        f"{report.model_key}); each program prints its own timing. *Watched*: the bytes that "
        "arrived in the page cache over the first to the last byte the watch saw; *own*: the "
        "bytes the program loaded over its own clock. *Arrived*: of this file. "
        f"{mine} The section took {report.seconds:.0f} s.\n",
        "| program | what it does | watched MB/s | own MB/s | watched / own | arrived "
        "| findings | shared descriptor: pids | the program's pids | × modelmon's best "
        "| cold |\n| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | ---: | --- |",
    ]
    for run in report.programs:
        out.append(_program_row(run, report.size, best.median if best is not None else None))
    for kind, why in report.failed.items():
        out.append(_table_row(kind, WHAT.get(kind, ""), f"failed: {why}"))
    out.append("")
    over, control = report.overhead, report.control
    if over is None:
        out.append("What watching costs: not measured.\n")
        return out
    out += [
        "What watching costs the watched program: cold runs alternately watched and not "
        "(the watched one first in every other pair), the program's own load time compared "
        "(median of the per-pair ratios); then the same comparison with neither side "
        "watched, the noise floor of such pairs on this machine. *Watch CPU*: the watch's "
        "sampler thread, share of one core over the run (watching reads /proc and asks the "
        "page cache, it never reads the file: it can slow the program only by taking CPU).\n",
        "| comparison | program | pairs | own load time, watched (median) | not watched "
        "(median) | ratio per pair | overhead | watch CPU |\n"
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
        _overhead_row("watched vs not", over),
    ]
    if control is not None:
        out.append(_overhead_row("neither watched (control)", control))
    out += ["", _why_this_load(report, over) + "\n"]
    return out


def _speed_target(run: WatchedRun) -> Target:
    want = f"watched MB/s within {SPEED_TOLERANCE:.0%} of the program's own ({run.kind})"
    if run.ratio is None or run.own_mbps is None or run.watched_mbps is None:
        return Target(SECTION, want, "no figure on one side", False, why="nothing to compare")
    met = abs(run.ratio - 1) <= SPEED_TOLERANCE
    own_bytes = run.own_mbps * run.own_seconds * 1e6
    first = "–" if run.first_byte_s is None else f"{run.first_byte_s:.2f}"
    last = "–" if run.last_byte_s is None else f"{run.last_byte_s:.2f}"
    why = (
        f"on the watch's clock the bytes arrived from {first} s to {last} s while the program "
        f"timed itself from {run.own_start_s:.2f} s to {run.own_end_s:.2f} s; the watch saw "
        f"{run.watched_bytes / 1e6:,.0f} MB arrive, the program loaded {own_bytes / 1e6:,.0f} MB"
    )
    measured = f"{run.watched_mbps:,.0f} / {run.own_mbps:,.0f} MB/s = {run.ratio:.2f}×"
    return Target(SECTION, want, measured, met, why="" if met else why)


def _shared_target(run: WatchedRun) -> Target:
    want = "the shared-descriptor program is named as such, with its pids"
    named = "shared-descriptor" in run.findings
    covered = bool(run.program_pids) and set(run.program_pids) <= set(run.shared_pids)
    measured = (
        f"{'`shared-descriptor`' if named else 'no `shared-descriptor` finding'}; pids "
        f"sharing one open file: {_pids(run.shared_pids)} (the program's: "
        f"{_pids(run.program_pids)})"
    )
    why = (
        f"the findings were {', '.join(run.findings) or 'none'}; the watch saw "
        f"{len(run.shared_pids)} of the program's {len(run.program_pids)} processes on one "
        "open file description"
    )
    met = named and covered
    return Target(SECTION, want, measured, met, why="" if met else why)


def _lazy_target(run: WatchedRun, size: int) -> Target:
    want = f"the lazy program is reported as having read < {LAZY_TARGET:.0%} of the file"
    fraction = run.partial_fraction
    arrived = run.watched_bytes / size if size else 0.0
    if fraction is None:
        measured = f"no `partial-read` finding ({_pct(arrived)} of the file arrived)"
        why = f"the findings were {', '.join(run.findings) or 'none'}"
        return Target(SECTION, want, measured, False, why=why)
    measured = f"`partial-read`: {_pct(fraction)} ({_pct(arrived)} of the file arrived)"
    met = fraction < LAZY_TARGET
    why = f"the watch saw {run.watched_bytes / 1e6:,.0f} MB of {size / 1e6:,.0f} MB arrive"
    return Target(SECTION, want, measured, met, why="" if met else why)


NOISE_P = 0.05  # a watched median further from the control's than chance gives this often
# Past this many splits (12,870 for eight pairs each; 601 million for sixteen) a seeded
# sample of them stands for all: its chance is within a few tenths of a percent.
EXACT_SPLITS = 100_000


def _splits(total: int, size: int) -> Iterator[tuple[int, ...]]:
    """Every way to choose ``size`` of ``total`` places, or EXACT_SPLITS random ones."""
    if math.comb(total, size) <= EXACT_SPLITS:
        yield from itertools.combinations(range(total), size)
        return
    dealer = random.Random(0)
    for _ in range(EXACT_SPLITS):
        yield tuple(dealer.sample(range(total), size))


def beyond_noise_chance(watched: list[float], control: list[float]) -> float:
    """How often the pairs' ratios, dealt at random into a watched and a control group of the
    same sizes, put the watched median at least as far above the control's as measured: a
    one-sided permutation test (every split, 924 for six pairs each; a sample of them past
    EXACT_SPLITS)."""
    pooled = [*watched, *control]
    observed = statistics.median(watched) - statistics.median(control)
    splits = at_least = 0
    for chosen in _splits(len(pooled), len(watched)):
        picked = set(chosen)
        one = [pooled[i] for i in chosen]
        other = [pooled[i] for i in range(len(pooled)) if i not in picked]
        splits += 1
        at_least += statistics.median(one) - statistics.median(other) >= observed - 1e-12
    return at_least / splits


def _overhead_target(over: WatchOverhead, control: WatchOverhead | None) -> Target:
    want = (
        f"watching costs the program ≤ {OVERHEAD_TARGET:.0%} of its load time "
        f"(median of ≥ {MIN_PAIRS} alternating pairs)"
    )
    share = over.watch_core_share_median
    noise = f"; neither watched: {control.overhead:+.1%}" if control is not None else ""
    cpu = f"; the watch's CPU {share:.2%} of one core" if share is not None else ""
    measured = f"{over.overhead:+.1%} (median of {over.pairs} pairs{noise}{cpu})"
    if over.pairs < MIN_PAIRS:
        return Target(SECTION, want, measured + f"; not judged: < {MIN_PAIRS} pairs", None)
    met = over.overhead <= OVERHEAD_TARGET
    if not met and control is not None and control.ratios:
        chance = beyond_noise_chance(over.ratios, control.ratios)
        if chance >= NOISE_P:
            met = True
            measured += (
                f"; within the noise of such pairs: a median this far above the pairs with "
                f"neither watched comes by chance {chance:.0%} of the time (a permutation test "
                "of the pairs' ratios)"
            )
    spread = f"{min(over.ratios):.3f}–{max(over.ratios):.3f}"
    why = f"the watched / unwatched ratios of the pairs spread {spread}"
    if control is not None and control.ratios:
        why += (
            f"; with neither side watched the same pairs gave {control.overhead:+.1%} "
            f"(spread {min(control.ratios):.3f}–{max(control.ratios):.3f}): the noise floor "
            "of such pairs here"
        )
    if share is not None:
        why += f"; the watch's thread used {share:.2%} of one core, all it can take"
    return Target(SECTION, want, measured, met, why="" if met else why)


def _unusable(run: WatchedRun) -> str | None:
    """Why a watched run cannot stand for the program's load: it was not cold, or failed."""
    if not run.cold:
        return "its cache was not verified cold"
    if run.exit_code != 0:
        return f"it ended with exit code {run.exit_code}"
    return None


def watch_targets(results: BenchResults) -> list[Target]:
    report = results.watch
    if report is None:
        return []
    measured: list[Target] = []
    failed: list[Target] = []
    for run in report.programs:
        unusable = _unusable(run)
        if unusable is not None:
            failed.append(Target(SECTION, f"{run.kind} watched", unusable, False, why=unusable))
            continue
        if run.kind != LAZY_KIND:  # it loads a few rows: its own MB/s is not the file's
            measured.append(_speed_target(run))
        if run.kind == SHARED_KIND:
            measured.append(_shared_target(run))
        if run.kind == LAZY_KIND:
            measured.append(_lazy_target(run, report.size))
    for kind, why in report.failed.items():
        failed.append(Target(SECTION, f"{kind} watched", f"failed: {why}", False, why=why))
    if report.overhead is not None:
        measured.append(_overhead_target(report.overhead, report.control))
    if report.size < MIN_FILE_BYTES:  # a load shorter than a few samples: nothing to judge
        small = f"; not judged: a {_size(report.size)} file, the targets are for ≥ 1 GB"
        measured = [
            replace(t, measured=t.measured.split("; not judged")[0] + small, met=None, why="")
            for t in measured
        ]
    return measured + failed
