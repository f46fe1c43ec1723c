"""Plain sentences about a recommendation: what was measured, what won and why, what the
storage rules out. The snippets for the loaders people use are in ``output.snippets``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.loaders.registry import get_engine
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import keeps_bytes
from modelmon.core.measuring.judging import MIN_GAIN, MIN_PAIRS
from modelmon.core.measuring.noise import THEIRS, Noise, run_noise
from modelmon.core.output.answer import judged, weighed_words
from modelmon.core.output.bound_words import far_below_bound, keeping_cost, runs_above_bound
from modelmon.core.output.ceiling_words import measured_sentence
from modelmon.core.output.comparison import (
    apart_text,
    library_read,
    paired_verdict,
    pick_speedup,
    robustness_reason,
    spec_words,
    times_text,
    twice_bound,
    weighed_against,
    within_twice,
)
from modelmon.core.output.failure_mode import failure_mode_lines
from modelmon.core.output.readahead_words import readahead_sentence
from modelmon.core.output.run_words import all_cold, runs_of, runs_words
from modelmon.core.output.verdict import spread_words
from modelmon.core.system.memory_limit import ram_text, size_text
from modelmon.core.system.storage import RAM_FS_TYPES, storage_facts
from modelmon.core.units import rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation
    from modelmon.core.system.storage import StorageFacts


def _best(ranked: tuple[Candidate, ...], strategy: str) -> Candidate | None:
    return next((c for c in ranked if c.strategy == strategy and c.results), None)


def _times(fast: float, slow: float) -> str:
    return times_text(fast / slow) if slow > 0 else "∞×"


def _cold_word(*candidates: Candidate) -> str:
    """ "cold " when every run of ``candidates`` started verified cold (not a bucket's, which
    has no cache on this machine), else ""."""
    results = [r for c in candidates for r in c.results]
    if results and all(r.cache.nothing_local for r in results):
        return ""
    return "cold " if all(all_cold(c.results) for c in candidates) else ""


def _not_cold(rec: Recommendation) -> list[str]:
    """Why the pick's runs were not cold, when they were not (the file lives in RAM...)."""
    results = rec.used.results
    missed = [result for result in results if not result.cache.cold]
    if not missed:
        return []
    files = rec.model.files
    if files and files[0].remote is None:
        fs_type = (rec.storage or storage_facts(files[0].path)).fs_type
        if fs_type in RAM_FS_TYPES:  # no run starts cold there: cold is not said of one
            return [
                f"The model's files live in RAM ({fs_type}): nothing can drop them from "
                "memory, so every rate here includes pages that were already in RAM."
            ]
    why = next((result.cache.note for result in missed if result.cache.note), "")
    because = f" ({why})" if why else ""
    if len(missed) < len(results):
        return [
            f"{len(missed)} of the pick's {len(results)} runs did not start from a verified "
            f"cold cache{because}."
        ]
    return [
        f"None of the pick's runs started from a verified cold cache{because}: its rates "
        "include pages that were already in RAM."
    ]


def _library(rec: Recommendation, used: Candidate, winner: Candidate) -> list[str]:
    """The library's own read beside the pick (cut early: the rate it stayed under), judged
    as the answer judges it (``judged``: one rule, one figure; walk 22's why said "within
    the winner's spread" of a library the answer called 1.45x slower beyond twice its
    noise)."""
    baseline = _best(rec.ranked, "library")
    library = library_read(rec.model.format, start=True)
    if baseline is None:  # none completed: the rate a run cut early stayed under, if one was
        stopped = next((c for c in rec.ranked if c.strategy == "library" and not c.results), None)
        if stopped is None or not stopped.stopped_below_mbps:
            return []
        return [
            f"{library} stayed under {rate_text(stopped.stopped_below_mbps)} before it was "
            f"cut: the recommendation is {_times(used.median_mbps, stopped.stopped_below_mbps)} "
            "that or more."
        ]
    if baseline is winner:
        if rec.duel is not None and rec.duel.kept:
            return []  # kept, not found best: the duel's sentence says why
        return [f"{library} is the best here: what you do today is already right for this storage."]
    # The figure the finals, the answer and the ranking give; the pairs' median where they
    # decided, said so: beside the rate just given, a ratio of another pair of figures reads
    # as a wrong sum (walk 21: 2.40x of 885 MB/s beside a pick of 2047).
    speedup = pick_speedup(used, baseline) or used.median_mbps / baseline.median_mbps
    paired = (
        " by the median of their alternating pairs" if paired_verdict(baseline) is not None else ""
    )
    against = judged(rec, used, baseline)
    figure = f"{times_text(speedup)} that{paired}{weighed_words(against, baseline, speedup)}"
    if against.tie:  # the figure in no parenthesis: the ratio its noise allows is in one
        return [
            f"{library} reached {rate_text(baseline.median_mbps)}: the recommendation is "
            f"{figure}, as fast within noise; it is picked because "
            f"{robustness_reason(used, baseline)}."
        ]
    return [f"{library} reached {rate_text(baseline.median_mbps)}: the recommendation is {figure}."]


