"""Which finished runs each plot shows, read from the state. Qt-free.

An exported plot's heading names these runs and its figure draws these runs, whichever tab
is on screen: both come from here, never from what a widget last drew (a plot on a tab not
viewed since a run draws that run only when it is shown).

``shown`` is the last run of each label since the plots were last cleared (a new model, an
A/B, a watch), oldest first: what the workbench keeps in ``shown_runs``. The plots that
overlay runs (throughput, the metrics) show each of them; those that picture one run (the
access pattern, the page cache) show the last that left something to draw. The Blocks plot
shows each as well: a load's blocks as it read them, a watch's as they arrived.
"""

from __future__ import annotations

from collections.abc import Sequence

from modelmon.gui.state.metric_views import METRIC_VIEWS
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.run_trace import has_trace

EACH = "each"  # the last run of each label
LAST = "last"  # the last run that left something to draw

SHOWS: dict[str, str] = {
    "Throughput": EACH,
    "Access pattern": LAST,
    **dict.fromkeys(METRIC_VIEWS, EACH),
    "Page cache": LAST,
    "Blocks": EACH,
}


def plot_runs(name: str, shown: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs the plot ``name`` (as the Export menu names it) shows, oldest first."""
    how = SHOWS.get(name)
    if how is None:
        raise KeyError(f"no plot named {name!r}")
    if how == EACH:
        return list(shown)
    traced = [record for record in shown if has_trace(record)]
    return traced[-1:]


__all__ = ["SHOWS", "plot_runs"]
