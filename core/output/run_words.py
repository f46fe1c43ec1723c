"""How a set of runs is named: "5 cold runs" only when every one started verified cold, "5
runs" of a bucket (nothing cached on this machine: never called cold); and what a figure of
them is: their median and range from two runs up, the run's own figure of one."""

from __future__ import annotations

from collections.abc import Sequence

from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.units import rate_span_text


def all_cold(results: Sequence[LoadResult]) -> bool:
    """Every run started from a verified cold cache: only then are they called cold."""
    return bool(results) and all(result.cache.cold for result in results)


def runs_words(results: Sequence[LoadResult]) -> str:
    """ "5 cold runs" when every run started verified cold, else "5 runs (none verified
    cold)" or "5 runs (2 not verified cold)": a model that cannot be made cold (tmpfs) is
    never said to be measured cold."""
    count = len(results)
    runs = f"{count} run{'s' if count != 1 else ''}"
    if results and all(result.cache.nothing_local for result in results):
        return runs  # a bucket's: nothing cached on this machine, never "cold"
    not_cold = sum(not result.cache.cold for result in results)
    if not not_cold:
        return f"{count} cold run{'s' if count != 1 else ''}"
    if not_cold == count:
        return f"{runs} (none verified cold)"
    return f"{runs} ({not_cold} not verified cold)"


def counted(count: int, what: str) -> str:
    """ "1 pair", "3 pairs": ``count`` of ``what`` (its singular)."""
    return f"{count} {what}{'s' if count != 1 else ''}"


def median_words(runs: str, count: int, span: str = "", *, the: bool = False) -> str:
    """What a figure of ``count`` runs (named ``runs``: "3 cold runs", ``runs_words``) is:
    "median of 3 cold runs, 576–707 MB/s" from two runs up (with their range ``span`` where
    one is given; ``the``: "the median of …"); of one run, "1 cold run": its own figure,
    neither a median nor a range. Every "median of N … A–B" modelmon says is made here."""
    if count < 2:
        return runs
    median = f"{'the ' if the else ''}median of {runs}"
    return f"{median}, {span}" if span else median


def not_certain(runs: str) -> str:
    """What an answer resting on fewer runs than its evidence asks ends with (``runs``: "1
    cold run", "2 runs"), in every answer modelmon gives."""
    return f" Not certain: only {runs} of it fitted the budget; give it a longer budget."


def runs_of(candidate: Candidate) -> str:
    """What a candidate's rate is of: "median of 5 cold runs, 136–174 MB/s" (the spread says
    how far one run of it may land), "1 cold run" of one."""
    spread = candidate.spread_mbps
    span = rate_span_text(*spread) if spread else ""
    return median_words(runs_words(candidate.results), len(candidate.results), span)
