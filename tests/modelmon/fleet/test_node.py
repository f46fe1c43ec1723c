"""One node's part of a fleet round (no Ray needed: the barrier is two callables)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

import pytest

from modelmon.core import StrategyConfig, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.fleet.node import NodeRequest, load_on_node


def _asleep(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "S"


def test_a_worker_killed_at_the_barrier_fails_the_nodes_row_at_once(tmp_path: Path) -> None:
    """A node's workers wait for go while the node waits for the others: one killed then (by
    the OOM killer, say) makes this node's row failed, naming it, as soon as the round goes."""
    model = write_safetensors_model(tmp_path, layers=2, hidden=256, vocab=1024)
    options = LoadOptions(workers=2, discard=True, cache="keep")
    request = NodeRequest(str(model), StrategyConfig("sequential", options), "load", 0)
    killed: list[tuple[int, float]] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        worker = next(p for p in multiprocessing.active_children() if p.name == "modelmon-worker-1")
        deadline = time.monotonic() + 30
        while not _asleep(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.001)  # until it sleeps, waiting for go
        os.kill(worker.pid, signal.SIGKILL)
        killed.append((worker.pid, time.monotonic()))
        return time.time(), None  # every node arrived: go

    def abort(node: str, reason: str) -> None:
        raise AssertionError(f"the node arrived, it must not abort: {reason}")

    run = load_on_node(request, "node-a", arrive, abort)
    pid, at = killed[0]
    assert time.monotonic() - at < 2.0
    assert run.status == "failed" and run.node_id == "node-a"
    assert (run.error or "").startswith(f"worker 1 (pid {pid}) was killed by SIGKILL"), run.error


@pytest.mark.parametrize(("fatal", "status"), [(False, "cancelled"), (True, "failed")])
def test_a_stopped_round_stops_the_nodes_load(tmp_path: Path, fatal: bool, status: str) -> None:
    """The round is stopped (another node failed; or, fatal, its barrier is gone): the node's
    load is cancelled and its row says why, failed when the stop is fatal."""
    model = write_safetensors_model(tmp_path, layers=2, hidden=256, vocab=1024)
    options = LoadOptions(workers=2, discard=True, cache="keep")
    request = NodeRequest(str(model), StrategyConfig("sequential", options), "load", 0)
    aborted: list[str] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        raise AssertionError("a stopped node must not arrive")

    def stopped(timeout_s: float) -> tuple[str, bool] | None:
        return "node b failed: its disk is gone", fatal

    run = load_on_node(request, "node-a", arrive, lambda _, why: aborted.append(why), stopped)
    assert (run.status, run.error) == (status, "stopped: node b failed: its disk is gone")
    assert aborted  # the others were told not to wait for this node
