"""``modelmon bench --ranks N``: an A/B of N ranks a side on this node, the slowest rank's
time compared and each side's node memory beside it; bad input, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelmon.core import open_model, write_safetensors_model

from ...core.system.test_memory_cgroup import REAL


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """68 MB: four whole copies on the node are far more than one shared copy."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("ranked"), layers=2, hidden=1024, vocab=4096, seed=31
    )


def strict(text: str) -> dict[str, object]:
    def refuse(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    document = json.loads(text, parse_constant=refuse)
    assert isinstance(document, dict)
    return document


@REAL  # the node's memory is its cgroup's: held and the split are measured only there
def test_whole_against_one_reader_compares_the_slowest_rank_and_shows_each_nodes_memory(
    modelmon, model: Path
) -> None:
    done = modelmon(
        "bench", str(model), "--a", "sequential", "--b", "sequential", "--ranks", "4",
        "--a-ranks-mode", "whole", "--b-ranks-mode", "one-reader", "-n", "1", "--json",
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = strict(done.stdout)
    total = open_model(model).total_bytes
    a, b = document["a"], document["b"]
    assert isinstance(a, dict) and isinstance(b, dict)
    assert (document["ranks"], a["mode"], b["mode"]) == (4, "whole", "one-reader")
    runs = document["runs"]
    assert isinstance(runs, list) and [r["side"] for r in runs] == ["A", "B"]
    for run in runs:  # each a ranks run as load --ranks writes it, from a verified cold cache
        assert run["status"] == "ok" and len(run["ranks"]) == 4 and run["cache"]["cold"]
        assert run["mbps"] == pytest.approx(total / run["seconds"] / 1e6, rel=1e-3)
    # The figure compared is the slowest rank's time: B/A is A's over B's.
    (ratio,) = document["ratios"]
    assert ratio == pytest.approx(runs[0]["seconds"] / runs[1]["seconds"], rel=1e-6)
    assert a["median_seconds"] == runs[0]["seconds"] and b["median_seconds"] == runs[1]["seconds"]
    # Each side's node memory, measured in its cgroup: four copies against one shared copy.
    for side in (a, b):
        node = side["node"]
        assert node["measured"] and node["peak_bytes"] > 0 and node["held_peak_bytes"] > 0
    assert a["node"]["peak_bytes"] > b["node"]["peak_bytes"]
    assert a["node"]["held_peak_bytes"] > max(2 * total, b["node"]["held_peak_bytes"])
    assert (a["read_bytes"], b["read_bytes"]) == (4 * total, total)


@REAL
def test_the_text_names_modes_node_memory_and_the_limit_the_node_ran_in(
    modelmon, model: Path
) -> None:
    done = modelmon(
        "bench", str(model), "--a", "sequential", "--b", "direct", "--ranks", "2",
        "--ranks-mode", "slice", "-n", "1", "--memory-limit", "512Mi", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "2 ranks a side, each run from a cold cache"
    assert "slowest rank s" in lines[1] and "node peak (× model)" in lines[1]
    assert lines[2].split()[:3] == ["A", "slice", "sequential"]
    assert lines[3].split()[:3] == ["B", "slice", "direct"]
    for row in lines[2:4]:  # node memory binary (as a limit is given), data decimal
        assert "MiB (" in row and " MB (" not in row, row
    assert any(line.startswith("verdict: ") for line in lines)
    for side in ("A", "B"):  # the node ran in one cgroup of the limit
        assert any(line.startswith(f"{side} limit: memory limit 512 MiB") for line in lines)


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--ranks", "0"], "argument --ranks: must be a whole number from 1 to 256, not '0'"),
        (["--ranks-mode", "one-reader"], "--ranks-mode is how --ranks N ranks get their"),
        (["--b-ranks-mode", "slice"], "--b-ranks-mode is how --ranks N ranks get their"),
        (
            ["--ranks", "33", "--ranks-mode", "slice"],
            "A (slice, sequential): 33 slice ranks, but no weight of the model splits 33 ways",
        ),
        (
            ["--ranks", "2", "--b", "mmap-view", "--b-ranks-mode", "one-reader"],
            "B (one-reader, mmap-view): one-reader needs a strategy that reads into memory",
        ),
        (
            ["--ranks", "2", "--b", "cmd: cat {path}"],
            "--b cmd: cat {path}: --ranks runs modelmon's strategies as N ranks",
        ),
        (
            ["--ranks", "2", "--a", "engine: runai"],
            "--a engine: runai: --ranks runs modelmon's strategies as N ranks",
        ),
    ],
)
def test_bad_ranks_input_is_one_line(modelmon, tmp_path: Path, flags: list[str], said: str) -> None:
    # Its widest weights split 32 ways: 32 rows of its MLP, its vocabulary, its columns.
    tiny = write_safetensors_model(tmp_path, layers=1, hidden=16, intermediate=32, vocab=32)
    sides = {"--a": "sequential", "--b": "pread"}
    for flag in ("--a", "--b"):
        if flag in flags:
            at = flags.index(flag)
            sides[flag] = flags[at + 1]
            flags = flags[:at] + flags[at + 2 :]
    done = modelmon("bench", str(tiny), "--a", sides["--a"], "--b", sides["--b"], *flags)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("modelmon: ") and said in done.stderr
