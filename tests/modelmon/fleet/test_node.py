"""One node's part of a fleet round (no Ray needed: the barrier is two callables)."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import StrategyConfig, open_model, write_safetensors_model
from modelmon.core.options import LoadOptions
from modelmon.fleet.node import NodeRequest, NodeRun, SameObjects, load_on_node

SHARDED = "s3://models/sharded/"


def _asleep(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] == "S"


def test_a_worker_killed_at_the_barrier_fails_the_nodes_row_at_once(tmp_path: Path) -> None:
    """A node's workers wait for go while the node waits for the others: one killed then (by
    the OOM killer, say) makes this node's row failed, naming it, as soon as the round goes.
    At once: on the death itself, not when the load ends. The other worker is frozen
    (SIGSTOP) first, so the load can never end by itself: a node that waited for it, or for
    the dead worker's result, would never return (the suite's timeout stops it), and one
    that returns has seen the death, which its row names."""
    model = write_safetensors_model(tmp_path, layers=2, hidden=256, vocab=1024)
    options = LoadOptions(workers=2, discard=True, cache="keep")
    request = NodeRequest(str(model), StrategyConfig("sequential", options), "load", 0)
    killed: list[int] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        workers = {p.name: p for p in multiprocessing.active_children()}
        worker, other = workers["modelmon-worker-1"], workers["modelmon-worker-0"]
        deadline = time.monotonic() + 30
        while not _asleep(worker.pid) and time.monotonic() < deadline:
            time.sleep(0.001)  # until it sleeps, waiting for go
        assert other.pid is not None and worker.pid is not None
        os.kill(other.pid, signal.SIGSTOP)
        os.kill(worker.pid, signal.SIGKILL)
        killed.append(worker.pid)
        return time.time(), None  # every node arrived: go

    def abort(node: str, reason: str) -> None:
        raise AssertionError(f"the node arrived, it must not abort: {reason}")

    run = load_on_node(request, "node-a", arrive, abort)
    (pid,) = killed
    assert run.status == "failed" and run.node_id == "node-a"
    assert (run.error or "").startswith(f"worker 1 (pid {pid}) was killed by SIGKILL"), run.error


def test_a_nodes_row_says_when_it_arrived_at_the_barrier_and_when_it_went(
    tmp_path: Path,
) -> None:
    """The node arrives once its load is ready, then waits there for the others: its row's
    ``arrived_wall`` comes before its call to the barrier, its ``start_wall`` after the
    barrier's answer (so a fleet's rows show that no node went before the last arrived)."""
    model = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=256)
    options = LoadOptions(workers=1, discard=True, cache="keep")
    request = NodeRequest(str(model), StrategyConfig("sequential", options), "load", 0)
    called: list[float] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        called.append(time.time())
        return time.time(), None  # the last node arrived: go

    def abort(node: str, reason: str) -> None:
        raise AssertionError(f"the node arrived, it must not abort: {reason}")

    run = load_on_node(request, "node-a", arrive, abort)
    assert run.status == "ok", run.error
    (called_at,) = called
    assert 0 < run.arrived_wall <= called_at <= run.start_wall


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


def _never_arrives(node: str) -> tuple[float | None, str | None]:
    raise AssertionError("a node that cannot read the bucket must not arrive")


def _bucket_request(same: SameObjects) -> NodeRequest:
    config = StrategyConfig("ranged", LoadOptions(threads=2))
    return NodeRequest(SHARDED, config, "load", 0, same=same)


def test_a_node_without_the_fleets_endpoint_says_so_before_any_request(
    faulty_s3: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose environment names no endpoint would send its requests to AWS (a bucket
    of the same name, elsewhere): its row says so, and it makes no request at all."""
    same = SameObjects.of(open_model(SHARDED))
    assert same is not None and same.endpoint == faulty_s3.proxy.endpoint
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    seen = len(faulty_s3.proxy.seen)
    withdrawn: list[str] = []
    run = load_on_node(
        _bucket_request(same), "node-a", _never_arrives, lambda _, why: withdrawn.append(why)
    )
    assert run.status == "failed" and run.withdrew and withdrawn == [run.error]
    aws = r"https://s3(\.us-east-1)?\.amazonaws\.com"  # as botocore resolves no endpoint
    said = (
        f"{re.escape(SHARDED)}: this node's requests would go to {aws} \\(its endpoint: "
        f"none: AWS's\\), the fleet's go to {re.escape(same.endpoint)}: give this node the "
        "same endpoint \\(AWS_ENDPOINT_URL, or its profile's endpoint_url\\)"
    )
    assert re.fullmatch(said, run.error or ""), run.error
    assert len(faulty_s3.proxy.seen) == seen


