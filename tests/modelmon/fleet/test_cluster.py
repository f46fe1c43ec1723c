"""``modelmon fleet`` on a real multi-node Ray cluster: three raylets on this machine's loopback.

Every node is a real Ray node (its own raylet, object store and worker processes); they share
this machine's disk, so the test shows the scheduling, the barrier and the report, not the
storage of a real cluster. The nodes start with the bucket bed's endpoint (a FaultProxy in
front of ``rclone serve s3``) and credentials in their environment, as a real cluster's nodes
have theirs: the fleet on a bucket (the end of this file) reads it through one cluster.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from modelmon.core import open_model, write_safetensors_model

from ...fault_proxy import FaultProxy, Faults
from ...fuse import mounted_or_skip
from ...object_store import SECRET_KEY, aws_environment

if os.environ.get("CI") == "true":
    # ./dev installs the fleet extra in CI and fails there if it cannot: the fleet is tested
    # by every CI run, never skipped by one.
    import ray
else:
    ray = pytest.importorskip(
        "ray",
        reason="Ray is the optional fleet extra (~110 MB download, ~330 MB installed): "
        "pip install -e '.[fleet]' to run this test",
    )
from ray.cluster_utils import Cluster

NODES = 3
LOOPBACK = "127.0.0.1"  # every node and all their traffic stay on this machine's loopback
SMALL_STORE = 80 << 20  # bytes of object store per node: the tasks return small records only


@pytest.fixture(scope="module")
def fleet_bucket(rclone_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The bucket every node of the module's cluster reads, through a FaultProxy; its
    endpoint and the test credentials are in the environment the nodes start with."""
    home = tmp_path_factory.mktemp("fleet-aws")
    with (
        FaultProxy(rclone_server.port, rclone_server.root).start() as proxy,
        aws_environment(proxy.endpoint, home) as env,
    ):
        yield SimpleNamespace(proxy=proxy, env=env, root=rclone_server.root)


@pytest.fixture
def bucket(fleet_bucket: Any) -> Iterator[Any]:
    """The module's bucket with no fault and nothing seen yet."""
    proxy = fleet_bucket.proxy
    proxy.faults, proxy.seen[:] = Faults(), []
    yield fleet_bucket
    proxy.faults = Faults()


@pytest.fixture(scope="module")
def cluster(fleet_bucket: Any) -> Iterator[Any]:
    with pytest.MonkeyPatch.context() as patch:
        # Without it Ray turns 127.0.0.1 into this machine's network address (so that other
        # machines could reach it); the driver started by the test inherits it too.
        patch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        yield from _cluster()


