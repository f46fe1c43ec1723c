"""A search under a memory limit: every candidate runs in a memory cgroup of that size, and one
OOM-killed or thrashing (re-reading its model after reclaim) there is out."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

from modelmon.core.loading.config_file import read_config
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.limit_probe import LimitProbe, LimitProbes, LimitSearch
from modelmon.core.measuring.race import Race, thrashing
from modelmon.core.measuring.recommend import recommend
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.output.config import recommendation_document
from modelmon.core.output.config_text import render
from modelmon.core.output.explain import explain
from modelmon.core.system.cache import CacheState
from modelmon.core.system.memory_limit import MemoryLimit, size_text

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
def test_a_recommendation_under_a_limit_says_what_its_pick_took(
    sharded_model: Path, tmp_path: Path
) -> None:
    model = open_model(sharded_model)
    rec = recommend(model, budget_s=6, memory_limit=256 * MiB, workers=2, peers=False)
    assert all(r.memory_limit is not None for c in rec.ranked for r in c.results)
    said = [line for line in explain(rec) if line.startswith("Under the memory limit")]
    assert len(said) == 1 and "of 256 MiB (every run in a memory cgroup" in said[0]
    # Runs under smaller limits, as far as the budget's fifth kept for them allowed, or why
    # none was made; said in the explanation and kept in the config file (read back).
    probes = rec.limit_probes
    assert probes is not None and (probes.probes or probes.skipped), probes
    assert probes.sentence() in explain(rec)
    document = recommendation_document(rec, "modelmon.toml", memory_limit=256 * MiB)
    path = tmp_path / "modelmon.toml"
    path.write_text(render(document))
    kept = read_config(path).document["evidence"]["memory_limit"]
    assert kept["smallest_held_bytes"] == probes.smallest_held
    assert len(kept["probes"]) == len(probes.probes)


def a_probe(limit_mib: int, held: bool, why: str = "") -> LimitProbe:
    peak = (limit_mib - 8) * MiB if held else None
    return LimitProbe(limit_mib * MiB, held, 800.0 if held else None, peak, 0, why)


def test_the_probes_say_the_smallest_limit_held_and_what_the_smaller_ones_did() -> None:
    probes = LimitProbes(
        1 << 30,
        200 * MiB,
        (
            a_probe(256, True),
            a_probe(160, False, "was OOM-killed"),
            a_probe(208, True),
        ),
    )
    assert probes.smallest_held == 208 * MiB
    assert probes.sentence() == (
        "It holds at a memory limit of 208 MiB (800 MB/s, peak 200 MiB), the smallest tried; "
        "at 160 MiB it was OOM-killed (each a cold run in a memory cgroup of that size, after "
        "the search)."
    )
    thrashed = a_probe(992, False, "thrashed: re-read 31% of the model after reclaim")
    spent = "the budget left no run for a smaller limit"
    none_held = LimitProbes(1 << 30, 900 * MiB, (thrashed,), spent)
    assert none_held.smallest_held == 1 << 30
    assert none_held.sentence() == (
        "It held under none of the smaller memory limits tried (1 GiB given); at 992 MiB it "
        "thrashed: re-read 31% of the model after reclaim (each a cold run in a memory cgroup "
        "of that size, after the search); no more were tried: the budget left no run for a "
        "smaller limit."
    )
    skipped = LimitProbes(1 << 30, 1000 * MiB, (), "it needs most of the limit (1000 MiB)")
    assert (
        skipped.sentence()
        == "No smaller memory limit was tried: it needs most of the limit (1000 MiB)."
    )
    assert "why" not in probes.to_dict()["probes"][0]
    assert probes.to_dict()["probes"][1] == {
        "limit_bytes": 160 * MiB,
        "held": False,
        "reread_bytes": 0,
        "why": "was OOM-killed",
    }


@REAL
def test_the_smallest_limit_a_pick_holds_at_is_found_by_runs_under_smaller_ones(
    tmp_path: Path,
) -> None:
    """A copy of 128 MiB picked under 1 GiB: it holds at a limit near its arrays' need, far
    below the limit given, and not at one under that need; every probe ran in a cgroup of its
    size, each judged as the search judges a run by what the limit did to it (an OOM kill,
    thrashing).

    No run here is held to a clock: this load takes tenths of a second, so twice its time (or
    the cut's floor, half a second) is within what a busy machine holds a process back. The
    pick's second run is a duel's, as a search's evidence runs are (bounded by the budget
    only), and the probes' cut is set past the race's whole budget; the cut itself is
    test_cutoff's."""
    model = open_model(sparse_model(tmp_path, tensors=16, tensor_bytes=8 * MiB))
    said: list[str] = []
    race = Race(model, time.monotonic() + 300, 1.0, said.append, None, memory_limit=1 << 30)
    pick = Candidate.of("sequential", LoadOptions(workers=1, threads=1, chunk=16 * MiB))
    assert race.run(pick, first=True) is not None, said
    assert race.run(pick, race=False) is not None, said
    search = LimitSearch(race, pick, 1 << 30)
    search.load_s = race.left()  # its cut: past the budget, which no correct run reaches
    found = search.run(said.append, None)
    # Its anonymous peak, sampled every 20 ms: most of its 128 MiB of arrays at least.
    assert found.need_bytes >= 96 * MiB and not found.skipped, found
    held = [p for p in found.probes if p.held]
    failed = [p for p in found.probes if not p.held]
    assert held and failed, found
    smallest = found.smallest_held
    assert smallest < 512 * MiB and all(p.limit_bytes < smallest for p in failed), found
    assert all(p.peak_bytes is not None and p.peak_bytes <= p.limit_bytes for p in held), found
    assert len(found.probes) <= 3, found
    assert all(p.why == "was OOM-killed" or p.why.startswith("thrashed") for p in failed), found
    assert all(p.limit_bytes >= 128 * MiB for p in found.probes), found  # never refused
    sentence = found.sentence()
    assert sentence.startswith(f"It holds at a memory limit of {size_text(smallest)} ("), sentence
    assert f"at {size_text(failed[0].limit_bytes)} it {failed[0].why}" in sentence, sentence
