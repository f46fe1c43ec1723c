"""How the workspace shares its height between the facts and configurations (top), the plots
(middle) and the results table, until the user drags a splitter handle. Qt-free.

The plots keep a readable height first, the top (the configurations) its first row and the
results table one row; then the top grows to its natural height (it scrolls below that),
then the results to a few rows, and the plots take the rest. In a tall window, once the
plots are comfortably tall, the results table grows to show every run (up to its cap)
before the plots take the rest.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RowNeeds:
    top_natural: int  # the configurations at their natural height: nothing scrolls
    top_min: int
    middle_min: int  # progress, A/B bar, tab bar and a plot whose axis labels fit
    results_natural: int  # header and about four rows
    results_min: int  # header and a row
    results_full: int = 0  # header and a row for every run (capped): what it grows to
    middle_comfort: int = 0  # the plots comfortably tall: past this the results grow


def row_heights(total: int, needs: RowNeeds) -> tuple[int, int, int]:
    """(top, middle, results) summing to ``total`` (when it is at least the minimums)."""
    top, results = needs.top_min, needs.results_min
    spare = total - needs.middle_min - top - results
    # The configurations whole first (nothing in them scrolls), then about four result rows.
    grow = max(0, min(spare, needs.top_natural - top))
    top, spare = top + grow, spare - grow
    grow = max(0, min(spare, needs.results_natural - results))
    results = results + grow
    middle = max(0, total - top - results)
    grow = min(middle - needs.middle_comfort, needs.results_full - results)
    if needs.middle_comfort and grow > 0:
        results, middle = results + grow, middle - grow
    return top, middle, results
