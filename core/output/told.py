"""The recommendation as its answer tells it: the one record the answer, the why, the ranking,
the config file and the memory line are made from (``as_told``). Where the answer keeps what
the user runs now (the library's read, a plain download) over the search's pick, that is the
told pick; where the user's loader's rounds ran modelmon's best, those runs are its evidence."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import Duel
from modelmon.core.output.answer import kept_baseline
from modelmon.core.output.comparison import paired_verdict

if TYPE_CHECKING:
    from modelmon.core.measuring.advice import LoaderAdvice
    from modelmon.core.measuring.recommend import Recommendation


def as_told(rec: Recommendation, advice: LoaderAdvice | None = None) -> Recommendation:
    """The recommendation as its answer tells it, the one record every part of a config file
    and every word about it is made from. Where the user's loader's rounds ran modelmon's
    best, those runs (paired with the loader's: the answer's figure) are its evidence, not
    the search's entry runs of the same configuration: otherwise ``[evidence]`` said 1 run at
    1,748 MB/s and ``[recommendation]`` 3 runs at 1,875 MB/s of one configuration. Without a
    loader, where the answer keeps the baseline, the baseline is the pick (``_keeping``)."""
    if advice is None:
        return _keeping(rec)
    if not advice.modelmon.results or advice.modelmon.config != rec.winner.config:
        return rec
    winner = rec.winner
    rounds = dataclasses.replace(
        winner,
        results=list(advice.modelmon.results),
        wall_seconds=[],
        ended="finished",
        reason="",
        stopped_below_mbps=None,
    )

    def told(candidate: Candidate) -> Candidate:
        return rounds if candidate is winner else candidate

    duel = rec.duel
    if duel is not None and duel.other is winner:
        duel = dataclasses.replace(duel, other=rounds)
    return dataclasses.replace(
        rec,
        winner=rounds,
        ranked=tuple(told(c) for c in rec.ranked),
        pick=None if rec.pick is None or rec.pick is winner else rec.pick,
        duel=duel,
    )


def _keeping(rec: Recommendation) -> Recommendation:
    """``rec`` with the baseline as its pick where the answer keeps it (``kept_baseline``):
    walk 21's CLI answered "Load with a plain download: nothing measured here is clearly
    faster" over a config file whose [recommendation] and [recommended] were the search's
    pick, and a why that recommended it. The search's pick becomes the other finalist,
    weighed against the baseline on their runs, not in pairs (as the answer weighed them);
    no candidate keeps a verdict of pairs with the search's pick, which is no longer the one
    the ranking calls "the pick"."""
    kept = kept_baseline(rec)
    if kept is None:
        return rec
    baseline, noise = kept
    if paired_verdict(baseline) is not None or noise is None:
        return rec  # judged in pairs with the pick: the search's own duel already said it
    old = rec.used
    unpaired = {id(c): dataclasses.replace(c, verdict=None) for c in (*rec.ranked, *rec.peers)}

    def told(candidate: Candidate) -> Candidate:
        return unpaired.get(id(candidate), candidate)

    return dataclasses.replace(
        rec,
        winner=told(baseline),
        ranked=tuple(told(c) for c in rec.ranked),
        peers=tuple(told(c) for c in rec.peers),
        pick=None,
        duel=Duel(other=told(old), tie=True, noise=noise, kept=True),
    )