def _duel(rec: Recommendation, used: Candidate) -> list[str]:
    if rec.duel is None:
        # Said of modelmon's own configurations: a loader's rounds beside them compare too.
        return [
            "It is the only one of modelmon's configurations that completed within the "
            "budget: none of the others was raced against it."
        ]
    other, verdict, pairs, noise = rec.duel.other, rec.duel.verdict, rec.duel.pairs, rec.duel.noise
    if rec.duel.kept:  # the answer keeps what the user runs now over the search's pick
        searched = other.median_mbps / used.median_mbps if used.median_mbps > 0 else 0.0
        # The answer's yardstick (a walk read "within twice a bucket's usual ±22%" there,
        # "under 5% apart" here); the least gain worth a change where it alone keeps it.
        how_far = (
            f"{apart_text(searched)}, {weighed_against(noise, searched)}"
            if noise is not None and within_twice(searched, noise.log)
            else f"under {MIN_GAIN - 1:.0%} apart"
        )
        return [
            f"The search's pick, {other.spec}, was weighed against what you run now, "
            f"{used.spec}, on their runs, not in pairs: {rate_text(other.median_mbps)} "
            f"({runs_of(other)}) against {rate_text(used.median_mbps)} ({runs_of(used)}), "
            f"{how_far}, so what you run now is kept. Give it a longer budget for a verdict."
        ]
    if verdict is None:
        head = (
            f"No paired runs with the other finalist ({other.spec}) fitted the budget, so "
            f"their runs were weighed, not in pairs: the pick's {rate_text(used.median_mbps)} "
            f"({runs_of(used)}) against {rate_text(other.median_mbps)} ({runs_of(other)})"
        )
        ratio = other.median_mbps / max(used.median_mbps, 1e-9)
        weighed = (
            f", {apart_text(ratio)}, {weighed_against(noise, ratio)}" if noise is not None else ""
        )
        if not rec.duel.tie:
            return [f"{head}{weighed}. Give it a longer budget for a verdict."]
        within = f"{head}{weighed or '; they are within twice their noise'}"
        if used.robustness() < other.robustness():
            return [
                f"{within}, so the simpler one is recommended: {used.spec}, because "
                f"{robustness_reason(used, other)}. Give it a longer budget for a verdict."
            ]
        return [
            f"{within}, and neither is simpler, so the higher median decided: {used.spec}. "
            "Give it a longer budget for a verdict."
        ]
    gain = pick_speedup(used, other) or float("inf")
    head = (
        f"Paired with the other finalist ({other.spec}, {rate_text(other.median_mbps)}) in "
        f"alternating {_cold_word(used, other)}runs, {pairs} pair{'s' if pairs != 1 else ''}: "
    )
    if rec.duel.tie:
        ahead = (
            f"the pick {times_text(gain)} faster"
            if gain >= 1
            else f"the other finalist {times_text(1 / gain)} faster"
        )
        # Under MIN_PAIRS pairs the gain is of all their runs (``pick_speedup``), as decided.
        ahead += " by the median pair" if pairs >= MIN_PAIRS else " by their medians"
        apart = max(gain, 1 / gain) if 0 < gain < float("inf") else float("inf")
        close = f"under {MIN_GAIN - 1:.0%} apart" if apart < MIN_GAIN else ""
        if pairs < MIN_PAIRS and noise is not None:
            # One pair decides nothing alone: said as the ranking says it, all their runs
            # decided, against ``noise``; the pairs' noise is what one pair cannot estimate.
            within = (
                head + "too few to estimate the pairs' noise, so all their runs decided: "
                f"{ahead}, {close + ' and ' if close else ''}{weighed_against(noise, gain)}"
            )
        else:
            spread = verdict.note or spread_words(verdict.noise, pairs)
            middle = (
                f"{close} ({ahead}, {spread})" if close else f"within noise ({ahead}, but {spread})"
            )
            within = head + middle + ": the pairs do not separate them"
        if used.robustness() == other.robustness():
            return [f"{within} and neither is simpler, so the higher median decided: {used.spec}."]
        return [
            f"{within}, so the simpler one is recommended: {used.spec}, because "
            f"{robustness_reason(used, other)}."
        ]
    if pairs < MIN_PAIRS:
        noise = noise or Noise(run_noise(used, other), THEIRS)
        ratio = used.median_mbps / max(other.median_mbps, 1e-9)
        return [
            head + "too few to estimate the pairs' noise, so all their runs decided: the "
            f"pick's {rate_text(used.median_mbps)} ({runs_of(used)}) against the other "
            f"finalist's {rate_text(other.median_mbps)} ({runs_of(other)}), "
            f"{apart_text(ratio)}, {weighed_against(noise, ratio)}."
        ]
    if verdict.text == "A faster":
        bound = twice_bound(gain, math.log1p(verdict.noise))
        return [
            head + f"{times_text(gain)} faster by the median pair, every pair agreeing, beyond "
            f"twice their noise ({bound}; {spread_words(verdict.noise, pairs)})."
        ]
    return [head + "the pick had the higher median but the pairs did not all agree."]


