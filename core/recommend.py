"""Recommendation: characterise the storage, search strategies and knobs within a time budget
(cold runs, successive halving), pick the best, and explain it in plain sentences."""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from modelmon.core.ceilings import Ceilings, default_parallelism, measure_ceilings
from modelmon.core.errors import LoadError
from modelmon.core.options import LoadOptions, MiB, format_spec
from modelmon.core.records import Model
from modelmon.core.result import LoadResult
from modelmon.core.runner import LoadRun
from modelmon.core.storage import memory_facts

Progress = Callable[[str], None]


@dataclass
class Candidate:
    strategy: str
    options: LoadOptions
    role: str = ""  # "baseline" is always measured; "failure mode" is measured once, set aside
    results: list[LoadResult] = field(default_factory=list)

    @property
    def spec(self) -> str:
        return format_spec(self.strategy, self.options)

    @property
    def median_mbps(self) -> float:
        return statistics.median(r.mbps for r in self.results) if self.results else 0.0


@dataclass(frozen=True)
class Recommendation:
    model: Model
    winner: Candidate
    ranked: tuple[Candidate, ...]  # best first, every candidate measured
    ceilings: Ceilings
    streaming: bool  # the model does not fit in the RAM allowed: discard-mode loads only
    usable_ram: int
    budget_s: float
    elapsed_s: float
    explanation: tuple[str, ...]


def candidates(model: Model, fits: bool, parallel: int) -> list[Candidate]:
    """The search space, most promising first (the budget trims from the end).

    Options are what a loader would apply (cache "keep"); every run is made cold.
    """
    base = LoadOptions(discard=not fits)
    grid = [
        Candidate("sequential", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate("library", base, role="baseline"),
        Candidate("mmap-shared-fd", base.with_(workers=parallel), role="failure mode"),
        Candidate("pread", base.with_(workers=parallel, threads=2)),
        Candidate("mmap", base.with_(workers=parallel)),
        Candidate("sequential", base.with_(workers=1, chunk=16 * MiB)),
        Candidate("direct", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate("sequential", base.with_(workers=parallel, threads=2, chunk=64 * MiB)),
        Candidate("sequential", base.with_(workers=parallel, chunk=4 * MiB,
                                           fadvise="sequential")),
        Candidate("pread", base.with_(workers=1, threads=4)),
        Candidate("sequential", base.with_(workers=2 * parallel, chunk=16 * MiB)),
        Candidate("mmap", base.with_(workers=1, madvise="sequential")),
    ]
    if fits:  # a warm-up pass only makes sense when the whole model stays in the page cache
        grid.insert(7, Candidate("warmup", base.with_(workers=parallel)))
    return grid


def _runs_affordable(budget_left: float, seconds_per_run: float) -> int:
    return max(0, int(budget_left / max(seconds_per_run, 0.05)))


def search(model: Model, pool: list[Candidate], budget_s: float, seconds_per_run: float,
           started: float, progress: Progress, cancel: threading.Event | None) -> None:
    """Successive halving: everyone once, then the better half again until one stands out
    or the budget runs out. The failure mode is measured once, for the explanation."""
    def left() -> float:
        return budget_s - (time.monotonic() - started)

    def run(candidate: Candidate) -> None:
        if cancel is not None and cancel.is_set():
            raise LoadError("recommendation cancelled")
        t0 = time.monotonic()
        options = candidate.options.with_(cache="cold")
        result = LoadRun(model, candidate.strategy, options, cancel=cancel).run()
        nonlocal seconds_per_run
        seconds_per_run = 0.7 * seconds_per_run + 0.3 * (time.monotonic() - t0)
        if result.status == "ok":
            candidate.results.append(result)
            progress(f"{candidate.spec}: {result.mbps:.0f} MB/s"
                     + ("" if result.cache.cold else " (not verified cold)"))
        else:
            progress(f"{candidate.spec}: {result.status}: {result.error}")

    affordable = _runs_affordable(left(), seconds_per_run)
    del pool[max(2, affordable):]  # keep at least the planner's pick and the baseline
    for candidate in pool:
        run(candidate)
    alive = [c for c in pool if c.results and c.role != "failure mode"]
    while len(alive) > 1:
        alive.sort(key=lambda c: c.median_mbps, reverse=True)
        alive = alive[: max(2, math.ceil(len(alive) / 2))] if len(alive) > 2 else alive
        if _runs_affordable(left(), seconds_per_run) < len(alive):
            break
        for candidate in alive:
            run(candidate)
        if len(alive) == 2 and min(len(c.results) for c in alive) >= 5:
            break


def recommend(model: Model, budget_s: float = 120.0, *, memory_limit: int | None = None,
              workers: int | None = None, progress: Progress | None = None,
              cancel: threading.Event | None = None) -> Recommendation:
    say = progress or (lambda _: None)
    started = time.monotonic()
    usable = memory_facts().usable if memory_limit is None else memory_limit
    fits = model.total_bytes <= usable
    parallel = workers or default_parallelism()
    say("measuring the ceilings of this storage (cold sequential and parallel reads, memcpy)")
    t0 = time.monotonic()
    ceilings = measure_ceilings(model, ("sequential_read", "parallel_read", "memcpy"),
                                repeats=1, workers=parallel, cancel=cancel)
    seconds_per_run = (time.monotonic() - t0) / 2
    pool = candidates(model, fits, parallel)
    search(model, pool, budget_s, seconds_per_run, started, say, cancel)
    measured = [c for c in pool if c.results]
    contenders = [c for c in measured if c.role != "failure mode"] or measured
    if not contenders:
        raise LoadError("no candidate load completed: nothing to recommend")
    winner = max(contenders, key=lambda c: (len(c.results) > 1, c.median_mbps))
    ranked = tuple(sorted(measured, key=lambda c: c.median_mbps, reverse=True))
    from modelmon.core.explain import explain

    elapsed = time.monotonic() - started
    text = explain(model, winner, ranked, ceilings, fits, usable)
    return Recommendation(model, winner, ranked, ceilings, not fits, usable, budget_s, elapsed,
                          tuple(text))
