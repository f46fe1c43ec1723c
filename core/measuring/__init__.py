"""Measuring: the A/B over runs, the storage's ceilings, the one search that recommends (its
candidates: modelmon's strategies, other loaders, the user's loader), ranks.

Its face: the parts of a comparison and a search a front end shows or reuses (a judged
side, the budget's use, the candidates, a ceiling's rules, a bucket's plain read)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.measuring.ab import ABFailed, SideSummary, judge
    from modelmon.core.measuring.ab_run import RunSettings
    from modelmon.core.measuring.advice import LoaderAdvice
    from modelmon.core.measuring.candidate import median_error
    from modelmon.core.measuring.ceiling_records import (
        CEILINGS,
        allowed_ratio,
        beyond_spread,
        keeps_bytes,
    )
    from modelmon.core.measuring.object_bounds import ObjectReading, plain_read
    from modelmon.core.measuring.ranks_checks import check_ranks
    from modelmon.core.measuring.ranks_records import find_straggler
    from modelmon.core.measuring.ranks_search import WayMeasured
    from modelmon.core.measuring.recommend import BudgetUse
    from modelmon.core.measuring.search_space import candidates
    from modelmon.core.measuring.server_advice import ServerAdvice

_EXPORTS = (
    ("modelmon.core.measuring.ab", "ABFailed SideSummary judge"),
    ("modelmon.core.measuring.ab_run", "RunSettings"),
    ("modelmon.core.measuring.recommend", "BudgetUse"),
    ("modelmon.core.measuring.search_space", "candidates"),
    ("modelmon.core.measuring.candidate", "median_error"),
    ("modelmon.core.measuring.ceiling_records", "CEILINGS keeps_bytes allowed_ratio beyond_spread"),
    ("modelmon.core.measuring.object_bounds", "plain_read ObjectReading"),
    ("modelmon.core.measuring.ranks_records", "find_straggler"),
    ("modelmon.core.measuring.ranks_search", "WayMeasured"),
    ("modelmon.core.measuring.ranks_checks", "check_ranks"),
    ("modelmon.core.measuring.advice", "LoaderAdvice"),
    ("modelmon.core.measuring.server_advice", "ServerAdvice"),
)
__all__, __getattr__, __dir__ = face("modelmon.core.measuring", _EXPORTS, globals())
