"""Commands as configurations, run for real: each run starts from a verified cold cache, is
watched, and counts as a load; a command that fails is a failed run that says why."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from modelmon.core import (
    ProgramResult,
    StrategyConfig,
    open_model,
    run_ab,
    run_program,
    write_safetensors_model,
)
from modelmon.core.configuration import parse_program
from modelmon.core.errors import OptionsError
from modelmon.core.measuring import ABFailed
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.loader_rounds import Entry, LoaderRounds
from modelmon.core.options import LoadOptions
from modelmon.core.runs import ProgramRun, RunOutcome
from modelmon.core.runs.warm import warming_line

PYTHON = sys.executable
READER = "import sys; f = open(sys.argv[1], 'rb', buffering=0)\nwhile f.read(1 << 20): pass"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 20 MB single-file safetensors model."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("programs"), layers=2, hidden=512, vocab=4096, seed=3
    )


def _run(model: Path, spec: str, **options: object) -> ProgramResult:
    return run_program(open_model(model), parse_program(spec), **options)  # type: ignore[arg-type]


def test_a_command_is_cold_verified_watched_and_counted_as_a_load(model: Path) -> None:
    outcome = _run(model, f'cmd: {PYTHON} -c "{READER}" {{path}}')
    load, watch = outcome.result, outcome.watch
    assert load.status == "ok", load.error
    assert load.cache.requested == "cold" and load.cache.cold, load.cache.note
    assert watch is not None and watch.cache is not None and watch.cache.cold
    size = model.stat().st_size
    assert load.bytes == size == watch.arrived_bytes  # every byte arrived, each counted once
    assert load.seconds == watch.seconds and load.mbps > 0
    assert load.strategy.startswith("cmd: ") and load.options["command"][-1] == str(model)
    assert load.workers[0].pid == watch.pid
    assert load.blocks and load.first_block_s is not None  # blocks from where bytes arrived


def test_path_in_an_environment_word_is_the_model_s_path_as_in_any_word(model: Path) -> None:
    """``MODEL={path} python ...``: the word sets the command's environment, with the path
    (docs/cli.md: "{path} stands for the model's path in any word, NAME=VALUE ones
    included"); the result records the environment the command ran with."""
    script = (
        "import os; f = open(os.environ['MODEL'], 'rb', buffering=0)\nwhile f.read(1 << 20): pass"
    )
    outcome = _run(model, f'cmd: MODEL={{path}} {PYTHON} -c "{script}"')
    load = outcome.result
    assert load.status == "ok", load.error
    assert load.bytes == model.stat().st_size
    assert load.options["env"] == {"MODEL": str(model)}


def test_a_failing_command_is_a_failed_run_with_its_exit_code_and_last_stderr_line(
    model: Path,
) -> None:
    script = "import sys; print('loading', file=sys.stderr); sys.exit('no GPU found')"
    outcome = _run(model, f'cmd: {PYTHON} -c "{script}" {{path}}')
    assert outcome.result.status == "failed" and outcome.result.bytes == 0
    assert outcome.result.error == "exit code 1: no GPU found"
    assert outcome.stderr == "no GPU found"


@pytest.mark.parametrize(
    ("script", "said"),
    [
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed by SIGKILL"),
        ("pass", "it never opened or mapped the model's files"),
        (
            "import mmap, sys; f = open(sys.argv[1], 'rb'); "
            "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); m[0]",
            "a lazy load measures nothing",
        ),
    ],
)
def test_a_run_that_loads_nothing_whole_is_failed(model: Path, script: str, said: str) -> None:
    outcome = _run(model, f'cmd: {PYTHON} -c "{script}" {{path}}')
    assert outcome.result.status == "failed"
    assert said in (outcome.result.error or ""), outcome.result.error


DIRECT_REPORTER = """import json, mmap, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)
buffer, done, started = mmap.mmap(-1, 1 << 20), 0, time.perf_counter()
while (got := os.preadv(fd, [buffer], done)) > 0:
    done += got
print(json.dumps({'engine': 'mine', 'seconds': time.perf_counter() - started, 'bytes': done}))
"""


def test_a_command_that_reads_direct_and_reports_its_clock_is_timed_by_it(
    model: Path, tmp_path: Path
) -> None:
    """A program reading its model past the page cache leaves no page to see arriving (and,
    small, may open, read and close between two looks): its own report, borne out by its
    tree's reads from storage, times it, as the engines' harness's does."""
    script = tmp_path / "direct_reader.py"
    script.write_text(DIRECT_REPORTER)
    outcome = _run(model, f"cmd: {PYTHON} {script} {{path}}")
    load = outcome.result
    assert load.status == "ok", load.error
    assert load.cache.cold and load.bytes == model.stat().st_size
    assert any(note.startswith("direct I/O: the page cache never holds") for note in load.notes)
    assert outcome.watch is not None and outcome.watch.read_bytes >= load.bytes


def test_a_command_that_cannot_start_is_a_failed_run(model: Path) -> None:
    outcome = _run(model, "cmd: modelmon-no-such-program {path}")
    assert outcome.result.status == "failed" and outcome.watch is None
    assert "cannot run 'modelmon-no-such-program'" in (outcome.result.error or "")


def test_a_command_past_its_time_limit_is_stopped(model: Path) -> None:
    outcome = _run(model, f'cmd: {PYTHON} -c "import time; time.sleep(120)"', time_limit_s=0.5)
    assert outcome.result.status == "cancelled"
    assert (outcome.result.error or "").startswith("stopped at its time limit")


def test_a_load_is_never_timed_from_a_warm_cache(model: Path) -> None:
    """A program that loads and exits brings no byte from a warm cache: its run fails, and
    an A/B of it refuses the warm cache once its uncounted run has shown it is no server."""
    outcome = ProgramRun(open_model(model), parse_program("cmd: cat {path}"), "warm").run()
    assert outcome.result.status == "failed"
    assert "a warm model brings none" in (outcome.result.error or "")
    with pytest.raises(OptionsError, match="use a cold cache"):
        run_ab(
            open_model(model),
            parse_program("cmd: cat {path}"),
            StrategyConfig("sequential", LoadOptions()),
            n=1,
            cache="warm",
        )


def test_a_command_counts_in_the_pairs_and_the_verdict_as_a_load(model: Path) -> None:
    heard: list[tuple[str, int, RunOutcome]] = []
    command = parse_program(f'cmd: {PYTHON} -c "{READER}" {{path}}')
    sequential = StrategyConfig("sequential", LoadOptions(workers=2))
    ab = run_ab(
        open_model(model),
        command,
        sequential,
        n=2,
        on_outcome=lambda side, pair, outcome: heard.append((side, pair, outcome)),
    )
    assert [side for side, _ in ab.runs] == ["A", "B", "A", "B"]
    assert all(result.status == "ok" and result.cache.cold for _, result in ab.runs)
    assert ab.a.spec == command.spec and ab.b.spec == "sequential workers=2"
    assert len(ab.ratios) == 2 and ab.verdict.text in ("A faster", "B faster", "within noise")
    programs = [(side, pair) for side, pair, o in heard if isinstance(o, ProgramResult)]
    assert programs == [("A", 0), ("A", 1)] and len(heard) == 4
    assert not ab.verdict.note  # every run verified cold


def test_an_ab_with_a_failing_command_is_void_and_says_why(model: Path) -> None:
    failing = parse_program(f'cmd: {PYTHON} -c "import sys; sys.exit(4)" {{path}}')
    with pytest.raises(ABFailed, match="B run 1 failed: exit code 4"):
        run_ab(open_model(model), StrategyConfig("sequential", LoadOptions()), failing, n=1)


def test_every_shard_is_made_cold_and_counted_when_the_index_is_named(
    sharded_model: Path,
) -> None:
    """``{path}`` is the index the user named; the cache of every shard is verified cold."""
    reads_all = (
        "import glob, os, sys\n"
        "for name in glob.glob(os.path.join(os.path.dirname(sys.argv[1]), '*.safetensors')):\n"
        "    f = open(name, 'rb', buffering=0)\n"
        "    while f.read(1 << 20): pass"
    )
    model = open_model(sharded_model)
    outcome = run_program(
        model, parse_program(f'cmd: {PYTHON} -c "{reads_all}" {{path}}'), path=str(sharded_model)
    )
    assert outcome.result.status == "ok", outcome.result.error
    assert outcome.result.cache.cold and outcome.watch is not None
    assert {f.path for f in outcome.watch.files} == {f.path for f in model.files}
    assert outcome.result.bytes == sum(f.size for f in model.files)
    assert outcome.result.options["command"][-1] == str(sharded_model)


COUNTING = READER + "\nopen(sys.argv[2], 'a').write('x')"  # a mark in a log per run


def test_each_program_of_an_ab_runs_once_uncounted_before_its_counted_runs(
    model: Path, tmp_path: Path
) -> None:
    """Its code (imports, libraries) is in the page cache for every counted run: once per
    code, whatever its settings (an environment variable is a setting)."""
    log = tmp_path / "runs"
    plain = parse_program(f'cmd: {PYTHON} -c "{COUNTING}" {{path}} {log}')
    with_env = parse_program(f'cmd: ANY=1 {PYTHON} -c "{COUNTING}" {{path}} {log}')
    warmed: list[str] = []
    ab = run_ab(open_model(model), plain, with_env, n=1, on_warm=warmed.append)
    assert [side for side, _ in ab.runs] == ["A", "B"]
    assert warmed == [warming_line(plain.spec)]
    assert log.read_text() == "x" * 3  # one uncounted, two counted

    other = parse_program(f'cmd: {PYTHON} -c "{COUNTING}" {{path}} {log} 2')
    warmed.clear()
    run_ab(open_model(model), plain, other, n=1, on_warm=warmed.append)
    assert warmed == [warming_line(plain.spec), warming_line(other.spec)]
    assert log.read_text() == "x" * 7


def test_the_loaders_rounds_run_each_program_once_uncounted_first(
    model: Path, tmp_path: Path
) -> None:
    log = tmp_path / "runs"
    said: list[str] = []
    deadline = time.monotonic() + 60
    rounds = LoaderRounds(open_model(model), str(model), deadline, said.append, None, overrun_s=6.0)
    as_is = Entry(Candidate(parse_program(f'cmd: {PYTHON} -c "{COUNTING}" {{path}} {log}')))
    change = Entry(Candidate(parse_program(f'cmd: ANY=1 {PYTHON} -c "{COUNTING}" {{path}} {log}')))
    for entry in (as_is, change, as_is):
        assert rounds.run(entry).status == "ok"
    assert log.read_text() == "x" * 4
    assert [len(e.candidate.results) for e in (as_is, change)] == [2, 1]
    assert sum("not counted" in line for line in said) == 1
