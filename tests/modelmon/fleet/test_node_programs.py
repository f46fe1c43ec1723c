"""A program side of ``fleet bench`` on one node (no Ray: the barrier is two callables): its
cache is verified before the node arrives, its command starts only when every node goes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelmon.core import CacheState, write_safetensors_model
from modelmon.core.configuration import parse_program
from modelmon.fleet.node import NodeRequest, load_on_node

READER = "import sys; f = open(sys.argv[1], 'rb', buffering=0)\nwhile f.read(1 << 20): pass"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(tmp_path_factory.mktemp("node-programs"), layers=2, hidden=256)


def _request(model: Path, spec: str) -> NodeRequest:
    return NodeRequest(str(model), parse_program(spec), "A", 0)


def _never_aborts(node: str, reason: str) -> None:
    raise AssertionError(f"the node arrived, it must not abort: {reason}")


def test_a_command_on_a_node_goes_with_the_others_from_a_verified_cold_cache(model: Path) -> None:
    seen: list[tuple[float, bool]] = []

    def arrive(node: str) -> tuple[float | None, str | None]:
        from modelmon.core.system import residency_of

        seen.append((time.time(), residency_of(str(model)) <= 0.01))
        return time.time(), None

    spec = f'cmd: {sys.executable} -c "{READER}" {{path}}'
    run = load_on_node(_request(model, spec), "node-a", arrive, _never_aborts)
    assert run.status == "ok", run.error
    assert run.bytes == model.stat().st_size and run.mbps > 0
    assert isinstance(run.cache, CacheState) and run.cache.cold
    assert seen and seen[0][1]  # nothing of it cached when the node arrived
    assert run.start_wall >= seen[0][0] and run.spec.startswith("cmd: ")


def test_a_broken_barrier_never_starts_the_command(model: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    spec = f"cmd: {sys.executable} -c \"open({str(marker)!r}, 'w')\" {{path}}"
    run = load_on_node(
        _request(model, spec), "node-b", lambda node: (None, "node c died"), _never_aborts
    )
    assert run.status in ("failed", "cancelled")
    assert run.error == "did not start: node c died"
    assert not marker.exists()


def test_a_failing_command_is_the_nodes_failed_row(model: Path) -> None:
    spec = f"cmd: {sys.executable} -c \"import sys; sys.exit('no such device')\" {{path}}"
    run = load_on_node(
        _request(model, spec), "node-d", lambda node: (time.time(), None), _never_aborts
    )
    assert run.status == "failed" and run.error == "exit code 1: no such device"


@pytest.mark.parametrize("fatal", [False, True])
def test_a_round_stopped_by_another_node_stops_the_command(
    model: Path, tmp_path: Path, fatal: bool
) -> None:
    """The stop watch covers a program side too: once the command runs, the round is
    stopped (another node died); the command is ended and the row says why."""
    started = tmp_path / "started"
    code = f"import os, time; open({str(started)!r}, 'w').write(str(os.getpid())); time.sleep(3600)"
    spec = f'cmd: {sys.executable} -c "{code}" {{path}}'

    def stopped(timeout_s: float) -> tuple[str, bool] | None:
        if started.exists() and started.read_text():
            return "node c failed: SIGKILL", fatal
        time.sleep(timeout_s)  # the cluster's own check waits this long for news
        return None

    run = load_on_node(
        _request(model, spec),
        "node-e",
        lambda node: (time.time(), None),
        _never_aborts,
        stopped,
    )
    assert run.status == ("failed" if fatal else "cancelled")
    assert run.error == "stopped: node c failed: SIGKILL"
    assert not Path(f"/proc/{started.read_text()}").exists()  # the command was ended


def test_fleet_bench_refuses_a_warm_program_before_ray(model: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "modelmon",
            "fleet",
            "bench",
            str(model),
            "--a",
            "sequential",
            "--b",
            "cmd: cat {path}",
            "--cache",
            "warm",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2 and "cold cache only" in done.stderr
