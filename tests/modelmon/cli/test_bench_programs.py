"""``modelmon bench`` with programs as configurations: a command or an engine beside a
strategy, each run watched; a failing command stops the A/B with its exit code and reason."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model

from .conftest import RunCli

READER = "import sys; f = open(sys.argv[1], 'rb', buffering=0)\nwhile f.read(1 << 20): pass"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench-programs")
    write_safetensors_model(folder, layers=2, hidden=512, vocab=4096, seed=5)
    return folder


def test_a_command_against_a_strategy(modelmon: RunCli, folder: Path) -> None:
    command = f'cmd: {sys.executable} -c "{READER}" {{path}}/model.safetensors'
    done = modelmon(
        "bench", str(folder), "--a", command, "--b", "engine: safetensors", "-n", "1", "--json"
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["a"]["spec"].startswith("cmd: ") and report["b"]["spec"] == "engine: safetensors"
    for run in report["runs"]:
        assert run["status"] == "ok" and run["cache"]["cold"]
        assert run["watched"]["arrived_bytes"] == run["bytes"] > 0
    assert len(report["ratios"]) == 1


def test_a_failing_command_stops_the_ab_with_its_reason(modelmon: RunCli, folder: Path) -> None:
    failing = f"cmd: {sys.executable} -c \"import sys; sys.exit('out of memory')\" {{path}}"
    done = modelmon("bench", str(folder), "--a", "sequential", "--b", failing, "-n", "1")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "modelmon: A/B stopped: B run 1 failed: exit code 1: out of memory"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--b", "cmd: cat {path}", "--cache", "warm"], "use a cold cache"),
        (["--b", "engine: llamacpp load_mode=fast"], "bench --b: load_mode must be one of"),
        (["--b", "cmd: 'unclosed"], "bench --b: cmd:"),
    ],
)
def test_program_specs_are_checked_before_anything_runs(
    modelmon: RunCli, folder: Path, args: list[str], said: str
) -> None:
    done = modelmon("bench", str(folder), "--a", "sequential", *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1
