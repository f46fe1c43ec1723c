"""Why a configuration whose median is above the pick's is not the pick, in one clause with
its figures (``why_not_picked``): the note of the config file's [[alternatives]] row and the
app's ranking row. Ranked by median, a setting screened once on a lucky run reads as "a
faster setting was found and not recommended"; each reason here is read from what the search
recorded of it: its runs, its pairs (its verdict), whether it was the pick's other finalist
(``Recommendation.duel``), and the search's rule for runs not in pairs (``answer.judged``).

A contender the search never paired is one the budget ended on: the search races until
neither an entry nor a pair fits (``search.Search.run``), and every contender left waits to
be the next challenger."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from modelmon.core.measuring.ab import Verdict
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_GAIN, Duel
from modelmon.core.measuring.noise import Noise
from modelmon.core.output.answer import judged
from modelmon.core.output.comparison import (
    paired_verdict,
    times_text,
    weighed_against,
    within_twice,
)
from modelmon.core.output.run_words import counted, runs_words

if TYPE_CHECKING:
    from modelmon.core.measuring.recommend import Recommendation

PICK = "the pick"
UNDER_GAIN = f"under {MIN_GAIN - 1:.0%} apart"


def why_not_picked(
    rec: Recommendation, candidate: Candidate, pick: Candidate | None = None, name: str = PICK
) -> str:
    """ "1 run, 8% above the pick's median, within twice a bucket's usual ±22% run-to-run
    noise; screened once, the budget ended before it was raced": why ``candidate`` is not
    ``pick`` (default: ``rec.used``; called ``name``) though its median is higher; "" where
    it is not higher, or it has no completed run (a bound is said by its own note)."""
    pick = rec.used if pick is None else pick
    if candidate is pick or not candidate.results or pick.median_mbps <= 0:
        return ""
    ratio = candidate.median_mbps / pick.median_mbps
    if ratio <= 1:
        return ""
    median = f"{name}'s median" if name == PICK else f"the median of {name}"
    head = f"{runs_words(candidate.results)}, {_percent(ratio)} above {median}"
    return f"{head}, {_reason(rec, candidate, pick, name, ratio)}"


def _percent(ratio: float) -> str:
    """ "8%"; a gain under 1% keeps a decimal, so none reads as "0% above"."""
    gain = (ratio - 1) * 100
    return f"{gain:.0f}%" if gain >= 1 else f"{gain:.1f}%"


def _reason(rec: Recommendation, c: Candidate, pick: Candidate, name: str, ratio: float) -> str:
    if c.role == "failure mode" or c.ended == "ruled out":
        return "measured as the failure mode, never a contender"
    if c.ended != "finished":
        return f"but out of the race: {c.reason or c.ended}"
    duel = rec.duel
    if duel is not None and duel.other is c:
        return _finalist(rec, duel, c, pick, name, ratio)
    if c.verdict is not None:
        return _lost(c.verdict)
    weighed = _weighed(ratio, judged(rec, pick, c).noise)
    if len(c.results) == 1:
        return f"{weighed}; screened once, the budget ended before it was raced"
    return f"{weighed}; not raced against {name}"


def _finalist(
    rec: Recommendation, duel: Duel, c: Candidate, pick: Candidate, name: str, ratio: float
) -> str:
    """The pick's other finalist: the search's pick the answer kept out, or the one the pick
    beat in pairs, or on their runs."""
    noise = duel.noise if duel.noise is not None else judged(rec, pick, c).noise
    if duel.kept:
        return (
            f"the search's pick, weighed against what you run now: {_weighed(ratio, noise)}, "
            "so what you run now is kept"
        )
    verdict = paired_verdict(c)
    if verdict is not None:  # other / pick, pair by pair
        pairs = f"raced in {counted(verdict.pairs, 'alternating pair')}"
        median = verdict.median_ratio
        if not duel.tie:
            return f"{pairs}: {name} {times_text(1 / median)} faster by the median pair"
        apart = UNDER_GAIN if abs(math.log(median)) < math.log(MIN_GAIN) else "not separated"
        return (
            f"{pairs}: {times_text(median)} by the median pair, {apart}, so "
            f"{name}, the simpler, stands"
        )
    return (
        f"weighed on their runs (not in pairs) {_weighed(ratio, noise)}, so "
        f"{name}, the simpler, stands"
    )


def _lost(verdict: Verdict) -> str:
    """A duel lost before the finals; its verdict is B/A = it / the one it lost to."""
    if verdict.pairs < 2 or verdict.median_ratio <= 0:
        lost = "it lost a duel weighed on its runs"
        return f"{lost}, within noise of a simpler one" if verdict.text == "within noise" else lost
    lost = f"it lost a duel of {counted(verdict.pairs, 'alternating pair')}"
    median = verdict.median_ratio
    if verdict.text == "within noise":
        return f"{lost}: {times_text(median)} by the median pair, within noise of a simpler one"
    return f"{lost}: the other {times_text(1 / median)} faster by the median pair"


def _weighed(ratio: float, noise: Noise | None) -> str:
    """What its runs against the pick's are, by the rule for runs not in pairs
    (``judging.apart_unpaired``): within twice the noise weighed; else under ``MIN_GAIN``
    apart; else beyond the noise (which no duel then settled)."""
    if noise is None or not noise.known:
        return "within a noise no configuration had run twice to tell"
    # With the gain twice the noise allows, said as this note says its gain ("8%").
    if within_twice(ratio, noise.log) or ratio >= MIN_GAIN:
        return weighed_against(noise, ratio, _percent)
    return UNDER_GAIN