def _peers(rec: Recommendation) -> list[str]:
    lines = []
    program = rec.pick.program if rec.pick is not None else None
    if rec.pick is not None and program is not None and program.engine is not None:
        loader = get_engine(program.engine)
        settings = ", ".join(f"{k}={v}" for k, v in program.knobs) or "its defaults"
        # The file's evidence is of modelmon's best: its share of the ceiling is said here
        # too, so that the sentence and the file's fraction_of_ceiling agree.
        winner = rec.winner
        efficiency = rec.ceilings.efficiency(
            winner.median_mbps, keeps_bytes(winner.strategy, winner.options.discard)
        )
        share = f", {efficiency.words()}" if efficiency is not None else ""
        lines.append(
            f"Use {loader.description or loader.label} with {settings}: "
            f"{rate_text(rec.pick.median_mbps)} "
            f"({runs_of(rec.pick)}), {_times(rec.pick.median_mbps, rec.winner.median_mbps)} "
            f"modelmon's best ({rec.winner.spec}, {rate_text(rec.winner.median_mbps)}{share}), "
            "which the config file holds for modelmon.core.load."
        )
    for peer in rec.peers:
        if peer is rec.pick:
            continue
        if peer.results:
            lines.append(f"Peer {peer.spec}: {rate_text(peer.median_mbps)} ({runs_of(peer)}).")
        else:
            lines.append(f"Peer {peer.spec}: {peer.reason}.")
    lines += [f"Not measured: {note}." for note in rec.absent_peers]
    return lines


def _overlaps(rec: Recommendation) -> list[str]:
    """Runs of this search that shared the device with other modelmon runs: said, with who."""
    runs = [r for c in (*rec.ranked, *rec.peers, *rec.unranked) for r in c.results]
    shared = [r for r in runs if r.overlapped_by]
    if not shared:
        return []
    others = "; ".join(sorted({r.overlapped_by or "" for r in shared}))
    return [
        f"{len(shared)} of the {len(runs)} runs measured here shared the device with other "
        f"modelmon runs ({others}): those figures are not this model's alone; measure again "
        "while nothing else uses the device."
    ]


def _under_limit(rec: Recommendation, used: Candidate) -> list[str]:
    """Under a memory limit: what the pick took at most and re-read, and who it put out."""
    held = [r.memory_limit for r in used.results if r.memory_limit is not None]
    if not held:
        return []
    top = max(held, key=lambda m: m.peak_bytes)
    share = max(m.reread_bytes for m in held) / max(1, rec.model.total_bytes)
    reread = f"; it re-read {share:.0%} of the model after reclaim" if share >= 0.005 else ""
    out = [c.spec for c in rec.unranked if "memory limit" in c.reason]
    lines = [
        f"Under the memory limit of {size_text(top.limit_bytes)} (every run in a memory "
        f"cgroup of that size) it took at most {ram_text(top.peak_bytes)}, "
        f"{ram_text(top.anon_peak_bytes)} of it anonymous and the rest reclaimable page "
        f"cache{reread}."
    ]
    probed = rec.limit_probes.sentence() if rec.limit_probes is not None else ""
    lines += [probed] if probed else []
    if out:
        lines.append(
            f"Out under the limit (OOM-killed, or re-reading its model): {', '.join(out)}."
        )
    return lines


