"""The app's ranks panel: its headline and its Ways table say memory in the units of the
limit it is held against (GiB, MiB), as the command line's answer does."""

from __future__ import annotations

from dataclasses import replace

from modelmon.core.output import same_speed_words
from modelmon.gui.state.ranks_answer_view import (
    WAYS_COLUMNS,
    ranks_headline,
    ranks_notes,
    ways_rows,
)

from ...core.output.test_ranks_answer import (
    DECIMAL,
    GiB,
    MiB,
    close_ways,
    ranks_found,
    ranks_run,
)


def test_the_ranks_panel_says_memory_as_the_limit_is_given() -> None:
    found = ranks_found(ranks_run(1.5, int(2.52e9), int(2.1e9)))
    headline = ranks_headline(found, None)
    assert "the node peaks at 2.3 GiB" in headline and "within 10 GiB" in headline
    assert not DECIMAL.search(headline), headline
    (row,) = ways_rows(found)
    cells = dict(zip(WAYS_COLUMNS, row.cells, strict=True))
    assert cells["needs"] == "3.3 GiB"
    assert (cells["node peak"], cells["held"]) == ("2.3 GiB", "2.0 GiB")
    small = ways_rows(ranks_found(ranks_run(1.5, 300 * MiB, 200 * MiB), limit=GiB))[0]
    assert small.cells[6:8] == ("300 MiB", "200 MiB")


def test_a_way_at_the_picks_speed_says_so_in_the_table_and_the_why() -> None:
    found, near, far = close_ways()
    assert ranks_notes(found)[0] == same_speed_words(found)  # the Why says it first
    versus = {row.cells[1]: row.cells[5] for row in ways_rows(found)}
    assert versus[near.way.spec] == "1 % slower: the same speed"
    assert versus[far.way.spec] == "10 % slower"
    # A way within noise that ran faster than the pick (the pick holds less) says faster.
    quicker = replace(near, runs=(ranks_run(2.23, int(2.8 * GiB), int(2.5 * GiB)),))
    found = replace(found, ways=(found.pick, quicker, far))
    versus = {row.cells[1]: row.cells[5] for row in ways_rows(found)}
    assert versus[near.way.spec] == "2 % faster: the same speed"
