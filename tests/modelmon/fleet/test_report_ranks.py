"""The fleet's report of N ranks a node: each node's slowest rank, its memory and what it
read; across the fleet the slowest node; and a fleet of one loader a node as it was."""

from __future__ import annotations

import csv
import io
from dataclasses import replace

import pytest

from modelmon.core import StrategyConfig
from modelmon.core.options import LoadOptions
from modelmon.core.system import MemoryLimit
from modelmon.fleet.node import NodeRun
from modelmon.fleet.ranks import NodeRanks
from modelmon.fleet.report import CSV_FIELDS, FleetResult, Side, render_fleet

from .test_report import LOAD, node_run, strict

MODEL_BYTES = 50_000_000
LIMIT = MemoryLimit(
    limit_bytes=512 << 20, peak_bytes=300_000_000, anon_peak_bytes=200_000_000,
    cache_peak_bytes=100_000_000, mapped_peak_bytes=0, anon_at_peak_bytes=200_000_000,
    cache_at_peak_bytes=100_000_000, reread_bytes=0, oom_killed=False, oom_kills=0,
    limit_hits=0, pressure_stall_s=0.0, cgroup="/sys/fs/cgroup/modelmon-1-2-0", version=2,
    held_peak_bytes=210_000_000,
)  # fmt: skip
RANKED = Side("load", StrategyConfig("sequential", LoadOptions(cache="cold")), (4, "whole"))


def ranked_run(node: str, seconds: float, start: float, peak: int, held: int) -> NodeRun:
    ranks = NodeRanks(
        ranks=4,
        mode="whole",
        model_bytes=MODEL_BYTES,
        read_bytes=4 * MODEL_BYTES,
        rank_seconds=(seconds / 2, seconds, seconds / 3, seconds / 4),
        peak_bytes=peak,
        anon_peak_bytes=held,
        cache_peak_bytes=peak - held,
        held_peak_bytes=held,
        measured=True,
    )
    return replace(node_run(node, seconds, start, megabytes=200), ranks=ranks)


def test_each_node_says_its_slowest_rank_memory_and_reads_and_the_fleet_its_slowest_node() -> None:
    runs = (
        ranked_run("n1", 1.0, 1000.0, 220_000_000, 200_000_000),
        ranked_run("n2", 2.0, 1000.1, 230_000_000, 205_000_000),
        ranked_run("n3", 4.0, 1000.0, 240_000_000, 210_000_000),
    )
    result = FleetResult("load", "/m", (RANKED,), runs)
    document = strict(result.to_dict())
    nodes = document["nodes"]
    assert [n["seconds"] for n in nodes] == [1.0, 2.0, 4.0]  # each node's slowest rank
    assert [n["mbps"] for n in nodes] == [50.0, 25.0, 12.5]  # the model over it
    assert nodes[2]["node_peak_bytes"] == 240_000_000
    assert nodes[2]["node_held_peak_bytes"] == 210_000_000
    assert nodes[2]["read_bytes"] == 4 * MODEL_BYTES
    (run,) = nodes[2]["runs"]
    assert run["bytes"] == 4 * MODEL_BYTES and run["ranks"]["slowest_rank"] == 1
    assert run["ranks"]["rank_seconds"] == [2.0, 4.0, 4 / 3, 1.0]
    aggregate = document["aggregate"]
    assert (aggregate["ranks"], aggregate["mode"]) == (4, "whole")
    assert aggregate["node_peak_bytes"]["max"] == 240_000_000
    assert aggregate["node_held_peak_bytes"]["min"] == 200_000_000
    assert aggregate["node_peak_bytes"]["p50"] == 230_000_000  # bytes: whole numbers
    assert isinstance(aggregate["node_peak_bytes"]["p99"], int)
    assert aggregate["slowest_node"] == {
        "node_id": "n3",
        "host": "host-n3",
        "seconds": 4.0,
        "slowest_rank": 1,
    }
    text = render_fleet(result)
    assert "[load] sequential cache=cold · 4 ranks a node, whole" in text
    assert "4.000 s (slowest rank); node peak 229 MiB (4.8×), held 200 MiB (4.2×)" in text
    assert "slowest node: host-n3 n3, its slowest rank (1) at 4.000 s" in text
    rows = list(csv.DictReader(io.StringIO(result.csv_bytes().decode())))
    assert rows[2]["ranks"] == "4" and rows[2]["ranks_mode"] == "whole"
    assert rows[2]["slowest_rank"] == "1" and rows[2]["node_held_peak_bytes"] == "210000000"
    assert rows[2]["mbps"] == "12.500"


