"""The page-cache picture of a run, from the sampler's residency maps. Qt-free.

Time runs along x and the model's offset along y (files stacked, as in the access pattern).
Each file becomes one grid of at most MAX_COLUMNS × its share of MAX_ROWS cells, whatever
the run's length and shard count: the plot only paints the grids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MAX_COLUMNS = 300
MAX_ROWS = 1024  # over all files; each file gets at least MIN_ROWS
MIN_ROWS = 8

Maps = tuple[tuple[float, dict[str, np.ndarray]], ...]  # (seconds, {path: resident per bin})


Files = list[tuple[str, float, float]]  # (path, base MB in the stacked model, size MB) in order


@dataclass(frozen=True, slots=True)
class FileGrid:
    path: str
    cells: np.ndarray  # float32, columns × rows: resident fraction, NaN where not measured
    base_mb: float
    size_mb: float


@dataclass(frozen=True, slots=True)
class ResidencyPicture:
    start_s: float  # seconds since load start at the left edge
    width_s: float  # of all the columns together
    grids: tuple[FileGrid, ...]  # the files the maps cover

    @property
    def end_s(self) -> float:
        return self.start_s + self.width_s


# A look at the page cache stands for the time around it, up to ``MAX_REACH`` of the
# picture's span. The sampler spaces looks out when they cost too much (a look slows the
# load it looks at), so a short load may get two or three: between them the picture says
# "not looked at", not the state of the last look; a long one's looks tile it.
MAX_REACH = 1 / 8
MIN_COLUMNS = 48  # across a picture: fine enough that a short load's looks stand apart
NOT_LOOKED = -1  # a column no look stands for


def _short_step(times: np.ndarray, default: float) -> float:
    """The shorter intervals between looks (a low percentile, so that the last look, taken
    just after the load ended, does not decide); ``default`` where there are none."""
    steps = np.diff(times)
    steps = steps[steps > 0]
    return float(np.percentile(steps, 25)) if len(steps) else default


def _columns(
    times: np.ndarray, first_s: float, span: float, max_columns: int
) -> tuple[np.ndarray, float]:
    """Map index per column of a picture from ``first_s`` over ``span`` (> 0) seconds
    (NOT_LOOKED where no look is near enough), and the column width."""
    width = min(_short_step(times, span), span / MIN_COLUMNS)
    count = max(1, min(max_columns, math.ceil(span / width - 1e-6)))
    width = span / count
    middles = first_s + (np.arange(count) + 0.5) * width
    after = np.clip(np.searchsorted(times, middles), 1, max(len(times) - 1, 1))
    before = after - 1
    if len(times) > 1:
        closer = np.abs(times[after] - middles) < np.abs(middles - times[before])
        picks = np.where(closer, after, before)
    else:
        picks = np.zeros(count, dtype=np.int64)
    reach = max(MAX_REACH * span, width / 2)
    return np.where(np.abs(times[picks] - middles) <= reach, picks, NOT_LOOKED), width


def columns_of(times: np.ndarray, max_columns: int = MAX_COLUMNS) -> tuple[np.ndarray, float]:
    """Map index per image column (NOT_LOOKED where none), and the column width (s), of a
    run's maps so far: each column shows the look nearest its middle where one is near
    enough (``MAX_REACH``); past ``max_columns``, columns get wider."""
    if len(times) == 1:
        return np.zeros(1, dtype=np.int64), 0.1
    width = _short_step(times, 0.1)
    return _columns(times, float(times[0]), float(times[-1] - times[0]) + width, max_columns)


def ended_columns(
    times: np.ndarray, end_s: float, max_columns: int = MAX_COLUMNS
) -> tuple[np.ndarray, float, float]:
    """The columns of a finished load's picture, which ends where the load ended (``end_s``,
    seconds since it started): cut as ``columns_of`` cuts them, up to there; the maps taken
    after it (the sampler's last look, once the load is over) are what the last column
    shows, the state the load left. Map index per column, the column width and the first
    column's start (s)."""
    clipped = np.minimum(times, end_s)
    span = end_s - float(clipped[0])
    if span <= 0:  # every map came as it ended: the newest, over the load's last moment
        width = _short_step(clipped, 0.1)
        width = min(width, end_s) if end_s > 0 else width
        return np.array([len(times) - 1], dtype=np.int64), width, end_s - width
    picks, width = _columns(clipped, float(clipped[0]), span, max_columns)
    picks[-1] = len(times) - 1
    return picks, width, float(clipped[0])


def looks_text(maps: Maps) -> str:
    """How often the picture's maps were taken, and what a column shows: "3 looks, one
    every 0.52 s (a look slows the load): hatched where none was near"."""
    times = np.array([t for t, _ in maps], dtype=np.float64)
    if len(times) < 2:
        return f"{len(times)} look" if len(times) else ""
    every = float(np.median(np.diff(times)))
    return (
        f"{len(times)} looks, one every {every:.2f} s (a look slows the load): hatched where "
        "none was near"
    )


def shrink_rows(grid: np.ndarray, rows: int) -> np.ndarray:
    """Average groups of neighbouring bins down to ``rows`` (NaN where a whole group is)."""
    bins = grid.shape[1]
    if bins <= rows:
        return grid
    edges = np.linspace(0, bins, rows + 1).astype(np.int64)[:-1]
    valid = np.isfinite(grid)
    sums = np.add.reduceat(np.where(valid, grid, 0.0), edges, axis=1)
    counts = np.add.reduceat(valid, edges, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def picture(maps: Maps, files: Files, end_s: float = math.nan) -> ResidencyPicture:
    """One grid per file that the (non-empty) maps cover; of a finished load (``end_s``: its
    seconds), ending where the load ended."""
    times = np.array([t for t, _ in maps], dtype=np.float64)
    if math.isfinite(end_s):
        picks, width, start = ended_columns(times, end_s)
    else:
        (picks, width), start = columns_of(times), float(times[0])
    rows = max(MIN_ROWS, MAX_ROWS // max(1, len(files)))
    grids = []
    for path, base, size in files:
        columns = [maps[i][1].get(path) if i != NOT_LOOKED else None for i in picks]
        bins = next((len(c) for c in columns if c is not None), 0)
        if not bins:
            continue
        empty = np.full(bins, np.nan, dtype=np.float32)
        cells = np.stack(
            [c if c is not None and len(c) == bins else empty for c in columns]
        ).astype(np.float32)
        grids.append(
            FileGrid(path, shrink_rows(cells, rows).astype(np.float32, copy=False), base, size)
        )
    return ResidencyPicture(start, width * len(picks), tuple(grids))


def resident_share(files_map: dict[str, np.ndarray], files: Files) -> float:
    """The share of the model's bytes a map says are cached (files weighted by size)."""
    cached = total = 0.0
    for path, _, size in files:
        fractions = files_map.get(path)
        if fractions is None or not np.isfinite(fractions).any():
            continue
        cached += float(np.nanmean(fractions)) * size
        total += size
    return cached / total if total else math.nan
