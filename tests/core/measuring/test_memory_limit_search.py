"""A search under a memory limit: every candidate runs in a memory cgroup of that size, and one
OOM-killed or thrashing (re-reading its model after reclaim) there is out."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.race import Race, thrashing
from modelmon.core.measuring.recommend import recommend
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.explain import explain
from modelmon.core.system.cache import CacheState
from modelmon.core.system.memory_limit import MemoryLimit

from ..loading.sparse import sparse_model
from ..system.test_memory_cgroup import REAL

MiB = 1 << 20
GB = 10**9


def a_result(reread: int, status: str = "ok") -> LoadResult:
    limited = MemoryLimit(
        8 << 30, 6 << 30, 1 << 30, 5 << 30, 0, 1 << 30, 5 << 30, reread, False, 0, 0, None, "/x", 1
    )
    cache = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
    return LoadResult(
        status, "mmap", {}, "m", "safetensors", (), GB, 1.0, cache, memory_limit=limited
    )


def test_a_run_that_re_reads_a_tenth_of_its_model_thrashes_and_is_out() -> None:
    out = thrashing(a_result(reread=310_000_000), GB)
    assert out is not None
    assert out.startswith("out: under the memory limit of 8 GiB it re-read 31% of the model")
    assert thrashing(a_result(reread=10_000_000), GB) is None  # 1 %: a few pages, not thrashing
    assert thrashing(a_result(reread=GB, status="failed"), GB) is None  # failed: said as such
    no_limit = dataclasses.replace(a_result(reread=0), memory_limit=None)
    assert thrashing(no_limit, GB) is None


@REAL
def test_a_candidate_oom_killed_or_thrashing_under_the_limit_is_out(tmp_path: Path) -> None:
    """A copy of 496 MiB under a 512 MiB limit: the worker's interpreter tips it over; the
    same model streamed fits, with room for its reads' page cache (under a limit barely above
    its interpreters', a streaming load's read-ahead is reclaimed before it is read)."""
    model = open_model(sparse_model(tmp_path, tensors=62, tensor_bytes=8 * MiB))
    said: list[str] = []
    race = Race(model, time.monotonic() + 60, 1.0, said.append, None, memory_limit=512 * MiB)
    copy = Candidate.of("sequential", LoadOptions())
    assert race.run(copy, first=True) is None
    # Killed, or (its interpreter partly charged before it joined) thrashing: out either way.
    assert copy.ended == "failed" and "memory limit of 512 MiB" in copy.reason
    assert "OOM killer" in copy.reason or copy.reason.startswith("out: "), copy.reason
    streaming = Candidate.of("sequential", LoadOptions(discard=True))
    result = race.run(streaming)
    assert result is not None and streaming.ended == "finished", (streaming.reason, said)
    assert result.memory_limit is not None and result.memory_limit.peak_bytes <= 512 * MiB


@REAL
def test_a_recommendation_under_a_limit_says_what_its_pick_took(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    rec = recommend(model, budget_s=6, memory_limit=256 * MiB, workers=2, peers=False)
    assert all(r.memory_limit is not None for c in rec.ranked for r in c.results)
    said = [line for line in explain(rec) if line.startswith("Under the memory limit")]
    assert len(said) == 1 and "of 256 MiB (every run in a memory cgroup" in said[0]
