"""How two candidates are judged against each other, in every search: the rule that settles
a duel from its pairs (``settled``, ``clearly_faster``), the judgement of a duel as it stands,
paired or on all runs (``decide``, ``apart_unpaired``), and the record each sentence of the
answer reads (``Duel``, made by ``decided``). ``docs/how-it-measures.md`` gives the reasons for
each parameter."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from modelmon.core.measuring.ab import BEYOND_NOISE, Verdict, judge
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.noise import THEIRS, Noise, run_noise

MIN_PAIRS = 2  # the fewest pairs whose spread estimates their noise
# The smallest gain worth a less robust configuration (more memory or descriptors, a mapping,
# a changed machine): under it, runs that agree still do not change what a user should run.
MIN_GAIN = 1.05


@dataclass(frozen=True, kw_only=True)
class Duel:
    """How the pick was settled against the other finalist."""

    other: Candidate  # the finalist not picked (modelmon's best when a peer was picked)
    verdict: Verdict | None = None  # their pairs, B/A = other / pick; None: no pair fitted
    tie: bool = False  # within noise or under MIN_GAIN: the more robust one was picked
    pairs: int = 0
    noise: Noise | None = None  # what an unpaired decision weighed; None: pairs decided
    ratios: tuple[float, ...] = ()  # the pairs' other / pick rates, as ``verdict`` judged them
    # The pick is the baseline (what the user runs now) the answer keeps over ``other``, the
    # search's pick, which is under MIN_GAIN faster or within the noise of it.
    kept: bool = False


def apart_unpaired(faster: Candidate, slower: Candidate, noise: Noise) -> bool:
    """The one rule for runs not in pairs: the medians are apart beyond ``BEYOND_NOISE`` ×
    ``noise`` and by ``MIN_GAIN`` at least."""
    if slower.median_mbps <= 0 or faster.median_mbps <= 0:
        return False
    gap = abs(math.log(faster.median_mbps / slower.median_mbps))
    return gap > BEYOND_NOISE * noise.log and gap >= math.log(MIN_GAIN)


def clearly_faster(ratios: list[float], resolution: float = 0.0) -> bool:
    """The one rule that settles a pick, in every search: the challenger (B of the pairs'
    B/A ratios) replaces the incumbent only when it is faster in every pair beyond
    ``BEYOND_NOISE`` × the pairs' noise and their timing (``ab.judge``), by ``MIN_GAIN`` at
    least; otherwise the more robust stays (in a duel the more robust of the two, in the
    user's loader's rounds the loader as it is)."""
    verdict = judge(ratios, resolution)
    return verdict.text == "B faster" and verdict.median_ratio >= MIN_GAIN


def settled(ratios: list[float]) -> bool:
    """The stopping rule of a duel, on its pairs' ratios: apart beyond the noise (the verdict
    of an A/B) by ``MIN_GAIN`` at least, or so close that ``BEYOND_NOISE`` × the noise
    cannot bring them ``MIN_GAIN`` apart. Never before ``MIN_PAIRS`` pairs."""
    if len(ratios) < MIN_PAIRS:
        return False
    verdict = judge(ratios)
    gap, noise = abs(math.log(verdict.median_ratio)), math.log1p(verdict.noise)
    apart = clearly_faster(ratios) or clearly_faster([1 / r for r in ratios])
    return apart or gap + BEYOND_NOISE * noise < math.log(MIN_GAIN)


def decide(
    own: Candidate, rival: Candidate, ratios: list[float], noise: Noise | None = None
) -> tuple[Candidate, Candidate, Verdict, bool]:
    """A duel as it stands, from its rival/own ratios: (pick, the other, its verdict vs the
    pick, tie).

    From ``MIN_PAIRS`` pairs, judged as an A/B (``ab.judge``: every pair agrees and the gain
    is beyond the noise); with fewer, on all runs of the two, unpaired (``apart_unpaired``,
    against ``noise``: by default their own runs'). Within noise, or under ``MIN_GAIN``
    apart, it is a tie and the more robust (``Candidate.robustness``) is picked.
    """
    verdict = judge(ratios)
    if len(ratios) >= MIN_PAIRS:
        gap = math.log(verdict.median_ratio)
        apart = clearly_faster(ratios) or clearly_faster([1 / r for r in ratios])
    else:
        gap = math.log(rival.median_mbps / own.median_mbps)
        weighed = noise if noise is not None else Noise(run_noise(own, rival), THEIRS)
        apart = apart_unpaired(own, rival, weighed)
    tie = not apart or abs(gap) < math.log(MIN_GAIN)
    rival_wins = rival.robustness() < own.robustness() if tie else gap > 0
    if rival_wins:
        best, other, ratios = rival, own, [1 / r for r in ratios]
    else:
        best, other = own, rival
    verdict = judge(ratios)  # other / best: "A faster" = the pick is faster
    if tie:  # a ratio "faster" on its own is not beyond a noise the pairs do not show
        verdict = dataclasses.replace(verdict, text="within noise")
    elif len(ratios) < MIN_PAIRS:  # decided on all runs: the pick is the faster
        verdict = dataclasses.replace(verdict, text="A faster")
    return best, other, verdict, tie


def decided(
    own: Candidate, rival: Candidate, ratios: list[float], noise: Noise | None
) -> tuple[Candidate, Duel]:
    """``decide``'s judgement as the record every sentence reads (the pick, and the duel with
    its pairs' ratios as other / pick); the loser carries the verdict, the pick none."""
    best, other, verdict, tie = decide(own, rival, ratios, noise)
    best.verdict, other.verdict = None, verdict
    oriented = tuple(r if best is own else 1 / r for r in ratios)
    return best, Duel(
        other=other, verdict=verdict, tie=tie, pairs=len(ratios), noise=noise, ratios=oriented
    )