def test_a_node_that_finds_another_version_than_the_fleet_opened_says_so(
    rclone_s3: SimpleNamespace,
) -> None:
    """The object was replaced between the driver's opening and this node's: the node reads
    nothing of it (every node reads one version) and its row says which ETags."""
    same = SameObjects.of(open_model(SHARDED))
    assert same is not None
    url, size, etag = same.objects[1]
    older = replace(same, objects=(same.objects[0], (url, size, '"older"'), *same.objects[2:]))
    withdrawn: list[str] = []
    run = load_on_node(
        _bucket_request(older), "node-b", _never_arrives, lambda _, why: withdrawn.append(why)
    )
    assert run.status == "failed" and run.withdrew and run.bytes == 0
    assert run.error == (
        f"{url}: not the object the fleet opened: this node found ETag {etag}, {size} bytes; "
        f'the fleet opened ETag "older", {size} bytes (replaced meanwhile: every node reads '
        "one version)"
    )


def test_a_node_throttled_on_every_read_ends_at_the_rounds_storage_timeout_counting_them(
    faulty_s3: SimpleNamespace,
) -> None:
    """The round's storage timeout is the node's (and its workers'), for the round only: a
    bucket that throttles every read ends the node's load within it, every throttle counted."""
    same = SameObjects.of(open_model(SHARDED))
    assert same is not None
    faulty_s3.proxy.faults.throttle = 10**6
    faulty_s3.proxy.faults.conditional = True  # every read of the load, none of the opening
    request = replace(_bucket_request(same), storage_timeout_s=1.0)
    run = load_on_node(request, "node-c", _every_node_went, _never_withdraws)
    assert run.status == "failed"
    said = "throttled by the endpoint (503 SlowDown); nothing arrived within the storage timeout"
    assert f"{said}, 1 s" in (run.error or ""), run.error
    throttled = sum(1 for seen in faulty_s3.proxy.seen if seen.fault == "throttle")
    assert run.reads is not None and run.reads.throttles == throttled > 2
    assert "MODELMON_STORAGE_TIMEOUT" not in os.environ


def test_nodes_reading_an_object_replaced_meanwhile_each_fail_saying_so(
    faulty_s3: SimpleNamespace,
) -> None:
    """Two nodes go together and read; after two reads the object answers with another ETag:
    each node's row fails on it, neither reports a mix of two versions."""
    same = SameObjects.of(open_model(SHARDED))
    assert same is not None
    faults = faulty_s3.proxy.faults
    faults.etag, faults.conditional, faults.after = "replaced", True, 2  # 2 reads of the old
    config = StrategyConfig("ranged", LoadOptions(threads=1, chunk=64 << 10))
    request = NodeRequest(SHARDED, config, "load", 0, same=same)
    together = threading.Barrier(2, timeout=60)

    def arrive(node: str) -> tuple[float | None, str | None]:
        together.wait()
        return time.time(), None

    runs: dict[str, NodeRun] = {}

    def node(name: str) -> None:
        runs[name] = load_on_node(request, name, arrive, _never_withdraws)

    threads = [threading.Thread(target=node, args=(name,)) for name in ("node-d", "node-e")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert sorted(runs) == ["node-d", "node-e"]
    for run in runs.values():
        assert run.status == "failed" and run.bytes == 0
        assert 'the object was replaced since it was opened: ETag "replaced"' in (run.error or "")


def _every_node_went(node: str) -> tuple[float | None, str | None]:
    return time.time(), None


def _never_withdraws(node: str, reason: str) -> None:
    raise AssertionError(f"the node arrived, it must not withdraw: {reason}")


def test_a_node_loads_a_model_over_plain_http_and_reads_its_bound(
    moto_s3: SimpleNamespace,
) -> None:
    """An http(s):// model: the node's endpoint is the URL's host, checked as a bucket's;
    its load counts its GETs, and a bound round reads every object once by plain GETs."""
    url = f"{moto_s3.server.endpoint}/models/sharded/model.safetensors.index.json"
    model = open_model(url)
    same = SameObjects.of(model)
    assert same is not None and same.endpoint == moto_s3.server.endpoint
    request = NodeRequest(url, StrategyConfig("ranged", LoadOptions(threads=2)), "load", 0,
                          same=same)  # fmt: skip
    run = load_on_node(request, "node-f", _every_node_went, _never_withdraws)
    assert run.status == "ok" and run.bytes == model.total_bytes, run.error
    assert run.reads is not None and run.reads.requests == len(model.files)
    bound_request = replace(request, bound=(2, 1 << 20))
    bound = load_on_node(bound_request, "node-f", _every_node_went, _never_withdraws)
    objects = sum(size for _, size, _ in same.objects)
    assert (bound.status, bound.bytes) == ("ok", objects) and bound.mbps > 0
    assert bound.spec == "plain GETs, 2 connection(s), 1 MiB each"
