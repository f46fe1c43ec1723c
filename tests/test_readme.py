"""Every command the README shows runs as shown, on a model of the name it uses."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core import write_safetensors_model

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"```sh\n(.*?)```", re.S)
# The only change: recommend's budget at its minimum, a suite's time (the command is the same).
# The test's model is small: a budget for it is shorter, and a watch samples it every 10 ms
# (a user's model loads for seconds; this one can load within the 100 ms of a first sample,
# which the watch rightly says gives no speed). Python's start alone is longer than 10 ms.
SHORTER = (
    ("--budget 60", "--budget 5"),
    ("modelmon watch --", "modelmon watch --interval-ms 10 --"),
)


def readme_commands() -> list[str]:
    blocks = BLOCK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line.startswith("modelmon ")]


def test_the_readme_shows_commands_at_all() -> None:
    assert len(readme_commands()) >= 3


@pytest.mark.parametrize("line", readme_commands(), ids=lambda line: line.split()[1])
def test_a_readme_command_runs_as_shown(line: str, tmp_path: Path) -> None:
    made = write_safetensors_model(tmp_path / "made", layers=2, hidden=256, vocab=512)
    shutil.copy(made, tmp_path / "model.safetensors")
    for long, short in SHORTER:
        line = line.replace(long, short)
    words = shlex.split(line, comments=True)
    # As in an activated environment: `python` is the one modelmon and safetensors are in.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        [sys.executable, "-m", "modelmon", *words[1:]],
        cwd=tmp_path,
        env={**os.environ, "PATH": path},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (line, done.stdout[-2000:], done.stderr[-2000:])
