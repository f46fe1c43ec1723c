"""Progress with an ETA on a terminal's stderr (a pty here), nothing when stderr is a pipe;
stdout carries the result alone either way."""

from __future__ import annotations

import errno
import json
import os
import pty
import subprocess
from pathlib import Path

import pytest

from modelmon.cli.progress import QuietBars, progress_bars

from .conftest import MODELMON

TERMINAL_ENV = {"TERM": "xterm-256color", "COLUMNS": "140", "LINES": "40"}


def run_on_a_terminal(*args: str, timeout: float = 120) -> tuple[int, str, str]:
    """``modelmon ARGS`` with stderr on a pty and stdout on a pipe: (code, stdout, stderr)."""
    master, slave = pty.openpty()
    env = {**os.environ, **TERMINAL_ENV}
    env.pop("NO_COLOR", None)
    try:
        process = subprocess.Popen(
            [*MODELMON, *args], stdout=subprocess.PIPE, stderr=slave, env=env
        )
    finally:
        os.close(slave)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError as exc:  # EIO: the child closed its end (it exited)
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            chunks.append(chunk)
        out, _ = process.communicate(timeout=timeout)
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("json_output", [False, True])
def test_load_on_a_terminal_shows_progress_with_an_eta_on_stderr_only(
    sharded_model: Path, json_output: bool
):
    args = ["load", str(sharded_model), "--workers", "2", "--chunk-mib", "1"]
    code, out, err = run_on_a_terminal(*args, *(["--json"] if json_output else []))
    assert code == 0, err
    assert f"loading {sharded_model.name}" in err and "ETA" in err and "100%" in err
    assert "ETA" not in out and "\x1b" not in out  # no bars, no escape codes on stdout
    if json_output:
        assert json.loads(out)["status"] == "ok"
    else:
        assert "MB/s" in out


def test_load_without_a_terminal_draws_nothing(modelmon, sharded_model: Path):
    done = modelmon("load", str(sharded_model), "--workers", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    assert done.stderr == ""


def test_bench_on_a_terminal_counts_runs_with_an_eta(sharded_model: Path):
    code, out, err = run_on_a_terminal(
        "bench", str(sharded_model), "--a", "pread", "--b", "sequential", "-n", "1", "--json"
    )
    assert code == 0, err
    assert "A/B × 1" in err and "2/2" in err and "ETA" in err
    assert "A run 1:" in err and "B run 1:" in err
    assert json.loads(out)["verdict"]["text"]


def test_bench_without_a_terminal_draws_nothing(modelmon, sharded_model: Path):
    done = modelmon("bench", str(sharded_model), "--a", "pread", "--b", "sequential", "-n", "1")
    assert done.returncode == 0, done.stderr
    assert "ETA" not in done.stderr and "run 1:" not in done.stderr
    assert "verdict:" in done.stdout


def test_recommend_on_a_terminal_shows_what_is_left_of_the_budget(
    sharded_model: Path, tmp_path: Path
):
    code, out, err = run_on_a_terminal(
        "recommend", str(sharded_model), "--budget", "5", "-o", str(tmp_path / "r.toml")
    )
    assert code == 0, err
    assert "s of the 5 s budget left" in err
    assert "\nWhy:\n" in out and "s budget left" not in out


def test_the_budget_column_says_how_far_past_the_budget_it_is():
    """Walk 25: "ETA ≤ 5 s (budget 5 s)" counted down while the ceilings (26 s) were measured,
    then "finishing the last run" for 30 s: a search may run past its budget (the ceilings
    and a first load always run), so the column says what is left, then how far past."""
    from types import SimpleNamespace

    from modelmon.cli.rich_bars import BudgetLeftColumn

    column = BudgetLeftColumn()
    said = column.render(SimpleNamespace(total=5.0, elapsed=2.2))  # type: ignore[arg-type]
    assert said.plain == "3 s of the 5 s budget left"  # 2.8 s, up to a whole second
    said = column.render(SimpleNamespace(total=5.0, elapsed=26.4))  # type: ignore[arg-type]
    assert said.plain == "21 s past the 5 s budget"
    # Walk 26 read "-0 s past" just before the end: what is left counts up to a whole second.
    said = column.render(SimpleNamespace(total=5.0, elapsed=4.8))  # type: ignore[arg-type]
    assert said.plain == "1 s of the 5 s budget left"
    said = column.render(SimpleNamespace(total=5.0, elapsed=5.2))  # type: ignore[arg-type]
    assert said.plain == "0 s past the 5 s budget"


def test_progress_bars_are_quiet_off_a_terminal(tmp_path: Path):
    with (tmp_path / "log").open("w") as stream, progress_bars(stream) as bars:
        assert isinstance(bars, QuietBars)
        task = bars.bytes_task("x", 10)
        bars.advance(task, 10)
        bars.log("nothing")
    assert (tmp_path / "log").read_text() == ""
