"""The colours of runs and workers, wherever they are drawn: the live plots, the results
table, and the exported figures (which are drawn without Qt). Qt-free."""

from __future__ import annotations

# A blue and an orange stay apart for the common colour-vision deficiencies and on both
# dark and light backgrounds. A watched program's load ("W") in a purple, apart from both.
RUN_COLOURS = {"A": "#3d8bfd", "B": "#f28e2b", "W": "#9467bd"}
# Workers in the access-pattern plot: a qualitative palette without the A/B hues, so a
# worker is never mistaken for a run.
WORKER_COLOURS = (
    "#59a14f",
    "#e15759",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#8cd17d",
    "#d37295",
    "#86bcb6",
    "#f1ce63",
)


def worker_colour(worker: int) -> str:
    return WORKER_COLOURS[worker % len(WORKER_COLOURS)]
