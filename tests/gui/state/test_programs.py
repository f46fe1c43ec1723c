"""A program as configuration A or B, without Qt: a command against a strategy reaches a
verdict, each of its runs watched and counted as a load; a failing command is a failed run
with its exit code and last stderr line; a command that does not parse is refused in one
line before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from modelmon.core import Discovery, write_safetensors_model
from modelmon.core.configuration import command_spec
from modelmon.core.options import LoadOptions
from modelmon.gui.state.ab_config import ABPick, program_winner
from modelmon.gui.state.ab_session import ab_cache
from modelmon.gui.state.app_state import AppState
from modelmon.gui.state.events import CallQueue
from modelmon.gui.state.programs import engine_choices, spec_error
from modelmon.gui.state.results_rows import STATUS, cell_text

from ..conftest import pump

# Reads every byte of the file it is given, as a loader would.
LOAD_PY = (
    "import sys\n"
    "with open(sys.argv[1], 'rb', buffering=0) as f:\n"
    "    while f.read(1 << 20):\n"
    "        pass\n"
)
FAILING_PY = "import sys\nprint('no GPU found: loading stopped', file=sys.stderr)\nsys.exit(3)\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("programs")
    (folder / "load.py").write_text(LOAD_PY)
    (folder / "fail.py").write_text(FAILING_PY)
    return write_safetensors_model(folder, layers=2, hidden=512, vocab=4096, seed=3)


def opened(model: Path) -> tuple[AppState, CallQueue]:
    queue = CallQueue()
    state = AppState(queue, discover=lambda: Discovery((), (), (), 0, False))
    state.open_path(str(model))
    pump(queue, lambda: state.bench.info is not None)
    return state, queue


def test_a_command_as_b_against_a_strategy_reaches_a_verdict(model: Path):
    state, queue = opened(model)
    bench = state.bench
    load = f"{sys.executable} {model.parent / 'load.py'} {{path}}"
    bench.configs.set("A", "sequential", LoadOptions(cache="cold"))
    bench.configs.set("B", command_spec(load), LoadOptions())
    bench.run_ab(pairs=1)
    pump(queue, lambda: not bench.running)
    ab = bench.ab.history.result
    assert ab is not None, [r.message for r in bench.records]
    assert ab.b.spec == f"cmd: {load}" and ab.verdict.text
    a_run, b_run = bench.records
    assert a_run.outcome is not None and b_run.watched is not None  # B was watched
    assert b_run.status == "ok" and b_run.mbps and b_run.cache.cold  # verified cold
    assert b_run.result.bytes == sum(f.size for f in bench.info.model.files)
    assert b_run.run_name.startswith("B · pair 1")
    # A config file holds a strategy: the command's side is not exported as one.
    assert program_winner(ab, ABPick("A", True)) is None
    assert "is a program" in (program_winner(ab, ABPick("B", True)) or "")


def test_run_b_with_a_command_is_one_watched_run(model: Path):
    state, queue = opened(model)
    bench = state.bench
    bench.configs.set("B", command_spec("cat {path}"), LoadOptions())
    assert bench.configs.spec("B") == "cmd: cat {path}"
    bench.run("B")
    pump(queue, lambda: not bench.running)
    (run,) = bench.records
    assert run.label == "B" and run.run_name == "B" and run.status == "ok", run.message
    assert run.watched is not None and run.watched.saw_model and run.cache.cold


def test_a_failing_command_is_a_failed_run_with_its_exit_code(model: Path):
    state, queue = opened(model)
    bench = state.bench
    bench.configs.set(
        "A", f"cmd: {sys.executable} {model.parent / 'fail.py'} {{path}}", LoadOptions()
    )
    bench.configs.set("B", "sequential", LoadOptions(cache="cold"))
    said: list[str] = []
    bench.message.connect(lambda text, _level: said.append(text))
    bench.run_ab(pairs=1)
    pump(queue, lambda: not bench.running)
    assert bench.ab.history.result is None
    (failed,) = bench.records
    assert failed.status == "failed"
    row = cell_text(failed, STATUS)
    assert "exit code 3" in row and "no GPU found: loading stopped" in row, row
    assert bench.ab.banner.kind == "failure"


def test_a_command_that_does_not_parse_is_refused_in_one_line(model: Path):
    state, _ = opened(model)
    bench = state.bench
    said: list[str] = []
    bench.message.connect(lambda text, _level: said.append(text))
    bench.configs.set("B", command_spec("python 'load.py {path}"), LoadOptions())
    bench.run_ab(pairs=1)
    assert not bench.running and len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("Configuration B: cmd:") and "quote" in said[0]
    assert spec_error(command_spec("")) is not None and "needs a command" in spec_error("cmd: ")


def test_a_program_side_takes_the_strategys_cache_state():
    """A server is timed to its ready from a warm cache too; a program that loads and is
    no server is refused a warm one by the A/B, once its first run has told (core)."""
    assert ab_cache(LoadOptions(cache="cold")) == "cold"
    assert ab_cache() == "cold"
    assert ab_cache(LoadOptions(cache="warm")) == "warm"


def test_engines_that_cannot_run_here_say_why():
    choices = {c.name: c for c in engine_choices("safetensors")}
    assert choices["safetensors"].why_not is None  # modelmon's own dependencies
    assert "GPU" in (choices["vllm"].why_not or "")
    assert "gguf" in (choices["llamacpp"].why_not or "") or "pip install" in (
        choices["llamacpp"].why_not or ""
    )
