"""``modelmon recommend PATH --server "cmd: ..."``: the server as it is and with each change,
timed to ready in rounds within the budget; the answer first (ready in X s instead of Y s
with the change, the line to paste), the caches, then the evidence. The server is
tests/serve_bed.py: one change of the user's shortens its CPU-bound step after the weights,
another slows its reads; it compiles into a compile cache it reads back when kept."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model

from .conftest import RunCli

BED = Path(__file__).resolve().parents[2] / "serve_bed.py"
# Its steps wait on the clock: the verdicts judge the changes, not the other tests' use of
# the cores.
SERVER = f"{sys.executable} {BED} {{path}} --sleep-steps --import-s 0.2 --other-mb 1 --post-s 1.2"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recommend-server")
    return write_safetensors_model(folder, layers=2, hidden=512, vocab=4096, seed=9)


def test_the_answer_is_the_fastest_change_with_its_line_to_paste(
    modelmon: RunCli, model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"  # this run's temporary folders, apart from other tests'
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    done = modelmon(
        "recommend",
        str(model),
        "--server",
        f"cmd: {SERVER} --phase-lines --compile-s 1",
        "--variant",
        "--post-s 0.2",
        "--variant",
        "--pace-mbps 4",
        # Room for every variant's rounds on busy cores too: the rounds end once each
        # finalist has its runs, well before it when the machine is free.
        "--budget",
        "300",
        "--json",
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pick"] == "--post-s 0.2"
    variants = {v["change"]: v for v in report["variants"]}
    assert variants["--post-s 0.2"]["verdict"]["text"] == "B faster"
    assert variants["--post-s 0.2"]["runs"] >= 3 and report["as_is"]["runs"] >= 3
    assert variants["--pace-mbps 4"]["ready_s"] > report["as_is"]["ready_s"]
    assert variants["a kept compile cache"]["verdict"]["text"] == "B faster"
    answer = report["answer"]
    assert answer[0].startswith("answer: ready in ") and "with --post-s 0.2" in answer[0]
    paste = answer[1].removeprefix("paste:  ")
    words = shlex.split(paste)
    assert words.count("--post-s") == 1 and words[words.index("--post-s") + 1] == "0.2"
    assert str(model) in paste and "{path}" not in paste
    assert any(line.startswith("cache:  persisting ") for line in answer)
    # The line to paste runs as printed: the server it starts serves.
    server = subprocess.Popen(
        words,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "VLLM_CACHE_ROOT": str(tmp_path)},  # its compile cache: not ~
    )
    try:
        assert server.stdout is not None
        said = [server.stdout.readline() for _ in range(4)]
        assert any(line.startswith("serve_bed: listening on") for line in said), said
    finally:
        server.kill()
        server.wait()
    assert not list(scratch.glob("modelmon-compile-*"))


def test_a_program_that_is_no_server_is_refused(modelmon: RunCli, model: Path) -> None:
    loader = f"cmd: {sys.executable} -c \"import sys; open(sys.argv[1], 'rb').read()\" {{path}}"
    done = modelmon("recommend", str(model), "--server", loader, "--budget", "30", timeout=120)
    assert done.returncode == 2
    assert "not a server: it was never seen ready" in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--server", f"cmd: {SERVER}", "-o", "x.toml"], "--server and -o"),
        (["--server", "sequential"], "not a program configuration"),
        (["--variant", "--post-s 1"], "--variant is a change of a server's command"),
        (["--server", f"cmd: {SERVER}", "--variant", "post-s 1"], "is not a flag"),
    ],
)
def test_it_is_refused_in_one_line_before_anything_runs(
    modelmon: RunCli, model: Path, args: list[str], said: str
) -> None:
    done = modelmon("recommend", str(model), *args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
