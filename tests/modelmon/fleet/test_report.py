"""The fleet's report: node rows, aggregate, strict JSON and CSV, from nodes' runs."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import replace

import pytest

from modelmon.core import CacheState, ReadStats, StrategyConfig
from modelmon.core.options import LoadOptions
from modelmon.core.output import dumps
from modelmon.fleet.bucket import BOUND_ALL, BOUND_ONE
from modelmon.fleet.node import NodeRun
from modelmon.fleet.report import FleetResult, Side, render_fleet, spread

COLD = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
LOAD = Side("load", StrategyConfig("sequential", LoadOptions(workers=2, cache="cold")))


def node_run(node: str, seconds: float, start: float, *, side: str = "load", round_: int = 0,
             megabytes: int = 100, status: str = "ok") -> NodeRun:  # fmt: skip
    return NodeRun(
        node_id=node,
        host=f"host-{node}",
        side=side,
        round=round_,
        spec="sequential workers=2 cache=cold",
        status=status,
        error=None if status == "ok" else "worker 0 failed: OSError: gone",
        bytes=megabytes * 1_000_000 if status == "ok" else 0,
        seconds=seconds if status == "ok" else 0.0,
        start_wall=start if status == "ok" else 0.0,
        peak_rss=1 << 20,
        cache=COLD,
        storage=(),
    )


def strict(document: object) -> dict[str, object]:
    def refuse(constant: str) -> None:
        raise ValueError(constant)

    parsed = json.loads(dumps(document), parse_constant=refuse)
    assert isinstance(parsed, dict)
    return parsed


def test_load_rows_and_aggregate() -> None:
    runs = (
        node_run("n1", 1.0, 1000.00),
        node_run("n2", 2.0, 1000.10),
        node_run("n3", 4.0, 1000.05),
    )
    result = FleetResult("load", "/m", (LOAD,), runs)
    document = strict(result.to_dict())

    assert document["status"] == "ok"
    nodes = document["nodes"]
    assert isinstance(nodes, list) and [n["node_id"] for n in nodes] == ["n1", "n2", "n3"]
    assert [n["seconds"] for n in nodes] == [1.0, 2.0, 4.0]
    assert [n["mbps"] for n in nodes] == [100.0, 50.0, 25.0]
    assert nodes[1]["runs"][0]["start_offset_s"] == pytest.approx(0.10)
    aggregate = document["aggregate"]
    assert isinstance(aggregate, dict)
    assert aggregate["seconds"]["p50"] == 2.0 and aggregate["seconds"]["max"] == 4.0
    assert aggregate["seconds"]["p99"] == pytest.approx(2.0 + 0.98 * 2.0)
    assert aggregate["mbps"]["max"] == 100.0 and aggregate["mbps"]["min"] == 25.0
    straggler = aggregate["straggler"]
    assert straggler["node_id"] == "n3" and straggler["host"] == "host-n3"
    assert straggler["ratio"] == 2.0
    # 300 MB from the first go (1000.00) to the last end (1000.05 + 4.0).
    assert aggregate["total_mbps"] == pytest.approx(300 / 4.05)
    assert aggregate["start_spread_s"] == pytest.approx(0.10)
    assert "straggler: host-n3" in render_fleet(result)


def test_a_failed_node_is_its_row_and_stays_out_of_the_spread() -> None:
    runs = (node_run("n1", 1.0, 5.0), node_run("n2", 0.0, 0.0, status="failed"))
    result = FleetResult("load", "/m", (LOAD,), runs)
    document = strict(result.to_dict())
    assert document["status"] == "failed"
    assert document["nodes"][1]["seconds"] is None
    assert document["aggregate"]["nodes"] == 1
    assert "failed: worker 0 failed" in render_fleet(result)


def test_each_run_says_when_its_node_arrived_at_the_barrier_and_how_long_it_waited() -> None:
    """No node goes before the last one arrived: the rows say when each arrived and went,
    and how long it waited there (the node that waited least held the others up)."""
    runs = (
        replace(node_run("n1", 1.0, 1000.50), arrived_wall=998.00),
        replace(node_run("n2", 1.0, 1000.52), arrived_wall=1000.40),
        node_run("n3", 0.0, 0.0, status="failed"),  # it failed before it arrived
    )
    document = strict(FleetResult("load", "/m", (LOAD,), runs).to_dict())
    rows = [node["runs"][0] for node in document["nodes"]]
    assert [r["arrived_wall"] for r in rows] == [998.00, 1000.40, None]
    assert [r["start_wall"] for r in rows] == [1000.50, 1000.52, None]
    assert rows[0]["waited_s"] == pytest.approx(2.50)
    assert rows[1]["waited_s"] == pytest.approx(0.12)
    assert rows[2]["waited_s"] is None


def test_bench_nests_each_side_and_compares_the_totals() -> None:
    sides = (
        Side("A", StrategyConfig("sequential", LoadOptions(workers=2))),
        Side("B", StrategyConfig("mmap-shared-fd", LoadOptions(workers=2))),
    )
    runs = []
    for pair in range(2):
        base = 1000.0 + 100.0 * pair
        runs += [node_run(n, 2.0, base, side="A", round_=2 * pair) for n in ("n1", "n2")]
        runs += [node_run(n, 1.0, base + 10, side="B", round_=2 * pair + 1) for n in ("n1", "n2")]
    result = FleetResult("bench", "/m", sides, tuple(runs))
    document = strict(result.to_dict())
    aggregate = document["aggregate"]
    assert aggregate["A"]["total_mbps"] == pytest.approx(100.0)
    assert aggregate["B"]["total_mbps"] == pytest.approx(200.0)
    assert aggregate["b_over_a"] == pytest.approx(2.0)
    assert len(aggregate["A"]["rounds"]) == 2
    node = document["nodes"][0]
    assert node["A"] == {"seconds": 2.0, "mbps": 50.0, "requests": None}
    assert node["B"]["seconds"] == 1.0
    assert len(node["runs"]) == 4

    rows = list(csv.DictReader(io.StringIO(result.csv_bytes().decode())))
    assert len(rows) == 8
    assert {r["side"] for r in rows} == {"A", "B"}
    assert rows[0]["mbps"] == "50.000" and rows[0]["cold"] == "True"


def test_spread_of_nothing_is_none() -> None:
    assert spread([]) == {"p50": None, "p99": None, "max": None, "min": None}
    assert spread([3.0])["p99"] == 3.0


def _reads(gets: int, throttles: int, ttfb_s: float) -> ReadStats:
    return ReadStats(gets, 100_000_000, 1.0, ttfb_s, 2 * ttfb_s, throttles, throttles, 0, ())


def test_a_bucket_fleet_sums_its_requests_and_sets_its_rate_against_the_bound() -> None:
    """Per node its requests; in all, GETs and throttles summed, time to first byte the
    median of the nodes' and the largest p99; the storage's rate against the bound measured
    from every node at once, and that against N times one node alone."""
    side = Side("load", StrategyConfig("ranged", LoadOptions(threads=4, cache="cold")))
    loads = (
        replace(node_run("n1", 1.0, 1000.0), reads=_reads(12, 0, 0.010)),
        replace(node_run("n2", 2.0, 1000.0), reads=_reads(12, 3, 0.030)),
    )
    bounds = (
        node_run("n1", 0.5, 2000.0, side=BOUND_ONE, round_=1),  # 200 MB/s alone
        node_run("n1", 1.0, 3000.0, side=BOUND_ALL, round_=2),
        node_run("n2", 1.0, 3000.0, side=BOUND_ALL, round_=2),  # 200 MB/s in all
    )
    result = FleetResult("load", "s3://b/m/", (side,), loads + bounds, (4, 8 << 20))
    document = strict(result.to_dict())
    requests = document["aggregate"]["requests"]
    assert (requests["gets"], requests["throttles"], requests["retries"]) == (24, 3, 3)
    assert requests["ttfb_median_s"] == pytest.approx(0.020)
    assert requests["ttfb_p99_s"] == pytest.approx(0.060)
    assert document["nodes"][1]["requests"]["throttles"] == 3
    bound = document["bound"]
    assert bound["one_node"]["mbps"] == pytest.approx(200.0)
    assert bound["all_nodes"] == {"nodes": 2, "mbps": pytest.approx(200.0)}
    assert bound["scaling"] == pytest.approx(0.5)
    # The loads: 200 MB from 1000.0 to 1002.0, 100 MB/s; half the all-at-once bound.
    assert bound["of_bound"]["load"] == pytest.approx(0.5)
    text = render_fleet(result)
    assert "12 GETs, first byte 30.0 ms (p99 60.0 ms), 3 throttled, 3 retried" in text
    assert "2 nodes at once: 200 MB/s in all (50% of 2 × one node alone)" in text
    assert "[load] storage served 50% of the all-at-once bound" in text
    rows = list(csv.DictReader(io.StringIO(result.csv_bytes().decode())))
    assert [r["gets"] for r in rows] == ["12", "12", "", "", ""]


def test_a_bucket_fleet_that_failed_says_its_requests_and_that_the_bound_was_not_measured() -> None:
    side = Side("load", StrategyConfig("ranged", LoadOptions(cache="cold")))
    throttled = replace(node_run("n1", 0.0, 0.0, status="failed"), reads=_reads(1, 1, math.nan))
    result = FleetResult("load", "s3://b/m/", (side,), (throttled,), (4, 8 << 20))
    text = render_fleet(result)
    assert "failed: worker 0 failed: OSError: gone; 1 GET, no first byte timed, 1 throttled" in text
    assert text.endswith("  not measured: no node loaded the model")
