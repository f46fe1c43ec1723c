"""The workspace's rows: plots first, then a few result rows, then the top up to its size."""

from __future__ import annotations

from modelmon.gui.state.row_heights import RowNeeds, row_heights

NEEDS = RowNeeds(top_natural=230, top_min=90, middle_min=260, results_natural=130, results_min=80)


def test_a_tall_window_gives_the_top_its_natural_height_and_the_rest_to_the_plots():
    top, middle, results = row_heights(900, NEEDS)
    assert (top, results) == (230, 130) and middle == 900 - 230 - 130


def test_at_1000_by_700_nothing_scrolls_and_the_results_keep_four_rows():
    assert row_heights(640, NEEDS) == (230, 280, 130)


def test_a_short_window_shrinks_the_results_then_the_top_scrolls():
    assert row_heights(440, NEEDS) == (90, 260, 90)  # results give up only what the top needs
    top, middle, results = row_heights(400, NEEDS)
    assert (top, results) == (90, 80) and middle == 230
    assert top + middle + results == 400


def test_far_below_the_minimums_top_and_results_keep_theirs():
    assert row_heights(200, NEEDS) == (90, 30, 80)
