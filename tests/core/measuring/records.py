"""Measurement records as the search produces them, for tests of the decision and the text."""

from __future__ import annotations

from typing import Any

from modelmon.core.configuration import parse_engine
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.advice import LoaderAdvice
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


def engine_run(spec: str, *rates: float) -> Candidate:
    """An engine's measured runs (``spec``: "safetensors backend=read")."""
    return Candidate(parse_engine(spec), "", [run(rate) for rate in rates])


def advice(
    loader: Candidate,
    engine: str,
    changes: tuple[Candidate, ...],
    pick: Candidate | None,
    modelmon: Candidate,
) -> LoaderAdvice:
    """The user's loader's rounds as ``advise`` records them: three rounds, nothing watched."""
    return LoaderAdvice(
        loader=loader,
        engine=engine,
        engine_found="given",
        for_engine=None,
        changes=changes,
        baselines={},
        pick=pick,
        modelmon=modelmon,
        rounds=3,
        watch=None,
    )


def tie_without_pairs(other: Candidate) -> Any:
    """How a bucket's search that fitted no pair of its top two, each run once, settles them
    within noise: against a bucket's usual noise."""
    from modelmon.core.measuring.judging import Duel
    from modelmon.core.measuring.noise import BUCKET_NOISE

    return Duel(other=other, verdict=None, tie=True, noise=BUCKET_NOISE)
