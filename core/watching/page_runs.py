"""Pages that arrived in the page cache, as byte runs: what one scan of a model file found
(``Arrivals``), and the runs of a page mask, joined where they touch."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Arrivals:
    """Pages of one file that arrived in one scan interval, as byte runs."""

    file: int
    start_ns: int  # when the previous scan of the file began reading its pages
    end_ns: int  # when this scan had read them: every page it found came in between
    offsets: np.ndarray  # int64
    lengths: np.ndarray  # int64
    unplaced_bytes: int = 0  # arrived and reclaimed between the two scans: no known offset
    # Of ``lengths``, the bytes of pages seen for the first time (not back after an eviction)
    first_bytes: int = 0

    @property
    def bytes(self) -> int:
        return int(self.lengths.sum()) + self.unplaced_bytes


def page_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first page, page count) of each run of True in ``mask``."""
    padded = np.concatenate(([False], mask.astype(bool), [False]))
    edges = np.flatnonzero(padded[1:] != padded[:-1])
    starts, ends = edges[::2], edges[1::2]
    return starts.astype(np.int64), (ends - starts).astype(np.int64)


def merge_runs(offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Byte runs in offset order with the ones that touch joined (a run crossing a bin
    boundary was found as two)."""
    if len(offsets) < 2:
        return offsets, lengths
    order = np.argsort(offsets, kind="stable")
    offsets, lengths = offsets[order], lengths[order]
    starts_new = np.concatenate(([True], offsets[1:] != offsets[:-1] + lengths[:-1]))
    first = np.flatnonzero(starts_new)
    ends = np.concatenate((first[1:], [len(offsets)])) - 1
    return offsets[first], offsets[ends] + lengths[ends] - offsets[first]