def explain(
    rec: Recommendation, facts: StorageFacts | None = None, measured: frozenset[str] = frozenset()
) -> list[str]:
    """The recommendation in sentences: what the storage gives, the pick and its evidence,
    its rivals and what they teach. ``facts``: the storage (default: the search's own);
    ``measured``: specs measured outside the search (the user's loader's rounds), never
    listed as not measured."""
    facts = facts if facts is not None else rec.storage
    lines = []
    used, winner, ceilings = rec.used, rec.winner, rec.ceilings
    measured_here = measured_sentence(ceilings)
    lines += [measured_here] if measured_here else []
    binding = ceilings.binding_words()
    if binding:
        lines.append(binding)
    efficiency = ceilings.efficiency(
        used.median_mbps, keeps_bytes(used.strategy, used.options.discard)
    )
    ceiling_text = f", {efficiency.words()}" if efficiency is not None else ""
    # What the answer keeps is not the best of a search that found it no slower (walk 22:
    # "Best: ranged threads=1 ..." beside the loads' faster rates): it is what is kept.
    kept = rec.duel is not None and rec.duel.kept
    head = f"Kept: {spec_words(used)}, what you run now," if kept else f"Best: {spec_words(used)}"
    lines.append(f"{head} at {rate_text(used.median_mbps)} ({runs_of(used)}){ceiling_text}.")
    lines += far_below_bound(rec, used, efficiency)
    lines += keeping_cost(rec, used, efficiency)
    lines += runs_above_bound(rec, used, efficiency)
    lines += _not_cold(rec)
    lines += _under_limit(rec, used)
    if len(used.results) < EVIDENCE_RUNS:
        lines.append(
            f"Only {runs_words(used.results)} fitted the budget: too few to trust; "
            "give it a longer budget."
        )
    lines += _overlaps(rec)
    lines += _duel(rec, used)
    lines += readahead_sentence(rec)
    lines += _peers(rec)
    lines += _library(rec, used, winner)
    lines += failure_mode_lines(rec, used.median_mbps, facts)
    cut = [c for c in rec.ranked if c.ended == "cut early"]
    if cut:
        lines.append(
            "Cut early: "
            + "; ".join(f"{c.spec}: {c.reason.removeprefix('cut early: ')}" for c in cut)
            + "."
        )
    failed = [c for c in rec.unranked if c.ended == "failed"]
    if failed:
        lines.append("Failed: " + "; ".join(f"{c.spec}: {c.reason}" for c in failed) + ".")
    skipped = [c for c in rec.unranked if c.ended == "not measured" and c.spec not in measured]
    if skipped:
        more = ""
        unmeasured_s = rec.budget.unmeasured_s
        if unmeasured_s > 0:
            # Rounded up to 10 s: a budget to type, and the duel takes a share of any budget.
            ask = math.ceil((rec.budget.given_s + unmeasured_s) / 10) * 10
            more = (
                f"; screening them once would take about {unmeasured_s:.0f} s more at "
                f"this search's pace: a budget of {ask} s or more"
            )
        names = ", ".join(c.spec for c in skipped)
        lines.append(f"Not measured in the search (no budget left{more}): {names}.")
    mmap = _best(rec.ranked, "mmap")
    if winner.strategy == "mmap-view":
        lines.append(
            "Its tensors are views of the file's pages in the page cache (no copy): they stay "
            "valid while the file is unchanged, and the kernel may drop and re-read them under "
            "memory pressure; a file truncated or rewritten in place while they live kills the "
            "process (SIGBUS). For files that change, use the best copying strategy."
        )
    mapped = get_strategy(winner.strategy).maps_file
    if mmap and not mapped and mmap.median_mbps < winner.median_mbps:
        lines.append(
            f"Plain mmap with own descriptors reached {rate_text(mmap.median_mbps)}: "
            "reading the bytes explicitly beats page-faulting them in on this storage."
        )
    return lines
