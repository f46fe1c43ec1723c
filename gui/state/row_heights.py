"""How the workspace shares its height between the facts and configurations (top), the plots
(middle) and the results table, until the user drags a splitter handle. Qt-free.

The plots keep a readable height first, then the results table keeps a few rows, then the
top gets what is left up to its natural height (it scrolls below that).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RowNeeds:
    top_natural: int  # the configurations at their natural height: nothing scrolls
    top_min: int
    middle_min: int  # progress, A/B bar, tab bar and a plot whose axis labels fit
    results_natural: int  # header and about four rows
    results_min: int  # header and about two rows


def row_heights(total: int, needs: RowNeeds) -> tuple[int, int, int]:
    """(top, middle, results) summing to ``total`` (when it is at least the minimums)."""
    results = needs.results_natural
    top = min(needs.top_natural, total - needs.middle_min - results)
    if top < needs.top_min:  # short of room: the results give up rows first
        results = max(needs.results_min, results - (needs.top_min - top))
        top = max(needs.top_min, min(needs.top_natural, total - needs.middle_min - results))
    middle = max(0, total - top - results)
    return top, middle, results
