"""``modelmon fleet load|bench --ranks N`` on the loopback Ray cluster of ``test_cluster``:
N ranks on every node, from files and from a bucket, under a memory limit; a rank killed
mid-load, and Ctrl+C, leave no process, cgroup or reader behind."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from modelmon.core import open_model

from ...core.system.test_memory_cgroup import REAL
from ...memory_cgroup import run_cgroups_of
from . import test_cluster as bed
from .test_cluster import (
    NODES,
    SHARDED,
    _load_gets,
    _node_tasks_reading,
    _pids,
    assert_nothing_reads,
    fleet_json,
)

# The loopback cluster and its bucket, as test_cluster has them: this module's own.
fleet_bucket, bucket, cluster = bed.fleet_bucket, bed.bucket, bed.cluster
held_shared_model = bed.held_shared_model


def test_fleet_load_of_ranks_gives_each_nodes_slowest_rank_memory_and_requests(
    cluster: Any, bucket: Any
) -> None:
    """``--ranks 2``, every rank streaming the bucket (``whole``): each node's time is its
    slowest rank's, its bytes both ranks' reads, its requests both ranks' GETs (every GET
    the bucket answered, counted once), its memory the node's cgroup's."""
    document = fleet_json(
        "load", SHARDED, "--address", cluster.address, "--nodes", "2", "--no-bound",
        "--ranks", "2", "--threads", "2",
    )  # fmt: skip
    total = open_model(SHARDED).total_bytes
    nodes = document["nodes"]
    assert len(nodes) == 2
    for node in nodes:
        (run,) = node["runs"]
        assert run["status"] == "ok", run["error"]
        ranks = run["ranks"]
        assert (ranks["ranks"], ranks["mode"], ranks["read_bytes"]) == (2, "whole", 2 * total)
        assert node["seconds"] == run["seconds"] == max(ranks["rank_seconds"])
        assert node["read_bytes"] == run["bytes"] == 2 * total
        assert node["node_peak_bytes"] > 0 and node["requests"]["gets"] >= 6
    aggregate = document["aggregate"]
    assert (aggregate["ranks"], aggregate["mode"]) == (2, "whole")
    slowest = aggregate["slowest_node"]
    assert slowest["seconds"] == max(n["seconds"] for n in nodes)
    assert slowest["node_id"] in {n["node_id"] for n in nodes}
    assert aggregate["requests"]["gets"] == _load_gets(bucket.proxy)


@REAL  # the limit is each node's cgroup: made only where one can be
def test_fleet_bench_of_two_ranks_modes_runs_each_nodes_ranks_in_its_own_limited_cgroup(
    cluster: Any, sharded_model: Path, tmp_path: Path
) -> None:
    """Whole against one-reader, 2 ranks a node under 512 MiB: each side's rows say their
    mode, what the node's readers read (two models against one), and the node's cgroup of
    the limit (one a node and run, none OOM-killed); the CSV carries the same."""
    table = tmp_path / "ranks.csv"
    document = fleet_json(
        "bench", str(sharded_model), "--address", cluster.address, "--nodes", "2",
        "--a", "sequential", "--b", "sequential", "-n", "1", "--ranks", "2",
        "--b-ranks-mode", "one-reader", "--memory-limit", "512Mi", "--csv", str(table),
    )  # fmt: skip
    total = open_model(sharded_model).total_bytes
    limit = 512 << 20
    cgroups = set()
    for node in document["nodes"]:
        for run in node["runs"]:
            assert run["status"] == "ok", run["error"]
            ranks = run["ranks"]
            mode, copies = {"A": ("whole", 2), "B": ("one-reader", 1)}[run["side"]]
            assert (ranks["mode"], ranks["read_bytes"]) == (mode, copies * total)
            assert ranks["memory_limit"] == limit and ranks["limit"]["limit_bytes"] == limit
            assert ranks["limit"]["oom_kills"] == 0
            assert 0 < ranks["peak_bytes"] == ranks["limit"]["peak_bytes"] <= limit
            cgroups.add(ranks["limit"]["cgroup"])
        assert node["A"]["read_bytes"] == 2 * total and node["B"]["read_bytes"] == total
    assert len(cgroups) == 4  # a cgroup of its own for each node's ranks in each run
    for side in ("A", "B"):
        aggregate = document["aggregate"][side]
        assert (aggregate["memory_limit"], aggregate["oom_kills"]) == (limit, 0)
        assert aggregate["slowest_node"]["seconds"] == aggregate["seconds"]["max"]
    rows = list(csv.DictReader(table.open()))
    assert [(r["side"], r["ranks_mode"], r["memory_limit"]) for r in rows] == [
        ("A", "whole", str(limit)),
        ("A", "whole", str(limit)),
        ("B", "one-reader", str(limit)),
        ("B", "one-reader", str(limit)),
    ]
    assert not any(Path(c).exists() for c in cgroups)  # each removed with its run


def _fleet_driver(model: Path, address: str, *flags: str) -> subprocess.Popen[str]:
    command = [
        sys.executable, "-m", "modelmon", "fleet", "load", str(model), "--address", address,
        "--workers", "1", "--threads", "1", "--chunk-mib", "0.0625", "--cache", "keep",
        "--ranks", "2", *flags, "--json",
    ]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _every_node_reading(driver: subprocess.Popen[str], model: Path) -> dict[int, list[int]]:
    """Once every node's ranks (or reader) read the slow model: {task pid: its workers}."""
    deadline = time.monotonic() + 120
    while len(reading := _node_tasks_reading(model)) < NODES:
        assert driver.poll() is None, driver.communicate()
        assert time.monotonic() < deadline, "the nodes never all started reading"
        time.sleep(0.05)
    return reading