def _cluster() -> Iterator[Any]:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "node_ip_address": LOOPBACK,
            "num_cpus": 1,
            "object_store_memory": SMALL_STORE,
            "include_dashboard": False,
        },
    )
    try:
        for _ in range(NODES - 1):
            cluster.add_node(node_ip_address=LOOPBACK, num_cpus=1, object_store_memory=SMALL_STORE)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def fleet(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script, as users run it: the driver is its own process, so Ray's state in
    a driver (log files it never closes, its connection) is not this test process's."""
    return subprocess.run(
        [sys.executable, "-m", "modelmon", "fleet", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def document_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    document = json.loads(done.stdout, parse_constant=refuse)
    assert isinstance(document, dict)
    return document


def fleet_json(*args: str) -> dict[str, Any]:
    done = fleet(*args)
    assert done.returncode == 0, done.stderr
    return document_of(done)


def went_from_one_barrier(runs: list[dict[str, Any]]) -> None:
    """What a round's barrier guarantees, from the times its nodes recorded (their clocks are
    this machine's one): every node arrived, and none went before the last one arrived. How
    close together they went is the machine's scheduling, not the barrier's: on a loaded
    machine the release reaches each node's process when it next gets a core."""
    assert all(run["arrived_wall"] and run["start_wall"] for run in runs), runs
    last_arrival = max(run["arrived_wall"] for run in runs)
    assert all(run["start_wall"] >= last_arrival for run in runs), runs
    assert all(run["waited_s"] >= 0 for run in runs), runs


def test_fleet_load_runs_on_every_node_from_one_barrier(
    cluster: Any, sharded_model: Path, tmp_path: Path
) -> None:
    table = tmp_path / "nodes.csv"
    document = fleet_json(
        "load", str(sharded_model), "--address", cluster.address,
        "--workers", "2", "--csv", str(table),
    )  # fmt: skip
    total = open_model(sharded_model).total_bytes
    nodes = document["nodes"]
    assert len(nodes) == NODES
    assert len({n["node_id"] for n in nodes}) == NODES  # one task pinned to each node
    runs = []
    for node in nodes:
        (run,) = node["runs"]
        assert run["status"] == "ok", run["error"]
        assert run["bytes"] == total and node["mbps"] > 0 and node["seconds"] > 0
        assert run["cache"]["requested"] == "cold" and run["cache"]["resident_before"] <= 0.01
        assert node["peak_rss"] > 0 and node["storage"]
        runs.append(run)
    went_from_one_barrier(runs)
    starts = [run["start_wall"] for run in runs]
    aggregate = document["aggregate"]
    assert aggregate["nodes"] == NODES
    assert aggregate["start_spread_s"] == pytest.approx(max(starts) - min(starts))
    assert aggregate["seconds"]["max"] == max(n["seconds"] for n in nodes)
    assert aggregate["straggler"]["node_id"] in {n["node_id"] for n in nodes}
    assert aggregate["total_mbps"] > 0
    rows = list(csv.DictReader(table.open()))
    assert len(rows) == NODES and {r["status"] for r in rows} == {"ok"}


def test_fleet_bench_alternates_sides_on_the_chosen_nodes(
    cluster: Any, sharded_model: Path
) -> None:
    document = fleet_json(
        "bench", str(sharded_model), "--address", cluster.address, "--nodes", "2",
        "--a", "sequential workers=1", "--b", "pread workers=2", "-n", "2",
    )  # fmt: skip
    nodes = document["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        assert [r["side"] for r in node["runs"]] == ["A", "B", "A", "B"]
        assert all(r["status"] == "ok" for r in node["runs"])
        assert node["A"]["mbps"] > 0 and node["B"]["mbps"] > 0
    aggregate = document["aggregate"]
    assert aggregate["A"]["spec"] == "sequential cache=cold"
    assert aggregate["B"]["spec"] == "pread workers=2 cache=cold"
    assert [r["round"] for r in aggregate["A"]["rounds"]] == [0, 2]
    runs = [run for node in nodes for run in node["runs"]]
    for round_ in range(4):  # each round from its own barrier
        went_from_one_barrier([run for run in runs if run["round"] == round_])
    assert aggregate["b_over_a"] > 0


# --- a node that dies, or fails, mid-load ---------------------------------------------------

BANDWIDTH = ("--bwlimit", "1M", "--buffer-size", "0")  # the shared storage: a slow network
SPAWNED = b"multiprocessing.spawn"  # in a LoadRun worker's command line


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as line:
            return line.read()
    except OSError:
        return b""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # gone
        return found
    for tid in tasks:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as kids:
            found += [int(kid) for kid in kids.read().split()]
    return found


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


def _holds(pid: int, path: Path) -> bool:
    """Whether process ``pid`` has ``path`` open."""
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        return False
    return str(path) in links


def _node_tasks_reading(model: Path) -> dict[int, list[int]]:
    """The fleet's task processes (``ray::modelmon-fleet-…``) whose load is reading ``model``
    from the storage: {task pid: its worker pids}, those of them with the file open."""
    found = {}
    for pid in _pids():
        if _cmdline(pid).startswith(b"ray::modelmon-fleet-"):
            workers = [kid for kid in _children(pid) if SPAWNED in _cmdline(kid)]
            if any(_holds(worker, model) for worker in workers):
                found[pid] = workers
    return found


@pytest.fixture
def slow_shared_model(tmp_path: Path) -> Iterator[Path]:
    """An ~18 MB model on a FUSE mount at 1 MB/s, the storage every node shares: a round
    that loads it on every node takes close to a minute."""
    source = write_safetensors_model(tmp_path / "shared", layers=2, hidden=512, vocab=2048)
    with mounted_or_skip(source.parent, tmp_path / "mnt", mount_flags=BANDWIDTH) as mounted:
        yield mounted / source.name


@pytest.fixture
def held_shared_model(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """An ~18 MB model on a FUSE mount at 1 MB/s, the storage every node shares, whose
    server answers through a proxy that holds every answer past the model's middle until
    ``storage.release()``: no load of it ends before the test lets it, however late the
    test comes to look or to kill."""
    source = write_safetensors_model(tmp_path / "shared", layers=2, hidden=512, vocab=2048)
    middle = source.stat().st_size // 2
    proxies: list[FaultProxy] = []

    @contextlib.contextmanager
    def through_proxy(port: int) -> Iterator[str]:
        with FaultProxy(port, faults=Faults(hold_from=middle)).start() as proxy:
            proxies.append(proxy)
            yield proxy.endpoint

    with mounted_or_skip(source.parent, tmp_path / "mnt", BANDWIDTH, through_proxy) as mounted:
        (storage,) = proxies
        yield SimpleNamespace(path=mounted / source.name, storage=storage)


def _raylet(node: Any) -> int:
    return int(node.all_processes["raylet"][0].process.pid)


def _kill_node(cluster: Any, task: int) -> Any:
    """Kill the node that runs task process ``task`` as a machine dies: its raylet and every
    process of the node's at once (the loads' workers follow their parents). Not the head."""
    node = next(n for n in cluster.worker_nodes if _raylet(n) == _parent(task))
    raylet = _raylet(node)
    for pid in [raylet, *_children(raylet)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return node


@pytest.mark.parametrize(
    "victim",
    [
        "load worker",  # a node's task process killed: the bucket's test below
        "barrier actor",
        pytest.param(
            "node",
            marks=pytest.mark.allow_leaks(
                "a new node replaces the one killed: the module's cluster fixture ends it"
            ),
        ),
    ],
)
def test_a_node_that_dies_mid_load_fails_the_fleet_run_and_stops_the_others(
    cluster: Any, slow_shared_model: Path, victim: str
) -> None:
    """Once every node is reading the model from the slow shared storage, one of a node's
    load's worker processes, or the whole node, or the round's barrier is SIGKILLed: the
    fleet run ends failed naming that node (and the process), the other nodes are stopped
    (cancelled, not left to finish), and no process is left reading the model."""
    model = slow_shared_model
    command = [
        sys.executable, "-m", "modelmon", "fleet", "load", str(model), "--address",
        cluster.address, "--workers", "2", "--threads", "1", "--chunk-mib", "0.0625",
        "--cache", "keep", "--json",
    ]  # fmt: skip
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    dead_node = None
    try:
        deadline = time.monotonic() + 120
        while len(reading := _node_tasks_reading(model)) < NODES:
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "the nodes never all started reading"
            time.sleep(0.05)
        head = _raylet(cluster.head_node)
        task = next(t for t in sorted(reading) if _parent(t) != head)
        if victim == "node":
            dead_node = _kill_node(cluster, task)
        elif victim == "barrier actor":
            # It lives on the driver's node, the head, so no node under test takes it down
            # with it; another cluster's on this machine (another test's) is not this one.
            (actor,) = [
                p
                for p in _pids()
                if _cmdline(p).startswith(b"ray::StartBarrier") and _parent(p) == head
            ]
            os.kill(actor, signal.SIGKILL)
        else:
            os.kill(reading[task][-1], signal.SIGKILL)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
        if dead_node is not None:  # the next test's cluster has every node again
            cluster.remove_node(dead_node, allow_graceful=False)
            cluster.add_node(node_ip_address=LOOPBACK, num_cpus=1, object_store_memory=SMALL_STORE)
            cluster.wait_for_nodes()
    assert driver.returncode == 1, err  # LOAD_FAILED
    document = json.loads(out)
    assert document["status"] == "failed"
    rows = [node["runs"][0] for node in document["nodes"]]
    if victim == "barrier actor":  # every node stops, failed: no stop could reach it any more
        assert {row["status"] for row in rows} == {"failed"}, rows
        assert all(
            row["error"].startswith("stopped: the round's barrier actor died") for row in rows
        )
        assert_nothing_reads(model)
        return
    failed = [row for row in rows if row["status"] == "failed"]
    assert len(failed) == 1, rows
    error = failed[0]["error"]
    expected = {
        "load worker": f"worker 1 (pid {reading[task][-1]}) was killed by SIGKILL",
        "node": f"its modelmon task (pid {task}) was lost: its node died",
    }
    assert error.startswith(expected[victim]), error
    others = [row for row in rows if row is not failed[0]]
    assert [row["status"] for row in others] == ["cancelled"] * (NODES - 1), rows
    for row in others:
        assert row["error"].startswith("stopped: node ") and f"failed: {error}" in row["error"]
    assert_nothing_reads(model)


def assert_nothing_reads(model: Path) -> None:
    """No process holds ``model`` open (soon: a worker in a FUSE read exits once answered)."""
    deadline = time.monotonic() + 30
    while holders := [p for p in _pids() if _holds(p, model)]:
        assert time.monotonic() < deadline, f"still reading the model: {holders}"
        time.sleep(0.05)


# --- the fleet on a bucket ------------------------------------------------------------------

SHARDED = "s3://models/sharded/"


def _load_gets(proxy: FaultProxy) -> int:
    """The GETs of loads the proxy saw (made If-Match: an opening's and a plain GET's are not)."""
    return sum(1 for seen in proxy.seen if seen.method == "GET" and seen.if_match)


def test_fleet_bench_on_a_bucket_gives_every_nodes_requests_and_the_buckets_bound(
    cluster: Any, bucket: Any
) -> None:
    done = fleet(
        "bench", SHARDED, "--address", cluster.address, "--nodes", "2", "-n", "1",
        "--a", "ranged threads=2", "--b", "ranged threads=4 chunk=64KiB",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SECRET_KEY not in done.stdout + done.stderr
    document = document_of(done)
    total = open_model(SHARDED).total_bytes
    nodes = document["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        sides = [r["side"] for r in node["runs"]]  # one node reads alone, then every node
        assert sides in (["A", "B", "bound-one", "bound-all"], ["A", "B", "bound-all"]), sides
        for side in ("A", "B"):
            figures = node[side]
            assert figures["mbps"] > 0 and figures["requests"]["gets"] >= 3
            assert figures["requests"]["ttfb_median_s"] > 0
            assert figures["requests"]["throttles"] == figures["requests"]["retries"] == 0
        for run in node["runs"][:2]:
            assert run["status"] == "ok" and run["bytes"] == run["object_reads"]["bytes"] == total
        (storage,) = node["storage"]
        assert storage["endpoint"] == bucket.proxy.endpoint and storage["credentials"] == "env"
    aggregate = document["aggregate"]
    gets = [aggregate[side]["requests"]["gets"] for side in ("A", "B")]
    assert gets[0] == sum(n["A"]["requests"]["gets"] for n in nodes)
    assert sum(gets) == _load_gets(bucket.proxy)  # every GET the bucket answered, counted
    bound = document["bound"]
    assert bound["connections"] == 4 and bound["part"] == 64 << 10
    assert bound["one_node"]["mbps"] > 0 and bound["all_nodes"]["nodes"] == 2
    assert bound["all_nodes"]["mbps"] > 0 and bound["scaling"] > 0
    assert bound["of_bound"]["A"] > 0 and bound["of_bound"]["B"] > 0


@contextlib.contextmanager
def node_without(cluster: Any, *names: str) -> Iterator[str]:
    """One more node, started without ``names`` in its environment (the others keep
    theirs, as a node of a real cluster has its own): its id, for the block."""
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        node = cluster.add_node(
            node_ip_address=LOOPBACK, num_cpus=1, object_store_memory=SMALL_STORE
        )
    finally:
        os.environ.update(saved)
    try:
        cluster.wait_for_nodes()
        yield str(node.node_id)
    finally:
        cluster.remove_node(node)
        cluster.wait_for_nodes()


def test_a_node_without_credentials_says_so_and_the_others_load(cluster: Any, bucket: Any) -> None:
    """Credentials never travel in a task: a node whose environment has none reads the bucket
    anonymously, is refused, and its row says so; the others go without it and load."""
    with node_without(cluster, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") as bare:
        done = fleet("load", SHARDED, "--address", cluster.address, "--no-bound")
    assert done.returncode == 1, done.stderr
    assert SECRET_KEY not in done.stdout + done.stderr
    rows = {node["node_id"]: node["runs"][0] for node in document_of(done)["nodes"]}
    assert len(rows) == NODES + 1
    refused = rows.pop(bare)
    assert refused["status"] == "failed" and refused["withdrew"]
    assert "which was anonymous: no credentials were found" in refused["error"]
    total = open_model(SHARDED).total_bytes
    assert [(r["status"], r["bytes"]) for r in rows.values()] == [("ok", total)] * NODES
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"modelmon: node {bare[:12]} ") and "anonymous" in last


def _fleet_tasks_loading(cluster: Any) -> list[int]:
    """This cluster's fleet task processes, on nodes other than the head, whose load's worker
    is running: another cluster's on this machine (another test's, another run's) is not
    one of them, nor an idle Ray worker of an earlier round."""
    raylets = {_raylet(node) for node in cluster.worker_nodes}
    return sorted(
        pid
        for pid in _pids()
        if _cmdline(pid).startswith(b"ray::modelmon-fleet-")
        and _parent(pid) in raylets
        and any(SPAWNED in _cmdline(kid) for kid in _children(pid))
    )


def test_a_node_that_dies_mid_stream_fails_the_fleet_and_the_others_stop_streaming(
    cluster: Any, bucket: Any
) -> None:
    """Two nodes stream the bucket (one connection each); the bucket then holds every load
    GET unanswered, so no load can end before one node's task is killed. The fleet fails
    naming that task; the other node is stopped and closes its stream."""
    loaded = 4  # load GETs answered before the bucket holds the rest: the loads are streaming
    bucket.proxy.faults = Faults(silent=True, conditional=True, after=loaded)
    command = [
        sys.executable, "-m", "modelmon", "fleet", "load", "s3://models/large/", "--address",
        cluster.address, "--nodes", "2", "--workers", "1", "--threads", "1", "--chunk-mib",
        "0.0625", "--no-bound", "--json",
        "--storage-timeout", "3600",  # a held GET is stopped, never given up on meanwhile
    ]  # fmt: skip
    driver = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while bucket.proxy.held() < 2:  # one GET in flight a node: each node's is held
            assert driver.poll() is None, driver.communicate()
            assert time.monotonic() < deadline, "the nodes never streamed"
            time.sleep(0.05)
        tasks = _fleet_tasks_loading(cluster)
        assert tasks, "no task of this cluster's nodes but the head's is loading"
        task = tasks[0]
        os.kill(task, signal.SIGKILL)
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 1, err
    assert _load_gets(bucket.proxy) == loaded + bucket.proxy.held() == loaded + 2
    rows = [node["runs"][0] for node in json.loads(out)["nodes"]]
    (died,) = [row for row in rows if row["status"] == "failed"]
    assert died["error"].startswith(f"its modelmon task (pid {task}) died"), died
    (other,) = [row for row in rows if row is not died]
    assert other["status"] == "cancelled" and other["error"].startswith("stopped: node ")
    deadline = time.monotonic() + 30
    while bucket.proxy.connections():  # every node's stream is closed, not left held
        assert time.monotonic() < deadline, "a node still streams from the bucket"
        time.sleep(0.05)
