"""The fresh-process harness with a child of the test's own that speaks its protocol: the
child's figures come back with the cache state the parent measured; a child that never gets
ready, or overruns its time limit, or dies, ends the run with the reason and is ended."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

from modelmon.core.loading.fresh import run_fresh

CHILD = """
import json, sys, time
behaviour = sys.argv[1]
if behaviour == "never ready":
    time.sleep(120)
print("ready", flush=True)
if sys.stdin.readline().strip() != "go":
    sys.exit(3)
if behaviour == "hangs":
    time.sleep(120)
if behaviour == "dies":
    sys.exit(7)
print(json.dumps({"bytes": 1000, "seconds": 0.5, "peak_rss": 4096, "rss_ready": 2048}), flush=True)
"""


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(1 << 20))
    return [str(path)]


def child(behaviour: str) -> list[str]:
    return [sys.executable, "-c", CHILD, behaviour]


def test_the_child_s_own_figures_and_the_measured_cache_state(files: list[str]) -> None:
    done = run_fresh(child("loads"), files, "cold")
    assert done.status == "ok" and done.error is None
    assert (done.bytes, done.seconds, done.peak_rss, done.rss_ready) == (1000, 0.5, 4096, 2048)
    assert done.mbps == 1000 / 0.5 / 1e6
    assert done.state is not None and done.state.requested == "cold"
    assert done.cold == done.state.cold


def test_a_child_that_never_gets_ready_is_not_ready(files: list[str]) -> None:
    done = run_fresh(child("never ready"), files, "keep", ready_timeout_s=0.2)
    assert done.status == "cancelled" and done.error == "not ready" and done.state is None


def test_a_child_past_its_time_limit_is_stopped_there(files: list[str]) -> None:
    done = run_fresh(child("hangs"), files, "keep", time_limit_s=0.2)
    assert done.status == "cancelled" and done.error == "stopped at the time limit of 0.2 s"
    assert done.state is not None  # it got as far as go


def test_a_stop_ends_the_wait_and_a_dead_child_is_named(files: list[str]) -> None:
    stop = threading.Event()
    stop.set()
    stopped = run_fresh(child("hangs"), files, "keep", stop=stop)
    assert stopped.status == "cancelled" and stopped.error == "stopped"
    died = run_fresh(child("dies"), files, "keep", who="the test's child")
    assert died.status == "failed"
    assert died.error is not None and died.error.startswith("the test's child (pid ")
    assert "exit" in died.error and "7" in died.error


def test_a_time_limit_is_said_to_a_few_digits() -> None:
    """A limit the race computed (0.572813 s) is said as 0.573 s, a long one in whole seconds."""
    from modelmon.core.loading.result import cancelled_error

    assert cancelled_error("cancelled", True, 0.572813) == "stopped at the time limit of 0.573 s"
    assert cancelled_error("cancelled", True, 20.0) == "stopped at the time limit of 20 s"
    assert cancelled_error("cancelled", True, 1234.4) == "stopped at the time limit of 1234 s"
