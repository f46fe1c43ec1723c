"""An A/B of N ranks a side (``run_ranks_ab``): the pairs and verdict of any A/B, each side's
node memory, and a side that cannot run or fails."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from modelmon.core import StrategyConfig, open_model, write_safetensors_model
from modelmon.core.errors import OptionsError
from modelmon.core.measuring.ab import ABFailed
from modelmon.core.measuring.ranks_ab import RanksSide, run_ranks_ab, side_node
from modelmon.core.measuring.ranks_records import NodeMemory, RanksResult
from modelmon.core.options import LoadOptions
from modelmon.core.system.cache import CacheState

SEQUENTIAL = StrategyConfig("sequential", LoadOptions())


def test_a_side_that_cannot_run_its_ranks_is_named_before_any_run(tmp_path: Path) -> None:
    tiny = write_safetensors_model(tmp_path, layers=1, hidden=16, intermediate=32, vocab=32)
    model = open_model(tiny)  # its widest weights split 32 ways
    whole, sliced = RanksSide("whole", SEQUENTIAL), RanksSide("slice", SEQUENTIAL)
    with pytest.raises(OptionsError, match=r"^B \(slice, sequential\): 33 slice ranks"):
        run_ranks_ab(model, whole, sliced, ranks=33)
    viewed = RanksSide("one-reader", StrategyConfig("mmap-view", LoadOptions()))
    with pytest.raises(OptionsError, match=r"^A \(one-reader, mmap-view\): one-reader needs"):
        run_ranks_ab(model, viewed, whole, ranks=2)


def test_a_side_whose_rank_fails_voids_the_ab_and_leaves_the_callers_cancel(
    tmp_path: Path,
) -> None:
    """A rank that fails stops its run's other ranks and ends the A/B as failed: the A/B's
    cancel (the user's Ctrl+C) stays unset, so no front end calls it cancelled."""
    folder = tmp_path / "model"
    path = write_safetensors_model(folder, layers=2, hidden=64, vocab=128, dtype="F16", seed=4)
    model = open_model(path)
    with open(next(folder.glob("*.safetensors")), "ab") as handle:  # changed since opened
        handle.write(b"\0" * 4096)
    cancel = threading.Event()
    with pytest.raises(ABFailed, match=r"^A run 1 failed: rank \d") as caught:
        run_ranks_ab(
            model, RanksSide("whole", SEQUENTIAL), RanksSide("slice", SEQUENTIAL), 2, n=1,
            cancel=cancel,
        )  # fmt: skip
    assert not cancel.is_set()
    assert isinstance(caught.value.result, RanksResult)


def _run(peak: int, anon: int, cache: int, held: int) -> RanksResult:
    state = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
    node = NodeMemory(peak, anon, cache, True, None, held)
    return RanksResult("ok", "sequential", LoadOptions(), "/m", "whole", state, (), 1, node)


def test_a_sides_node_memory_is_each_figure_at_its_highest_over_its_runs() -> None:
    node = side_node([_run(100, 60, 40, 70), _run(90, 80, 10, 85)])
    assert node is not None
    assert (node.peak_bytes, node.anon_peak_bytes, node.cache_peak_bytes) == (100, 80, 40)
    assert node.held_peak_bytes == 85 and node.measured
    assert side_node([]) is None
