"""The page-cache picture (Qt-free): columns follow the map times, cells stay bounded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modelmon.gui.state.residency_grid import (
    MAX_COLUMNS,
    MAX_ROWS,
    NOT_LOOKED,
    columns_of,
    ended_columns,
    looks_text,
    picture,
    resident_share,
    shrink_rows,
)


def test_residency_columns_follow_map_times_and_rows_shrink():
    times = np.linspace(0.0, 10.0, 21)  # a look every 0.5 s
    picks, width = columns_of(times)
    assert math.isclose(width, 10.5 / 48, rel_tol=1e-6)  # at least MIN_COLUMNS across
    middles = (np.arange(len(picks)) + 0.5) * width
    # Regular looks tile the picture: each column shows the one nearest its middle.
    assert (picks != NOT_LOOKED).all()
    inside = middles <= times[-1]
    assert (np.abs(times[picks] - middles)[inside] <= 0.25 + 1e-9).all()
    many, wide = columns_of(np.linspace(0, 100, 2001), max_columns=300)
    assert len(many) == 300 and wide > 0.05
    grid = np.array([[0.0, 1.0, np.nan, np.nan], [1.0, 1.0, 0.5, np.nan]], dtype=np.float32)
    shrunk = shrink_rows(grid, 2)
    assert shrunk.shape == (2, 2)
    assert shrunk[0, 0] == 0.5 and np.isnan(shrunk[0, 1]) and shrunk[1, 1] == 0.5


def test_a_long_run_of_many_maps_stays_a_bounded_picture():
    files = [("/m/a", 0.0, 100.0), ("/m/b", 100.0, 300.0), ("/m/c", 400.0, 50.0)]
    # An hour of maps every 1.2 s; file c is never mapped; b fills up over the run.
    cached = np.ones(1024)
    maps = tuple(
        (t, {"/m/a": cached, "/m/b": np.full(1024, t / 3600.0)})
        for t in np.arange(0.0, 3600.0, 1.2)
    )
    shown = picture(maps, files)
    assert [g.path for g in shown.grids] == ["/m/a", "/m/b"]
    for grid in shown.grids:
        assert grid.cells.shape == (MAX_COLUMNS, MAX_ROWS // len(files))
        assert grid.cells.dtype == np.float32
    assert shown.start_s == 0.0 and shown.end_s == pytest.approx(3600.0, rel=1e-3)
    assert shown.grids[1].base_mb == 100.0 and shown.grids[1].size_mb == 300.0
    # The last map: a all cached, b almost all, c unmeasured (left out, not counted as 0).
    share = resident_share(maps[-1][1], files)
    assert share == pytest.approx((100 + 300 * maps[-1][0] / 3600) / 400)
    assert math.isnan(resident_share({}, files))


def test_a_finished_loads_picture_ends_where_the_load_ended():
    files = [("/m/a", 0.0, 100.0)]
    # Maps every 0.1 s of a 0.45 s load, and the sampler's last look 0.2 s after its end.
    maps = tuple(
        (t, {"/m/a": np.full(64, min(1.0, t / 0.45))}) for t in (0.0, 0.1, 0.2, 0.3, 0.4, 0.65)
    )
    assert picture(maps, files).end_s > 0.65  # while it runs: as far as the maps go
    ended = picture(maps, files, 0.45)
    assert ended.start_s == 0.0 and ended.end_s == pytest.approx(0.45)
    # The last column is what the load left: the last look's map, all cached.
    assert np.all(ended.grids[0].cells[-1] == 1.0) and np.all(ended.grids[0].cells[0] == 0.0)
    # Every map taken as it ended: one column, at its end.
    late = picture(((0.5, {"/m/a": np.ones(64)}),), files, 0.3)
    assert late.end_s == pytest.approx(0.3) and 0.0 <= late.start_s < 0.3


def test_a_short_loads_few_looks_stand_for_their_moments_only():
    """The seventh walk's 1.84 s load: looks at the page cache at 0 (before the load),
    0.58 and 1.53 s, the last after it ended. Each look stands for the time around it (an
    eighth of the picture); between them the picture says "not looked at", not "not cached"
    as the look before said, which the device plot beside it contradicted; the last column
    shows the state the load left."""
    times = np.array([0.0, 0.58, 1.53, 1.9])
    picks, width, start = ended_columns(times, 1.84)
    middles = start + (np.arange(len(picks)) + 0.5) * width
    reach = 1.84 / 8
    seen = np.minimum(times, 1.84)  # the look after the end, at the end
    for middle, pick in zip(middles[:-1], picks[:-1], strict=True):
        near = np.abs(seen - middle)
        if near.min() <= reach:
            assert pick == int(near.argmin()), (middle, pick)
        else:
            assert pick == NOT_LOOKED, (middle, pick)
    assert picks[-1] == 3
    assert picks[int(0.45 // width)] == 1  # 0.13 s from the 0.58 look
    assert picks[int(1.0 // width)] == NOT_LOOKED  # 0.42 s from any
    maps = tuple((t, {"/m/a": np.full(4, t / 2)}) for t in times)
    shown = picture(maps, [("/m/a", 0.0, 10.0)], 1.84)
    (grid,) = shown.grids
    assert np.isnan(grid.cells[int(1.0 // width)]).all()  # drawn as not looked at
    assert looks_text(maps) == (
        "4 looks, one every 0.58 s (a look slows the load): hatched where none was near"
    )
