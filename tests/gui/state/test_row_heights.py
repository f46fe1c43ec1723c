"""The workspace's rows: plots first, then the configurations whole, then a few result rows;
in a tall window the results grow to every run once the plots are comfortably tall."""

from __future__ import annotations

from dataclasses import replace

from modelmon.gui.state.row_heights import RowNeeds, row_heights

NEEDS = RowNeeds(top_natural=230, top_min=90, middle_min=260, results_natural=130, results_min=50)


def test_a_tall_window_gives_the_top_its_natural_height_and_the_rest_to_the_plots():
    top, middle, results = row_heights(900, NEEDS)
    assert (top, results) == (230, 130) and middle == 900 - 230 - 130


def test_at_1000_by_700_nothing_scrolls_and_the_results_keep_what_is_left():
    assert row_heights(600, NEEDS) == (230, 260, 110)


def test_a_short_window_keeps_the_minimums_and_the_top_scrolls():
    assert row_heights(440, NEEDS) == (130, 260, 50)  # the top gets what is left over
    assert row_heights(400, NEEDS) == (90, 260, 50)


def test_far_below_the_minimums_top_and_results_keep_theirs():
    assert row_heights(200, NEEDS) == (90, 60, 50)


def test_once_the_plots_are_comfortable_the_results_grow_to_every_run():
    needs = replace(NEEDS, results_full=300, middle_comfort=400)
    top, middle, results = row_heights(900, needs)
    assert (top, middle, results) == (230, 400, 270)  # 270 of 300: the plots keep 400
    top, middle, results = row_heights(1200, needs)
    assert (top, results) == (230, 300) and middle == 670  # every run; the rest to plots