def _assert_nothing_left(tasks: list[int], model: Path) -> None:
    """No process reads the model, every node's task process's children are gone, and no
    cgroup named by a task process (``modelmon-PID-…``) is left where the run made it."""
    assert_nothing_reads(model)
    deadline = time.monotonic() + 30
    while True:
        kids = [p for p in _pids() if p in tasks or _parent_of(p) in tasks]
        left = [c.name for t in tasks for c in run_cgroups_of(t)]
        if not left and not [p for p in kids if p not in tasks]:
            return
        assert time.monotonic() < deadline, f"left behind: cgroups {left}, processes {kids}"
        time.sleep(0.1)


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


@REAL
def test_a_rank_killed_mid_load_fails_its_nodes_row_in_one_line_and_stops_the_others(
    cluster: Any, held_shared_model: SimpleNamespace
) -> None:
    model = held_shared_model.path
    driver = _fleet_driver(model, cluster.address, "--memory-limit", "1Gi")
    try:
        reading = _every_node_reading(driver, model)
        task = sorted(reading)[0]
        victim = reading[task][-1]
        os.kill(victim, signal.SIGKILL)
        held_shared_model.storage.release()  # the others stopped mid-load, not finished
        out, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 1, err  # LOAD_FAILED
    (line,) = err.strip().splitlines()[-1:]
    assert line.startswith("modelmon: node ") and f"(pid {victim}) was killed by SIGKILL" in line
    rows = [node["runs"][0] for node in json.loads(out)["nodes"]]
    (failed,) = [row for row in rows if row["status"] == "failed"]
    assert failed["error"].startswith("rank ") and "\n" not in failed["error"]
    others = [row for row in rows if row is not failed]
    assert [row["status"] for row in others] == ["cancelled"] * (NODES - 1), rows
    assert all(f"failed: {failed['error']}" in row["error"] for row in others)
    _assert_nothing_left(list(reading), model)


@REAL
@pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_ctrl_c_mid_load_ends_every_nodes_ranks_and_their_shared_copies(
    cluster: Any, held_shared_model: SimpleNamespace, stop: signal.Signals, code: int
) -> None:
    """One-reader, 2 ranks a node, each node's reader reading the slow model, which the
    storage holds past its middle: SIGINT to the driver ends it as a cancel (130), SIGTERM
    as one too (143: ``ray.init``'s own handler would exit 15), and every node's ranks,
    reader, cgroup and shared copy (a memfd: gone with the processes that hold it) with
    it."""
    model = held_shared_model.path
    driver = _fleet_driver(model, cluster.address, "--ranks-mode", "one-reader")
    try:
        reading = _every_node_reading(driver, model)
        # No load can end before the release: the signal comes mid-load on every node, as
        # late as this test may be. Released, the rest comes at the mount's slow pace: the
        # nodes are stopped mid-load, not left to finish.
        driver.send_signal(stop)
        held_shared_model.storage.release()
        _, err = driver.communicate(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == code, err
    _assert_nothing_left(list(reading), model)
    for task in reading:
        holds_memfd = False
        try:
            links = [os.readlink(f"/proc/{task}/fd/{fd}") for fd in os.listdir(f"/proc/{task}/fd")]
            holds_memfd = any(link.startswith("/memfd:") for link in links)
        except OSError:
            pass  # the task process itself is gone: its descriptors with it
        assert not holds_memfd, f"task {task} still holds a shared copy"
