"""Residency rounds over a sampled run: the maps of the model's files in the page cache, when
they are due, what they cost, and how many are kept.

A round ends with the maps of the files whose resident count changed since the last (the
fraction itself is measured by the residency source in the sampler's row). Rounds keep to
their share of a core: on a warm multi-GB model one costs milliseconds, and the next is due
later. Past a memory cap every other map is dropped, so the run stays covered end to end at
half the time resolution.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from modelmon.core.metrics.residency import ResidencySource

# Residency rounds (the resident fraction, then the maps of the files that changed) may take
# this share of one core's time; rounds are spaced out further when one costs more.
ROUND_CPU_SHARE = 0.005
ROUND_INTERVAL_S = 0.5  # between residency rounds when no maps are taken (map_interval_s ≤ 0)
MAP_MEMORY_BYTES = 64 << 20  # maps kept before the oldest are thinned out (every other dropped)
NEVER_NS = 2**63 - 1


class ResidencyRounds:
    """The rounds of ``residency`` over ``files`` files: maps of ``bins`` bins every
    ``interval_s`` (0 or less: no maps, the fraction still measured). Without a residency
    source, ``maps_of`` (a run that tracks its pages itself: a watch) gives the maps; with
    neither there are no rounds. ``lock`` (the sampler's) guards ``maps`` and ``seconds``,
    which other threads read."""

    def __init__(
        self,
        residency: ResidencySource | None,
        files: int,
        interval_s: float,
        bins: int,
        lock: threading.Lock,
        maps_of: Callable[[int], dict[str, np.ndarray]] | None = None,
    ) -> None:
        self.residency = residency
        self.maps_of = residency.maps if residency is not None else maps_of
        self.files = files
        self.interval_s = interval_s
        self.bins = bins
        self.maps: list[tuple[int, dict[str, np.ndarray]]] = []
        self.seconds = 0.0  # CPU time spent taking maps
        self.last_ns: int | None = None  # when the latest round ended
        self._lock = lock

    def collect(self, now_ns: int, due_ns: int, counted: bool = True) -> int:
        """End a residency round: the maps of the files whose count changed (``counted``: the
        fraction was just measured by this round's sample; else it is measured here).
        Return when the next round is due."""
        residency, maps_of = self.residency, self.maps_of
        if maps_of is None:
            return NEVER_NS
        self.last_ns = now_ns
        cost = 0
        if self.interval_s > 0:
            started = time.thread_time_ns()
            try:
                if not counted and residency is not None:
                    residency.count()
                maps = maps_of(self.bins)
            except Exception:  # a file gone mid-run: maps are a bonus, the series carry on
                maps = None
            cost = time.thread_time_ns() - started
            with self._lock:
                self.seconds += cost / 1e9
                if maps is not None:
                    self.maps.append((now_ns, maps))
                    self._thin()
        interval_s = self.interval_s if self.interval_s > 0 else ROUND_INTERVAL_S
        interval_ns = round(interval_s * 1e9)
        due = due_ns + interval_ns
        if due <= now_ns:  # behind: skip the missed rounds rather than take them back to back
            due = now_ns + interval_ns
        # A warm multi-GB model makes a round cost milliseconds (the page-cache walk): then
        # rounds are spaced out so that they stay within their share of a core.
        cost += residency.count_cpu_ns if counted and residency is not None else 0
        return max(due, now_ns + int(cost / ROUND_CPU_SHARE))

    def _thin(self) -> None:
        """Drop every other map (keeping the first) once they use more than the memory cap.

        The run stays covered end to end, at half the time resolution each time it happens.
        """
        per_map = max(1, self.files * self.bins * 4)
        if len(self.maps) * per_map > MAP_MEMORY_BYTES and len(self.maps) > 2:
            self.maps = self.maps[::2]
            self.interval_s *= 2
