"""A ranks recommendation as the window shows it: the answer (the way that holds and is
fastest, or that none fits and what would), the line to paste, and each way measured with
what it needs of the node, its slowest rank and the node's memory. Qt-free.

The words are the command line's (``core.output.ranks_answer``): one answer, told once;
memory in binary units (``ram_text``), as the limit it is held against is given.
"""

from __future__ import annotations

from modelmon.core import RanksRecommendation
from modelmon.core.measuring import WayMeasured
from modelmon.core.output import (
    paste_lines,
    ram_text,
    render_ranks_answer,
    same_speed,
    same_speed_words,
)
from modelmon.gui.state.recommendation_view import RankingRow, where_words

WAYS_COLUMNS = (
    "#",
    "way",
    "needs",
    "runs",
    "slowest rank",
    "vs the pick",
    "node peak",
    "held",
    "how it ended",
)
# What a short header means, on its tooltip: the headers stay narrow, so that the ways' own
# words have the room of a 1000 px window.
WAYS_HEADER_TIPS = {
    "needs": "What its weights and processes were planned to need at once, before it ran.",
    "slowest rank": "When the last rank had its weights: the median of its runs.",
    "node peak": "The node's memory at its peak, page cache and shared memory included.",
    "held": "Its anonymous and shared memory at their peak: what a limit cannot reclaim.",
}
WAYS_TIP = (
    "Every way the ranks can get their weights, fastest first: 'planned' is what its weights "
    "and processes are planned to need (a way whose weights alone outgrow the limit is not "
    "run); 'slowest rank' is when the last rank had its weights, the median of its runs; "
    "'node peak' counts the page cache too, 'held' only what a limit cannot reclaim."
)
PASTE_EVIDENCE = {
    "modelmon": "measured here",
    "python": "the same reads in each rank's process; not measured here as a call",
    "engines": "not measured here: what such engines do for one reader",
}


def _ended(way: WayMeasured) -> str:
    if way.refused is not None:
        return f"does not fit: {way.refused}"
    if way.failure is not None:
        return f"did not hold: {way.failure}"
    if way.seconds is None:
        return "not measured (the budget ran out)"
    return "held"


def _versus(way: WayMeasured, pick: WayMeasured | None) -> str:
    if pick is None or way.seconds is None or pick.seconds is None or pick.seconds <= 0:
        return "–"
    if way is pick:
        return "the pick"
    # Time against the pick's: above it slower, below it faster (a way within noise may be).
    share = way.seconds / pick.seconds - 1
    words = f"{abs(share) * 100:.0f} % {'faster' if share < 0 else 'slower'}"
    return f"{words}: the same speed" if same_speed(way, pick) else words


def ways_rows(found: RanksRecommendation) -> list[RankingRow]:
    """The pick first (within noise of the fastest, it may not be the fastest itself), then
    each way measured, fastest first, then those that did not hold or fit."""

    def order(way: WayMeasured) -> tuple[int, float]:
        if way is found.pick:
            return (0, 0.0)
        return (1, way.seconds) if way.fits and way.seconds is not None else (2, 0.0)

    rows = []
    for number, way in enumerate(sorted(found.ways, key=order), 1):
        rows.append(
            RankingRow(
                (
                    str(number),
                    way.way.spec,
                    ram_text(way.needs_bytes),
                    str(len(way.ok_runs)) if way.runs else "0",
                    f"{way.seconds:.2f} s" if way.seconds is not None else "–",
                    _versus(way, found.pick),
                    ram_text(way.peak_bytes) if way.peak_bytes else "–",
                    ram_text(way.held_bytes) if way.held_bytes else "–",
                    _ended(way),
                ),
                picked=way is found.pick,
                in_config=way is found.pick,
            )
        )
    return rows


def ranks_headline(
    found: RanksRecommendation, exported_to: str | None, kept_to: str | None = None
) -> str:
    """The answer's first line (what to do, or that nothing fits and what would), then the
    search's time and where its config file is."""
    first = render_ranks_answer(found, exported_to).split("\n", 1)[0]
    if found.pick is None:
        second = render_ranks_answer(found, exported_to).split("\n")[1]
        return f"{first}\n{second}"
    where = where_words(exported_to, kept_to)
    took = f"The search took {found.seconds:.0f} s; the budget was {found.budget_s:.0f} s."
    return f"{first}\n{took} {where}"


def ranks_paste(found: RanksRecommendation, config_path: str | None) -> tuple[str, str]:
    """(the line to paste, what measured it): modelmon's own, as the config file names it."""
    line = paste_lines(found, config_path).get("modelmon", "")
    if not line or found.pick is None:
        return "", ""
    runs = len(found.pick.ok_runs)
    return line, f"modelmon: measured here, {runs} run{'s' * (runs != 1)} of {found.ranks} ranks"


def ranks_snippet_rows(
    found: RanksRecommendation, config_path: str | None
) -> list[tuple[str, str, str]]:
    """(tool, how to apply it, measured here) for each way of applying the pick."""
    return [
        (tool, line, PASTE_EVIDENCE.get(tool, ""))
        for tool, line in paste_lines(found, config_path).items()
    ]


def ranks_notes(found: RanksRecommendation) -> tuple[str, ...]:
    """Which ways ran at the pick's speed (the one that holds less is picked among such),
    then what the search did not measure, and why (a peer not installed, a mode left out)."""
    close = same_speed_words(found)
    return ((close,) if close else ()) + tuple(found.notes)
