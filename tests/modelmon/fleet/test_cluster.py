"""``modelmon fleet`` on a real multi-node Ray cluster: three raylets on this machine's loopback.

Every node is a real Ray node (its own raylet, object store and worker processes); they share
this machine's disk, so the test shows the scheduling, the barrier and the report, not the
storage of a real cluster.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelmon.core import open_model

ray = pytest.importorskip(
    "ray",
    reason="Ray is the optional fleet extra (~110 MB download, ~330 MB installed): "
    "pip install -e '.[fleet]' to run this test",
)
from ray.cluster_utils import Cluster  # noqa: E402

NODES = 3
LOOPBACK = "127.0.0.1"  # every node and all their traffic stay on this machine's loopback
SMALL_STORE = 80 << 20  # bytes of object store per node: the tasks return small records only


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
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


def fleet_json(*args: str) -> dict[str, Any]:
    """The console script, as users run it: the driver is its own process, so Ray's state in
    a driver (log files it never closes, its connection) is not this test process's."""

    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    done = subprocess.run(
        [sys.executable, "-m", "modelmon", "fleet", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout, parse_constant=refuse)
    assert isinstance(document, dict)
    return document


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
    starts = []
    for node in nodes:
        (run,) = node["runs"]
        assert run["status"] == "ok", run["error"]
        assert run["bytes"] == total and node["mbps"] > 0 and node["seconds"] > 0
        assert run["cache"]["requested"] == "cold" and run["cache"]["resident_before"] <= 0.01
        assert node["peak_rss"] > 0 and node["storage"]
        starts.append(run["start_wall"])
    assert max(starts) - min(starts) < 0.5  # the barrier: all nodes went together
    aggregate = document["aggregate"]
    assert aggregate["nodes"] == NODES and aggregate["start_spread_s"] < 0.5
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
    assert all(r["start_spread_s"] < 0.5 for r in aggregate["B"]["rounds"])
    assert aggregate["b_over_a"] > 0
