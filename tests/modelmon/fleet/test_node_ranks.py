"""A node of a fleet running N ranks (``fleet load|bench --ranks N``): its ranks go from the
fleet's barrier, its row says their time, the node's memory and what it read (no Ray needed:
the barrier is two callables)."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import StrategyConfig, open_model, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.fleet.bucket import request_figures
from modelmon.fleet.node import NodeRequest, SameObjects, load_on_node

from ...core.system.test_memory_cgroup import REAL

SHARDED = "s3://models/sharded/"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(tmp_path_factory.mktemp("node-ranks"), layers=2, hidden=256)


def _never_withdraws(node: str, reason: str) -> None:
    raise AssertionError(f"the node arrived, it must not withdraw: {reason}")


@pytest.mark.parametrize(("mode", "copies"), [("whole", 2), ("one-reader", 1)])
def test_a_nodes_ranks_go_from_the_fleets_barrier_and_its_row_says_what_they_did(
    model: Path, mode: str, copies: int
) -> None:
    total = open_model(model).total_bytes
    config = StrategyConfig("sequential", LoadOptions(workers=1, cache="cold"))
    request = NodeRequest(str(model), config, "load", 0, ranks=(2, mode))
    arrivals: list[str] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        arrivals.append(node)  # the node's ranks are all ready: the node arrives once
        return time.time(), None

    run = load_on_node(request, "node-a", arrive, _never_withdraws)
    assert run.status == "ok", run.error
    assert arrivals == ["node-a"] and run.start_wall > 0 and run.cache.cold
    ranks = run.ranks
    assert ranks is not None and (ranks.ranks, ranks.mode) == (2, mode)
    assert run.bytes == ranks.read_bytes == copies * total  # what every reader read, in all
    # The node's time is its slowest rank's end; its rate the model's bytes over it.
    assert all(s is not None for s in ranks.rank_seconds)
    assert run.seconds == max(s for s in ranks.rank_seconds if s is not None)
    assert ranks.slowest_rank in (0, 1)
    assert run.mbps == pytest.approx(total / run.seconds / 1e6)
    assert ranks.peak_bytes is not None and ranks.peak_bytes > 0 and run.peak_rss > 0
    assert run.object_reads == () and request_figures([run]) is None


def test_a_broken_barrier_starts_none_of_the_nodes_ranks(model: Path) -> None:
    config = StrategyConfig("sequential", LoadOptions(cache="cold"))
    request = NodeRequest(str(model), config, "load", 0, ranks=(2, "whole"))

    def arrive(node: str) -> tuple[float | None, str | None]:
        return None, "only 1 of 2 nodes were ready after 300 s"

    run = load_on_node(request, "node-b", arrive, _never_withdraws)
    assert (run.status, run.error) == (
        "cancelled",
        "did not start: only 1 of 2 nodes were ready after 300 s",
    )
    assert run.bytes == 0 and run.start_wall == 0.0


def test_a_stopped_round_stops_the_nodes_ranks(model: Path) -> None:
    config = StrategyConfig("sequential", LoadOptions(cache="keep"))
    request = NodeRequest(str(model), config, "load", 0, ranks=(2, "one-reader"))
    withdrawn: list[str] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        raise AssertionError("a stopped node must not arrive")

    def stopped(timeout_s: float) -> tuple[str, bool] | None:
        return "node b failed: its disk is gone", False

    run = load_on_node(request, "node-c", arrive, lambda _, why: withdrawn.append(why), stopped)
    assert (run.status, run.error) == ("cancelled", "stopped: node b failed: its disk is gone")
    assert withdrawn  # the others were told not to wait for this node


def test_a_nodes_one_reader_streams_the_bucket_once_and_counts_its_requests(
    faulty_s3: SimpleNamespace,
) -> None:
    model = open_model(SHARDED)
    same = SameObjects.of(model)
    config = StrategyConfig("ranged", LoadOptions(threads=2, chunk=64 << 10))
    request = NodeRequest(SHARDED, config, "load", 0, same=same, ranks=(2, "one-reader"))
    run = load_on_node(request, "node-d", lambda _: (time.time(), None), _never_withdraws)
    assert run.status == "ok", run.error
    assert run.bytes == model.total_bytes  # one read of the bucket for the node's two ranks
    figures = request_figures([run])
    gets = sum(1 for seen in faulty_s3.proxy.seen if seen.method == "GET" and seen.if_match)
    assert figures is not None and figures["gets"] == gets > 0


@REAL  # the limit is a cgroup's: made only where one can be
def test_a_nodes_ranks_run_together_in_one_cgroup_of_the_memory_limit(model: Path) -> None:
    config = StrategyConfig("sequential", LoadOptions(workers=1, cache="cold"))
    limit = 256 << 20
    request = NodeRequest(str(model), config, "load", 0, ranks=(2, "whole"), memory_limit=limit)
    run = load_on_node(request, "node-e", lambda _: (time.time(), None), _never_withdraws)
    assert run.status == "ok", run.error
    ranks = run.ranks
    assert ranks is not None and ranks.memory_limit == limit and ranks.measured
    record = ranks.limit  # one cgroup held both ranks: its peak is the node's
    assert record is not None and record.limit_bytes == limit and ranks.oom_kills == 0
    assert ranks.peak_bytes == record.peak_bytes and 0 < record.peak_bytes <= limit
