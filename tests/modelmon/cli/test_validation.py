"""Every option of every verb is checked before anything is measured, against the engine's
own limits, and its error states the allowed range.

The model named is one that does not exist: a verb that measured first would fail on it with
exit code 3 (bad model), so exit code 2 and the range prove the option was refused first.
"""

from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path

import pytest

import modelmon.cli
import modelmon.core
from modelmon.core import StrategyConfig, open_model, recommend, run_ab
from modelmon.core.errors import OptionsError
from modelmon.core.limits import (
    DEFAULT_BUDGET_S,
    MAX_AB_PAIRS,
    MAX_BUDGET_S,
    MAX_SEARCH_WORKERS,
    MIN_BUDGET_S,
)
from modelmon.core.measuring import candidates
from modelmon.core.options import MAX_PARALLEL, LoadOptions
from modelmon.core.system import check_memory_limit, max_memory_limit

MISSING = "/nonexistent/model.safetensors"
USAGE = 2


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("recommend", MISSING, "--memory-limit", "0"), "from 1 MiB to"),
        (("recommend", MISSING, "--memory-limit", "512"), "from 1 MiB to"),
        (("recommend", MISSING, "--memory-limit", "64TiB"), "this machine's RAM"),
        (("recommend", MISSING, "--budget", "0.001"), "from 5 to 86400 s"),
        (("recommend", MISSING, "--budget", "1e12"), "from 5 to 86400 s"),
        (("recommend", MISSING, "--workers", "129"), "from 1 to 128"),
        (("load", MISSING, "--workers", "257"), "from 1 to 256"),
        (("load", MISSING, "--threads", "1000"), "from 1 to 256"),
        (("load", MISSING, "--chunk-mib", "0.001"), "from 0.00390625 to 1024 MiB"),
        (("load", MISSING, "--chunk-mib", "2048"), "from 0.00390625 to 1024 MiB"),
        (("load", MISSING, "--interval-ms", "0.5"), "from 10 to 60000 ms"),
        (("load", MISSING, "--ranks", "257"), "from 1 to 256"),
        (("load", MISSING, "--readahead", "99999999"), "whole KiB from 0 to 1048576"),
        (("load", MISSING, "--readahead", "lots"), "whole KiB from 0 to 1048576"),
        (("load", MISSING, "--samples"), "--json"),
        (("bench", MISSING, "--a", "pread", "--b", "sequential", "-n", "101"), "from 1 to 100"),
        (("bench", MISSING, "--a", "pread -w 300", "--b", "sequential"), "from 1 to 256"),
        (("fleet", "bench", MISSING, "--a", "x", "--b", "y", "-n", "0"), "from 1 to 100"),
        (("fleet", "load", MISSING, "--nodes", "0"), "≥ 1 or all"),
        (("fleet", "load", MISSING, "--workers", "0"), "from 1 to 256"),
        (("models", "--dir", "/nonexistent/models"), "no such folder"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
def test_an_option_out_of_range_is_refused_before_anything_is_measured(
    modelmon, args: tuple[str, ...], says: str
) -> None:
    done = modelmon(*args)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == USAGE, done.stderr
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert done.stdout == ""


def test_the_parser_takes_the_engine_s_limits_exactly() -> None:
    """The edges the engine accepts are accepted; one past them is refused."""
    parser = modelmon.cli.build_parser()
    ok = [
        ["recommend", "m", "--workers", str(MAX_SEARCH_WORKERS)],
        ["recommend", "m", "--budget", f"{MIN_BUDGET_S:g}"],
        ["recommend", "m", "--budget", f"{MAX_BUDGET_S:g}"],
        ["load", "m", "--workers", str(MAX_PARALLEL), "--threads", str(MAX_PARALLEL)],
        ["load", "m", "--chunk-mib", "0.00390625"],
        ["load", "m", "--chunk-mib", "1024"],
        ["bench", "m", "--a", "x", "--b", "y", "-n", str(MAX_AB_PAIRS)],
    ]
    for words in ok:
        parser.parse_args(words)
    refused = [
        ["recommend", "m", "--workers", str(MAX_SEARCH_WORKERS + 1)],
        ["recommend", "m", "--budget", f"{MIN_BUDGET_S - 0.5:g}"],
        ["load", "m", "--workers", str(MAX_PARALLEL + 1)],
        ["bench", "m", "--a", "x", "--b", "y", "-n", str(MAX_AB_PAIRS + 1)],
    ]
    for words in refused:
        with pytest.raises(SystemExit) as exited:
            parser.parse_args(words)
        assert exited.value.code == USAGE, words


def test_a_budget_is_taken_with_its_unit_as_the_app_shows_it() -> None:
    """The app shows "60 s": "60s" and "60 s" are 60 seconds; another unit is refused."""
    parser = modelmon.cli.build_parser()
    for given in ("60s", "60 s", " 60 "):
        assert parser.parse_args(["recommend", "m", "--budget", given]).budget == 60.0
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["recommend", "m", "--budget", "1min"])
    assert exited.value.code == USAGE


