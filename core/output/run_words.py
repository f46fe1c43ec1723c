"""How a set of runs is named: "5 cold runs" only when every one started verified cold, "5
runs" of a bucket (nothing cached on this machine: never called cold)."""

from __future__ import annotations

from collections.abc import Sequence

from modelmon.core.loading.result import LoadResult


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