def test_one_loader_a_node_keeps_its_json_and_csv() -> None:
    runs = (node_run("n1", 1.0, 1000.0), node_run("n2", 2.0, 1000.1))
    result = FleetResult("load", "/m", (LOAD,), runs)
    document = strict(result.to_dict())
    assert set(document["aggregate"]) == {
        "spec", "nodes", "seconds", "mbps", "straggler", "total_mbps", "start_spread_s",
        "requests", "rounds",
    }  # fmt: skip
    for node in document["nodes"]:
        assert set(node) == {
            "node_id", "host", "storage", "peak_rss", "seconds", "mbps", "requests", "runs",
        }  # fmt: skip
        assert all("ranks" not in run for run in node["runs"])
    header = result.csv_bytes().decode().splitlines()[0]
    assert header == ",".join(CSV_FIELDS)
    assert "slowest node" not in render_fleet(result)


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_a_node_whose_ranks_did_not_load_stays_out_of_the_memory_spread(status: str) -> None:
    bad = replace(node_run("n2", 0.0, 0.0, status="failed"), status=status)
    runs = (ranked_run("n1", 1.0, 1000.0, 220_000_000, 200_000_000), bad)
    aggregate = strict(FleetResult("load", "/m", (RANKED,), runs).to_dict())["aggregate"]
    assert aggregate["node_peak_bytes"]["max"] == aggregate["node_peak_bytes"]["min"]
    assert aggregate["slowest_node"]["node_id"] == "n1"


def test_a_limited_side_says_its_limit_its_oom_kills_and_each_note_once() -> None:
    """``--memory-limit`` with ``--ranks``: the limit every node's ranks ran under, the OOM
    kills of their cgroups in all (a node that could make none counts none), a note that
    every node made said once."""
    note = "4 ranks on 2 CPUs share the cores"

    def limited(node: str, kills: int | None) -> NodeRun:
        run = ranked_run(node, 1.0, 1000.0, 220_000_000, 200_000_000)
        assert run.ranks is not None
        record = None if kills is None else replace(LIMIT, oom_kills=kills)
        ranks = replace(run.ranks, memory_limit=512 << 20, limit=record, notes=(note,))
        return replace(run, ranks=ranks)

    runs = (limited("n1", 0), limited("n2", 2), limited("n3", None))
    result = FleetResult("load", "/m", (RANKED,), runs)
    document = strict(result.to_dict())
    aggregate = document["aggregate"]
    assert (aggregate["memory_limit"], aggregate["oom_kills"]) == (512 << 20, 2)
    first = document["nodes"][0]["runs"][0]["ranks"]
    assert first["memory_limit"] == 512 << 20 and first["limit"]["limit_bytes"] == 512 << 20
    assert document["nodes"][2]["runs"][0]["ranks"]["limit"] is None
    text = render_fleet(result).splitlines()
    assert (
        "  each node's ranks in one 512 MiB cgroup (2 of 3 nodes could make one); OOM kills: 2"
        in text
    )
    assert text.count(f"  note: {note}") == 1
    rows = list(csv.DictReader(io.StringIO(result.csv_bytes().decode())))
    assert [(r["memory_limit"], r["oom_kills"]) for r in rows] == [
        (str(512 << 20), "0"),
        (str(512 << 20), "2"),
        (str(512 << 20), ""),
    ]


def test_a_ranks_bench_compares_the_slowest_nodes_time_not_the_bytes_read() -> None:
    """Whole (A) against one-reader (B): B's readers read a quarter of A's bytes, yet its
    job is ready twice as soon; B/A is A's slowest node's time over B's."""
    a_side = Side("A", RANKED.config, (4, "whole"))
    b_side = Side("B", RANKED.config, (4, "one-reader"))

    def one_reader(node: str, seconds: float) -> NodeRun:
        run = ranked_run(node, seconds, 1000.0, 150_000_000, 140_000_000)
        assert run.ranks is not None
        ranks = replace(run.ranks, mode="one-reader", read_bytes=MODEL_BYTES)
        return replace(run, side="B", round=1, bytes=MODEL_BYTES, ranks=ranks)

    runs = (
        replace(ranked_run("n1", 3.0, 1000.0, 220_000_000, 200_000_000), side="A"),
        replace(ranked_run("n2", 4.0, 1000.0, 230_000_000, 205_000_000), side="A"),
        one_reader("n1", 1.5),
        one_reader("n2", 2.0),
    )
    result = FleetResult("bench", "/m", (a_side, b_side), runs)
    aggregate = strict(result.to_dict())["aggregate"]
    assert aggregate["A"]["slowest_node"]["seconds"] == 4.0
    assert aggregate["B"]["slowest_node"]["seconds"] == 2.0
    assert aggregate["b_over_a"] == 2.0
    assert "B/A 2.00× (the slowest node's time: A's over B's)" in render_fleet(result)