def test_the_widest_search_at_the_most_workers_allowed_is_a_valid_grid() -> None:
    """``recommend --workers N`` runs candidates of up to SEARCH_WIDTH × N workers: the
    largest N the CLI takes must give a grid the engine accepts (129 gave 258 workers, a
    usage error after the ceilings were measured)."""

    class FakeModel:
        total_bytes = 10

    grid = candidates(FakeModel(), MAX_SEARCH_WORKERS)  # type: ignore[arg-type]
    assert max(c.options.workers for c in grid) <= MAX_PARALLEL
    with pytest.raises(OptionsError):
        candidates(FakeModel(), MAX_SEARCH_WORKERS + 1)  # type: ignore[arg-type]


def test_one_budget_default_for_the_engine_the_cli_and_the_app() -> None:
    parser = modelmon.cli.build_parser()
    assert parser.parse_args(["recommend", "m"]).budget == DEFAULT_BUDGET_S
    assert inspect.signature(recommend).parameters["budget_s"].default == DEFAULT_BUDGET_S


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"workers": MAX_SEARCH_WORKERS + 1}, "from 1 to 128"),
        ({"memory_limit": 0}, "from 1 MiB"),
        ({"budget_s": 0.0}, "more than 0 s"),
        ({"budget_s": float("inf")}, "from 0 to 86400 s"),
        ({"budget_s": 1e12}, "from 0 to 86400 s"),
    ],
)
def test_recommend_checks_its_arguments_before_it_measures(
    sharded_model: Path, arguments: dict[str, float], says: str
) -> None:
    said: list[str] = []
    with pytest.raises(OptionsError, match=says):
        recommend(open_model(sharded_model), progress=said.append, peers=False, **arguments)
    assert said == []  # not even the ceilings were started


def test_the_memory_limit_ends_at_this_machine_s_ram() -> None:
    most = max_memory_limit()
    assert check_memory_limit(most) == most
    with pytest.raises(OptionsError, match="this machine's RAM"):
        check_memory_limit(most + 1)


def test_an_a_b_of_too_many_pairs_is_refused_before_a_run(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    side = StrategyConfig("pread", LoadOptions())

    def never(*_: object) -> None:
        raise AssertionError("a run started")

    for n in (0, MAX_AB_PAIRS + 1):
        with pytest.raises(OptionsError, match="from 1 to 100"):
            run_ab(model, side, side, n=n, run_one=never)  # type: ignore[arg-type]


def test_every_number_a_verb_takes_states_its_range_in_help() -> None:
    """No numeric option is left unbounded: its type is one of the bounded ones."""
    parser = modelmon.cli.build_parser()
    loose = []

    def walk(parser: argparse.ArgumentParser, where: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
            elif action.type in (int, float):
                loose.append(f"{where} {'/'.join(action.option_strings)}")

    walk(parser, "modelmon")
    assert not loose, loose


def test_recommend_counts_its_budget_from_the_command_s_start(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget bounds the whole command: the engine is given the moment ``main`` began,
    so start-up and opening the model are inside it."""
    seen: list[float | None] = []

    def record(*_: object, started: float | None = None, **__: object) -> None:
        seen.append(started)
        raise KeyboardInterrupt  # enough: the search itself is not under test

    monkeypatch.setattr(modelmon.core, "recommend", record)
    monkeypatch.setattr(modelmon.cli, "stop_on_sigterm", lambda: None)  # pytest's own stays
    before = time.monotonic()
    code = modelmon.cli.main(["recommend", str(sharded_model), "--budget", "5"])
    assert code == 130 and len(seen) == 1
    started = seen[0]
    assert started is not None and before <= started <= time.monotonic()
