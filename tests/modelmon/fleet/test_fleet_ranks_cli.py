"""``fleet load|bench --ranks N``: what every node is asked to run, and bad input refused in
one line before Ray is imported or a cluster asked for anything."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from modelmon.cli import main
from modelmon.core import write_safetensors_model
from modelmon.fleet.report import FleetResult

from .test_fleet_cli import stand_in_cluster


@pytest.mark.parametrize(
    ("args", "asked"),
    [
        (["load", "--ranks", "4", "--ranks-mode", "one-reader"], {"load": (4, "one-reader")}),
        (["load", "--ranks", "2"], {"load": (2, "whole")}),
        (["load"], {"load": None}),  # one loader a node, as before
        (
            ["bench", "--a", "sequential", "--b", "pread", "--ranks", "2", "--b-ranks-mode",
             "slice"],
            {"A": (2, "whole"), "B": (2, "slice")},
        ),
        (
            ["bench", "--a", "sequential", "--b", "pread", "--ranks", "3", "--ranks-mode",
             "one-reader", "--a-ranks-mode", "whole"],
            {"A": (3, "whole"), "B": (3, "one-reader")},
        ),
    ],
)  # fmt: skip
def test_every_node_is_asked_for_its_ranks_and_their_mode(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], asked: dict[str, Any]
) -> None:
    seen: dict[str, Any] = {}

    def run_fleet(verb: str, path: str, sides: list[Any], *_: object, **__: Any) -> Any:
        seen.update({side.label: side.ranks for side in sides})
        return FleetResult(verb, path, tuple(sides), ())

    stand_in_cluster(monkeypatch, run_fleet)
    verb, *rest = args
    assert main(["fleet", verb, str(sharded_model), *rest, "--json"]) == 0
    assert seen == asked


@pytest.mark.parametrize(("flags", "limit"), [(["--memory-limit", "512Mi"], 512 << 20), ([], None)])
def test_every_nodes_ranks_are_asked_to_run_under_the_memory_limit(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str], limit: int | None
) -> None:
    seen: dict[str, Any] = {}

    def run_fleet(verb: str, path: str, sides: list[Any], *_: object, **options: Any) -> Any:
        seen["limit"] = options["memory_limit"]
        return FleetResult(verb, path, tuple(sides), ())

    stand_in_cluster(monkeypatch, run_fleet)
    arguments = ["fleet", "load", str(sharded_model), "--ranks", "2", *flags, "--json"]
    assert main(arguments) == 0
    assert seen == {"limit": limit}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["load", "--memory-limit", "512Mi"],
            "--memory-limit is the cgroup of each node's --ranks N ranks: give --ranks",
        ),
        (
            ["bench", "--a", "pread", "--b", "pread", "--memory-limit", "512Mi"],
            "--memory-limit is the cgroup of each node's --ranks N ranks: give --ranks",
        ),
        (["load", "--ranks", "257"], "argument --ranks: must be a whole number from 1 to 256"),
        (
            ["bench", "--a", "pread", "--b", "engine: transformers", "--ranks", "2"],
            "--b engine: transformers: --ranks runs modelmon's strategies as N ranks",
        ),
        (
            ["load", "--ranks", "2", "--ranks-mode", "one-reader", "--discard"],
            "one-reader keeps one shared copy: it cannot discard",
        ),
        (["load", "--ranks", "0"], "argument --ranks: must be a whole number from 1 to 256"),
        (["load", "--ranks-mode", "slice"], "--ranks-mode is how --ranks N ranks get"),
        (
            ["bench", "--a", "pread", "--b", "pread", "--a-ranks-mode", "slice"],
            "--a-ranks-mode is how --ranks N ranks get",
        ),
        (
            ["bench", "--a", "cmd: cat {path}", "--b", "pread", "--ranks", "2"],
            "--a cmd: cat {path}: --ranks runs modelmon's strategies as N ranks",
        ),
        (
            ["load", "--ranks", "33", "--ranks-mode", "slice", "--strategy", "sequential"],
            "[load] sequential cache=cold: 33 slice ranks, but no weight of the model splits 33",
        ),
        (
            ["bench", "--a", "pread", "--b", "mmap-view", "--ranks", "2", "--ranks-mode",
             "one-reader"],
            "[B] mmap-view cache=cold: one-reader needs a strategy that reads into memory",
        ),
    ],
)  # fmt: skip
def test_bad_ranks_input_is_one_line_before_ray(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    said: str,
) -> None:
    # Its widest weights split 32 ways: 32 rows of its MLP, its vocabulary, its columns.
    tiny = write_safetensors_model(tmp_path, layers=1, hidden=16, intermediate=32, vocab=32)
    monkeypatch.setitem(sys.modules, "ray", None)  # any import of Ray would fail the test
    verb, *rest = args
    code = None
    try:
        code = main(["fleet", verb, str(tiny), *rest])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    (line,) = capsys.readouterr().err.splitlines()
    assert code == 2 and line.startswith("modelmon: ") and said in line, line
