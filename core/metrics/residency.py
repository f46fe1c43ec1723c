"""How much of the model is in the page cache, as a series and as maps over each file.

Measuring walks the page cache: cachestat (Linux ≥ 6.5) costs about 0.8 ms per cached GB
(a few µs for a cold file), mincore milliseconds per GB cached or not. So the fraction is
measured on the sampler's residency rounds (every map interval, spaced out further when a
round costs more than its share of a core), not on every sample: the samples between are
gaps. A round measures the fraction first, then maps only the files whose count changed.
"""

from __future__ import annotations

import math
import time

import numpy as np

from modelmon.core.metrics.base import (
    FAILURES_TO_REPORT,
    FailureLog,
    MetricSpec,
    MonitorTarget,
    Source,
    describe_error,
)
from modelmon.core.system import cache, residency


class ResidencySource(Source):
    name = "residency"
    description = "Fraction of the model files in the page cache, and where in each file."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self._paths = tuple(dict.fromkeys(target.paths))
        self._cached_pages: dict[str, int] = {}  # per file, at the latest measurement
        self._maps: dict[str, tuple[int, np.ndarray]] = {}  # file -> (cached pages, its map)
        self.due = True  # the next sample() measures; the sampler sets it on each round
        self.count_cpu_ns = 0  # CPU time of the latest count()
        # Of the measurements only: the samples between rounds give gaps without trying.
        self._log = FailureLog("page-cache residency")

    def specs(self) -> list[MetricSpec]:
        return [
            MetricSpec(
                "resident_fraction",
                "fraction",
                "Share of the model files' pages in the page cache (cachestat, or "
                "mincore where the kernel lacks it).",
            )
        ]

    def unavailable(self) -> str | None:
        if not self._paths:
            return "no model files to watch"
        for path in self._paths:
            try:
                reason = cache.hidden_reason(path)
            except OSError as error:
                return f"cannot measure {path}: {describe_error(error)}"
            if reason:
                return reason
        return None

    def sample(self, now_ns: int) -> dict[str, float]:
        """The fraction when ``due`` (a residency round), else a gap: not measured."""
        if not self.due:
            return {"resident_fraction": math.nan}
        self.due = False
        return {"resident_fraction": self.count()}

    def count(self) -> float:
        """Measure each file's cached pages now (what ``maps`` compares against); the
        resident fraction of the model."""
        started = time.thread_time_ns()
        try:
            cached = total = 0
            for path in self._paths:
                found = residency.residency(path)
                self._cached_pages[path] = found.cached_pages
                cached += found.cached_pages
                total += found.total_pages
        except Exception as error:  # a file gone or unreadable: the sampler makes it a gap
            self._log.failed(error)
            raise
        finally:
            self.count_cpu_ns = time.thread_time_ns() - started
        self._log.ok()
        return cached / total if total else 0.0

    def failing(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        return self._log.reason(at_least)

    def maps(self, bins: int) -> dict[str, np.ndarray]:
        """Resident fraction per bin of each file (float32, read-only, ``bins`` long), right
        after a ``count()``.

        A file whose cached page count has not changed since its last map keeps that map:
        in a sharded model most shards sit still while a few are being loaded, and one map
        costs ``bins`` cachestat calls. A file that cannot be mapped gets NaNs.
        """
        maps: dict[str, np.ndarray] = {}
        for path in self._paths:
            pages = self._cached_pages.get(path, -1)
            previous = self._maps.get(path)
            if (
                previous is not None
                and pages >= 0
                and previous[0] == pages
                and len(previous[1]) == bins
            ):
                maps[path] = previous[1]
                continue
            try:
                fractions = residency.residency_map(path, bins)
            except OSError:
                fractions = np.full(bins, np.nan, dtype=np.float32)
            fractions.flags.writeable = False  # shared by every map until the file changes
            self._maps[path] = (pages, fractions)
            maps[path] = fractions
        return maps
