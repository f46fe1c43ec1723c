"""The recommendation as one answer a user acts on: what to change, what it gains against
what they run now (their loader as it is, else the format library's own read), and the one
line to paste. The why (``output.explain``) follows it, folded; every figure here is the
candidate's own median, as everywhere else."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.loaders.registry import get_engine
from modelmon.core.measuring.advice import clearly_gains
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_GAIN, apart_unpaired
from modelmon.core.measuring.noise import Noise
from modelmon.core.output.comparison import (
    apart_text,
    library_read,
    paired_verdict,
    pick_speedup,
    robustness_reason,
    search_noise,
    spec_words,
    times_text,
    weighed_against,
)
from modelmon.core.output.loader import change_words, in_loader_rounds, loader_snippets
from modelmon.core.output.run_words import counted, median_words, not_certain, runs_words
from modelmon.core.output.snippets import Snippet, matching, snippets
from modelmon.core.output.verdict import spread_words
from modelmon.core.units import rate_text

if TYPE_CHECKING:
    from modelmon.core.measuring.advice import LoaderAdvice
    from modelmon.core.measuring.recommend import Recommendation

# What the baseline measured: one connection reading each object in order, in GETs of
# MAX_CHUNK (an object of up to 1 GiB in one GET, a 2.5 GB one in three).
DOWNLOAD = "a plain download (one connection, each object in order, up to 1 GiB a GET)"


@dataclass(frozen=True, slots=True)
class Answer:
    action: str  # what to do, in one sentence
    gain: str  # what it gains, against what, measured how
    paste: Snippet | None  # the line to paste for it (None: nothing to change)

    def lines(self) -> list[str]:
        """The answer as the CLI prints it: three lines, the line to paste last."""
        out = [self.action, self.gain]
        if self.paste is not None:
            out.append(f"Paste ({self.paste.tool}): {self.paste.text}")
        return out


def _rate(candidate: Candidate) -> str:
    return rate_text(candidate.median_mbps)


def _how(candidate: Candidate) -> str:
    """What loading with ``candidate`` is, in the words of what a user runs."""
    program = candidate.program
    if program is not None and program.engine is not None:
        engine = get_engine(program.engine)
        settings = ", ".join(f"{k}={v}" for k, v in program.knobs) or "its defaults"
        return f"{engine.description or engine.label} with {settings}"
    return f"modelmon, {spec_words(candidate)} (the config file holds it)"


def _line(lines: list[Snippet], chosen: Candidate) -> Snippet | None:
    tool = matching(lines, chosen)
    return next((s for s in lines if s.tool == tool), None)


def answered(advice: LoaderAdvice) -> Candidate | None:
    """What the answer with the user's loader tells them to run: the change picked in its
    rounds; else modelmon's best where the same rule picks it against the loader
    (``advice.clearly_gains``); else the loader as it is. None: the loader did not complete
    (the search's pick is the answer)."""
    loader, best = advice.loader, advice.modelmon
    if not loader.results:
        return None
    if advice.pick is not None:
        return advice.pick
    if clearly_gains(best, loader):
        return best
    return loader


def _with_loader(rec: Recommendation, advice: LoaderAdvice, general: list[Snippet]) -> Answer:
    found = _loader_answer(rec, advice, general)
    used = answered(advice) or rec.used
    if len(used.results) < EVIDENCE_RUNS:  # the answer is no surer than its runs
        return dataclasses.replace(
            found, action=found.action + not_certain(runs_words(used.results))
        )
    return found


def _loader_answer(rec: Recommendation, advice: LoaderAdvice, general: list[Snippet]) -> Answer:
    loader, pick, best = advice.loader, advice.pick, advice.modelmon
    mine = loader_snippets(advice, rec.model)
    if not loader.results:
        return Answer(
            f"Your loader ({loader.spec}) {loader.reason or 'did not complete'}: "
            f"use {_how(rec.used)} instead.",
            f"It loaded the model at {_rate(rec.used)}, {_the_median(rec.used)}.",
            _line(general, rec.used),
        )
    if pick is not None:
        base = advice.baseline_of(pick)
        gain = advice.gain(pick) or 0.0
        return Answer(
            f"Change your loader: {change_words(pick, base)}.",
            f"{times_text(gain)} your loader as it is: {_rate(pick)} against {_rate(base)}, "
            f"{_paired_rounds(pick)}.{_faster_still(advice, gain)}",
            _line(mine, pick) or (mine[0] if mine else None),
        )
    if answered(advice) is best:
        gain = advice.gain(best) or 0.0
        paired = _paired_rounds(best) if best.verdict else "in the same rounds"
        line = _line(general, best)  # with the figure of the rounds the answer speaks of
        line = in_loader_rounds([line], advice)[0] if line is not None else None
        return Answer(
            f"Load with {_how(best)}: no setting of your loader was measured clearly faster.",
            f"{times_text(gain)} your loader as it is: {_rate(best)} against {_rate(loader)}, "
            f"{paired}.",
            line,
        )
    return Answer(
        "Keep your loader as it is: nothing measured here is clearly faster, in pairs of "
        "the same rounds.",
        f"It loads at {_rate(loader)}, {_the_median(loader)}.",
        None,
    )


def _faster_still(advice: LoaderAdvice, gain: float) -> str:
    """Where the answer is a change of the loader (the least to change) and modelmon's best
    gained ``MIN_GAIN`` more over the loader in the same rounds, by the same rule: said
    beside it, so the larger gain is not left to the Why."""
    best = advice.modelmon
    theirs = advice.gain(best) or 0.0
    if not clearly_gains(best, advice.loader) or theirs < gain * MIN_GAIN:
        return ""
    return (
        f" Faster still, modelmon's own load: {times_text(theirs)} your loader as it is "
        f"({_rate(best)}), the modelmon line of the config's [apply]."
    )


def _rate_of(candidate: Candidate) -> str:
    """ "905 MB/s (median of 3 cold runs)", "393 MB/s (1 cold run)": a rate and what it is of."""
    runs = median_words(runs_words(candidate.results), len(candidate.results))
    return f"{_rate(candidate)} ({runs})"


def _the_median(candidate: Candidate) -> str:
    """ "the median of 3 cold runs", "1 cold run": what a rate said after it is of."""
    return median_words(runs_words(candidate.results), len(candidate.results), the=True)


def _paired_rounds(candidate: Candidate) -> str:
    """ "median of 3 paired rounds": what a rate of the user's loader's rounds is of."""
    count = len(candidate.results)
    return median_words(counted(count, "paired round"), count)


def _against(used: Candidate, other: Candidate) -> str:
    """ "905 MB/s against 405 MB/s, medians of 3 cold runs each", or each rate with its own
    runs where they differ ("790 MB/s (median of 3 cold runs) against 393 MB/s (1 cold
    run)"): a count is never said of both sides when it is one side's."""
    runs = runs_words(used.results)
    if runs == runs_words(other.results) and len(used.results) > 1:
        return f"{_rate(used)} against {_rate(other)}, medians of {runs} each"
    return f"{_rate_of(used)} against {_rate_of(other)}"


def baseline_of(rec: Recommendation) -> Candidate | None:
    """What a user runs who changes nothing, as the search measured it: the format library's
    read of a file, a plain download of an object (``role == "baseline"``); completed, or
    stopped with the rate it stayed under. None where it was not run (a pool without it)."""
    pool = [
        c for c in (*rec.ranked, *rec.unranked) if c.role == "baseline" or c.strategy == "library"
    ]
    measured = next((c for c in pool if c.results), None)
    return measured or next((c for c in pool if c.stopped_below_mbps or c.reason), None)


def answer(rec: Recommendation, config_name: str, advice: LoaderAdvice | None = None) -> Answer:
    """The one answer of ``rec`` (with the user's loader measured beside it: ``advice``)."""
    general = snippets(rec.model, rec.winner, rec.ranked, config_name, rec.peers, rec.duel)
    if advice is not None:
        return _with_loader(rec, advice, general)
    found = _answer(rec, general)
    used = rec.used
    if len(used.results) < EVIDENCE_RUNS:  # the answer is no surer than its runs
        return dataclasses.replace(
            found, action=found.action + not_certain(runs_words(used.results))
        )
    return found


def _answer(rec: Recommendation, general: list[Snippet]) -> Answer:
    used = rec.used
    # What a user runs who changes nothing: the format library's read of a file, a plain
    # download of an object.
    baseline = baseline_of(rec)
    library = baseline if baseline is not None and baseline.results else None
    remote = any(file.remote is not None for file in rec.model.files)
    plain = DOWNLOAD if remote else library_read(rec.model.format)
    # A file's user reads it with its library now; a bucket's may stream it some other way.
    verb = "Load with" if remote else "Keep"
    if library is used:  # the library's read, a plain download of a bucket: the fastest way
        nearest = _nearest(rec, used)
        # The finalist it was raced against is named as such: not always the fastest other
        # (walk 17: "the best concurrent setting" named the slowest, beside vLLM lines that
        # named the fastest).
        raced = rec.duel is not None and nearest is rec.duel.other
        if raced and rec.duel is not None and rec.duel.kept:
            # Weighed on their runs, not raced in pairs: named as the why names it.
            other = "the search's pick"
        elif raced:
            what = "the concurrent setting" if remote else "modelmon's configuration"
            other = f"{what} it was raced against"
        else:
            best = "the best concurrent setting" if remote else "modelmon's best"
            other = f"{best} measured here"
        against = judged(rec, used, nearest) if nearest is not None else Judged(False, None)
        why = (
            "nothing measured here is clearly faster"
            if against.tie
            else "it is the fastest way measured here"
        )
        return Answer(
            f"{verb} {plain}: {why}.",
            _fastest(used, nearest, other, against),
            _line(general, used),
        )
    if library is None:
        return Answer(
            f"Load with {_how(used)}.", _unmeasured(used, baseline, plain), _line(general, used)
        )
    speedup = pick_speedup(used, library) or 0.0
    paired = (
        ", by the median of their alternating pairs" if paired_verdict(library) is not None else ""
    )
    # The one rule for the gain as for every comparison the answer states (``judged``): a
    # gain its runs do not tell apart from their noise, or under MIN_GAIN, is no change to
    # make; runs not in pairs say the noise they were weighed against.
    against = judged(rec, used, library)
    # Under MIN_GAIN it is no change whatever the noise: no noise is said of it.
    weighed = weighed_words(against, library, speedup) if speedup >= MIN_GAIN else ""
    if against.tie and used.robustness() < library.robustness():
        # Within noise of what the user runs now, and picked for being more robust: said so.
        return Answer(
            f"Load with {_how(used)}: as fast as {plain} within noise, and "
            f"{robustness_reason(used, library)}.",
            f"{times_text(speedup)} {plain}{paired}: {_against(used, library)}{weighed}.",
            _line(general, used),
        )
    if kept_baseline(rec) is not None:  # not worth a change from what the user runs now
        return Answer(
            f"{verb} {plain}: nothing measured here is clearly faster.",
            f"modelmon's best, {used.spec}, is {times_text(speedup)} {plain}{paired}: "
            f"{_against(used, library)}{weighed}.",
            _line(general, library),
        )
    return Answer(
        f"Load with {_how(used)}.",
        f"{times_text(speedup)} {plain}{paired}: {_against(used, library)}{weighed}.",
        _line(general, used),
    )


def _nearest(rec: Recommendation, used: Candidate) -> Candidate | None:
    """What the pick is measured against: the other finalist of its duel, which the search
    compared it with (in pairs where they fitted); else the fastest other candidate that
    completed (a failure mode apart); None where none did. A higher median of one entry run
    elsewhere is no finding the search made."""
    duel = rec.duel
    if duel is not None and duel.other is not used and duel.other.results:
        return duel.other
    rest = [c for c in rec.ranked if c is not used and c.results and c.role != "failure mode"]
    return max(rest, key=lambda c: c.median_mbps) if rest else None


@dataclass(frozen=True)
class Judged:
    """The pick against ``_nearest`` as the search's rule judged them: ``tie`` (within noise
    or under ``MIN_GAIN``), and where their runs were not in pairs, the ``noise`` weighed."""

    tie: bool
    noise: Noise | None


def judged(rec: Recommendation, used: Candidate, other: Candidate) -> Judged:
    """The duel's judgement where ``other`` is its other finalist (the search judged it on
    all their runs: the why and the ranking say the same); else the same rule for runs not
    in pairs (``apart_unpaired``) on all the search's runs, never a gain of single runs no
    noise was weighed against."""
    duel = rec.duel
    if duel is not None and duel.other is other:
        return Judged(duel.tie, duel.noise)
    return _unpaired(rec, used, other)


def _unpaired(rec: Recommendation, used: Candidate, other: Candidate) -> Judged:
    """``used`` against ``other`` by the rule for runs not in pairs, on all the search's runs."""
    noise = search_noise(rec, used, other)
    faster, slower = sorted((used, other), key=lambda c: c.median_mbps, reverse=True)
    return Judged(not apart_unpaired(faster, slower, noise), noise)


def kept_baseline(rec: Recommendation) -> tuple[Candidate, Noise | None] | None:
    """The baseline (``baseline_of``) where the answer keeps it over the search's pick, with
    the noise the two were weighed against: the pick is under ``MIN_GAIN`` faster, or within
    the noise of it and no more robust, and nothing else measured is clearly faster than the
    baseline (walk 26 kept a plain download at 983 MB/s, "nothing measured here is clearly
    faster", beside a setting at 1478 MB/s beyond the noise of it). None where the pick
    stands, or is the baseline."""
    used, baseline = rec.used, baseline_of(rec)
    if baseline is None or not baseline.results or baseline is used:
        return None
    against = judged(rec, used, baseline)
    if against.tie and used.robustness() < baseline.robustness():
        return None  # as fast within noise, and more robust: the pick stands
    speedup = pick_speedup(used, baseline) or 0.0
    if speedup >= MIN_GAIN and not against.tie:
        return None
    # Any other setting faster beyond the rule for runs not in pairs (MIN_GAIN included).
    rivals = [c for c in rec.ranked if c.results and c.role != "failure mode"]
    others = [c for c in rivals if c is not used and c is not baseline]
    faster = [c for c in others if c.median_mbps > baseline.median_mbps]
    if any(not _unpaired(rec, c, baseline).tie for c in faster):
        return None
    return baseline, against.noise


def _fastest(used: Candidate, nearest: Candidate | None, other: str, against: Judged) -> str:
    """The gain of the baseline where it is the pick: over the next fastest measured (by
    their pairs where they ran in pairs, as everywhere), named as ``other``; where the search
    found the two within noise, that, and no gain. Runs not in pairs say the noise they were
    weighed against, so a tie and a gain read by one rule."""
    if nearest is None:
        return (
            f"It loads at {_rate(used)}, {_the_median(used)}; nothing else measured here "
            "completed to compare."
        )
    if against.tie:
        verdict = paired_verdict(nearest)
        by_pairs = ""
        if verdict is not None:  # their pairs' figure, as the why and the ranking give it
            ratio = verdict.median_ratio  # nearest / the pick
            ahead = (
                f"it {times_text(ratio)} faster"
                if ratio >= 1
                else f"{times_text(1 / ratio)} slower"
            )
            by_pairs = f" by their {verdict.pairs} alternating pairs ({ahead} by the median pair)"
        # Runs not in pairs: their ratio beside the one their noise allows, as the why says.
        ratio = nearest.median_mbps / used.median_mbps if used.median_mbps > 0 else 0.0
        apart = f", {apart_text(ratio)}" if against.noise is not None else ""
        return (
            f"{other[0].upper()}{other[1:]}, {spec_words(nearest)}, ran within noise of "
            f"it{by_pairs}: {_against(nearest, used)}{apart}"
            f"{weighed_words(against, nearest, ratio)}."
        )
    gain = pick_speedup(used, nearest) or 0.0
    verdict = paired_verdict(nearest)
    # A gain of pairs is said as one (walk 19 read 1.19x beside medians 1.07x apart).
    by_pairs = f", by the median of their {verdict.pairs} alternating pairs" if verdict else ""
    return (
        f"{times_text(gain)} as fast as {other}, {spec_words(nearest)}{by_pairs}: "
        f"{_against(used, nearest)}{weighed_words(against, nearest, gain)}."
    )


def weighed_words(against: Judged, other: Candidate, ratio: float) -> str:
    """ ", within twice the ±31% their runs spread (up to 1.72×)" of rates ``ratio`` apart
    in a tie, ", beyond twice ... (over 1.22×)" of a gain: the noise runs not in pairs were
    weighed against, and the ratio it allows; of pairs, how far they spread (", both pairs
    within ±16 % of their median"): a noise is said of every comparison."""
    if against.noise is not None:
        return f", {weighed_against(against.noise, ratio)}"
    verdict = paired_verdict(other)
    return f", {spread_words(verdict.noise, verdict.pairs)}" if verdict is not None else ""


def _unmeasured(used: Candidate, baseline: Candidate | None, plain: str) -> str:
    """The gain where the baseline has no completed run: stopped, the bound its rate stayed
    under (the pick is that many times faster or more); failed, why; else not run."""
    rate = f"It loads at {_rate(used)}, {_the_median(used)}"
    if baseline is not None and baseline.stopped_below_mbps:
        bound = baseline.stopped_below_mbps
        why = baseline.reason.removeprefix("cut early: ")
        return (
            f"At least {times_text(used.median_mbps / bound)} {plain}: {_rate_of(used)} "
            f"against under {bound:.0f} MB/s; its one run was cut: {why}."
        )
    if baseline is not None and baseline.ended == "failed":
        return f"{rate}; {plain} failed here ({baseline.reason.removeprefix('failed: ')})."
    return f"{rate}; {plain} was not measured to compare."
