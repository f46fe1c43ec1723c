"""The terminal's words for memory: a load's own peak beside all of modelmon's processes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from modelmon.core import open_model
from modelmon.core.loading.result import LoadResult, WorkerTiming
from modelmon.core.measuring.recommend import BudgetUse, Recommendation
from modelmon.core.output.text import memory_text, search_memory_text, search_time_text
from modelmon.core.system import host_memory

from ..measuring.records import candidate, run

MB = 1_000_000


def with_peaks(result: LoadResult, workers: tuple[int, ...], parent: int | None) -> LoadResult:
    timings = tuple(WorkerTiming(w, 100 + w, 0, 1.0, 1, peak) for w, peak in enumerate(workers))
    return dataclasses.replace(result, workers=timings, parent_peak_rss=parent)


MiB = 1 << 20


def test_a_loads_memory_line_sums_its_workers_and_adds_the_parent() -> None:
    # Memory in the units of RAM and of a limit (binary), as every figure of memory is said.
    result = with_peaks(run(1000.0), (40 * MiB, 60 * MiB), 1948 * MiB)
    assert result.workers_peak_rss == 100 * MiB and result.process_tree_peak_rss == 2 << 30
    assert memory_text(result) == (
        "peak RSS 2.0 GiB in all of modelmon's processes: 1.9 GiB in this one, "
        "100 MiB in the load's workers (each process's own peak, summed: a page several "
        "of them map, a library or the model's, counts in each)"
    )
    primed = dataclasses.replace(
        result, cache=dataclasses.replace(result.cache, primed=host_memory.Primed(800 * MB))
    )
    assert memory_text(primed) == memory_text(result)  # priming is the cache line's, not in it
    unmeasured = with_peaks(run(1000.0), (40 * MB,), None)
    assert unmeasured.process_tree_peak_rss is None and memory_text(unmeasured) == ""


def test_a_search_says_the_picks_peak_and_the_largest_of_the_tree(sharded_model: Path) -> None:
    best = candidate("sequential", 1000.0, 1010.0, workers=4)
    best.results = [with_peaks(r, (50 * MiB,), 300 * MiB) for r in best.results]
    other = candidate("pread", 700.0, workers=4)
    other.results = [with_peaks(r, (400 * MiB,), 2_000 * MiB) for r in other.results]
    rec = Recommendation(
        model=open_model(sharded_model),
        winner=best,
        ranked=(best, other),
        ceilings=None,  # type: ignore[arg-type]
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
    )
    assert search_memory_text(rec) == (
        "peak RSS 50 MiB in the recommended load's own processes, 2.3 GiB at most in all "
        "of modelmon's processes over the search"
    )


def test_a_read_that_got_nothing_says_so_not_zero_rates() -> None:
    import math

    from modelmon.core.output.text import requests_text
    from modelmon.core.storage.records import ConnectionStats, ReadStats

    silent = ConnectionStats(0, 8, 0, 30.0, 0.0)
    stats = ReadStats(8, 0, 30.0, math.nan, math.nan, 7, 0, 0, (silent,))
    line = requests_text(stats)
    assert "no first byte arrived" in line and "? ms" not in line
    assert "per connection" not in line  # no rate of a connection that carried nothing


def test_a_search_says_how_long_it_took_against_its_budget(sharded_model: Path) -> None:
    """recommend SHARD --engine safetensors --budget 60 took 131 s with stderr redirected:
    no progress said so, and the answer's output did not either."""
    best = candidate("sequential", 1000.0, workers=4)
    rec = Recommendation(
        model=open_model(sharded_model),
        winner=best,
        ranked=(best,),
        ceilings=None,  # type: ignore[arg-type]
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=131.16),
    )
    assert search_time_text(rec) == "the search took 131 s; the budget was 60 s (71 s past it)"
    kept = dataclasses.replace(rec, budget=BudgetUse(given_s=60.0, elapsed_s=59.6))
    assert search_time_text(kept) == "the search took 60 s; the budget was 60 s"


def test_a_tree_peak_above_the_limit_says_what_it_counts(sharded_model: Path) -> None:
    """Walk 20: under a 4 GiB limit the CLI said "4.1 GiB at most in all of modelmon's
    processes over the search" beside "it took at most 4.0 GiB" and no word why: summed RSS
    counts a mapped page of the model in each process that maps it, page cache the limit
    reclaims. The line says so, and gives the cgroup's own peak."""
    from modelmon.core.system.memory_limit import MemoryLimit

    GiB = 1 << 30
    held = MemoryLimit(
        limit_bytes=4 * GiB,
        peak_bytes=4 * GiB - 10 * MiB,
        anon_peak_bytes=2 * GiB,
        cache_peak_bytes=2 * GiB,
        mapped_peak_bytes=2 * GiB,
        anon_at_peak_bytes=2 * GiB,
        cache_at_peak_bytes=2 * GiB,
        reread_bytes=0,
        oom_killed=False,
        oom_kills=0,
        limit_hits=None,
        pressure_stall_s=None,
        cgroup="/sys/fs/cgroup/memory/modelmon-test",
        version=1,
    )
    shared = candidate("mmap-shared-fd", 1400.0, workers=4)
    shared.results = [
        dataclasses.replace(with_peaks(r, (1 * GiB,) * 4, 100 * MiB), memory_limit=held)
        for r in shared.results
    ]
    rec = Recommendation(
        model=open_model(sharded_model),
        winner=shared,
        ranked=(shared,),
        ceilings=None,  # type: ignore[arg-type]
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
    )
    said = search_memory_text(rec)
    assert said.startswith("peak RSS 4.0 GiB in the recommended load's own processes, 4.1 GiB")
    assert "counts in each" in said and "which the limit reclaims" in said
    assert said.endswith("the memory cgroup, which the limit holds, peaked at 4.0 GiB)"), said
    # Within the limit, the line is as it was.
    shared.results = [dataclasses.replace(r, workers=r.workers[:1]) for r in shared.results]
    assert "(" not in search_memory_text(rec)
