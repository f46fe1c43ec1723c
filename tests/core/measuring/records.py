"""Measurement records as the search produces them, for tests of the decision and the text."""

from __future__ import annotations

from typing import Any

from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.options import LoadOptions
from modelmon.core.system.cache import CacheState

COLD = CacheState("cold", 0.0, 1.0, True, False, "cachestat")


def run(mbps: float, size: int = 10**9) -> LoadResult:
    """A completed cold load of ``size`` bytes at ``mbps``."""
    seconds = size / mbps / 1e6
    return LoadResult("ok", "sequential", {}, "m", "safetensors", ("m",), size, seconds, COLD)


def candidate(strategy: str, *rates: float, role: str = "", **options: Any) -> Candidate:
    """A measured candidate with one reader thread per worker unless ``threads`` says
    otherwise, as recommend's own grid pins them (the default is four reader threads)."""
    options_ = LoadOptions(threads=1).with_(**options)
    return Candidate.of(strategy, options_, role=role, results=[run(r) for r in rates])
