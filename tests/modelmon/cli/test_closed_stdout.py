"""A reader of stdout that goes away (``modelmon models | head -1``) ends the verb quietly:
exit code 141, as SIGPIPE ends other tools, and nothing on stderr (no traceback, and no
"Exception ignored" from Python's flush of stdout at exit)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from modelmon.cli.common import ExitCode
from modelmon.core import write_safetensors_model

from .conftest import MODELMON


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=64, vocab=128)


@pytest.mark.parametrize(
    "args",
    [
        ("strategies",),
        ("strategies", "--json"),
        ("inspect", "{model}"),
        ("inspect", "{model}", "--json"),
        ("models", "--dir", "{folder}"),
        ("--help",),
        ("load", "--help"),
    ],
    ids=" ".join,
)
def test_a_closed_stdout_ends_the_verb_quietly(tiny_model: Path, args: tuple[str, ...]) -> None:
    words = [a.format(model=tiny_model, folder=tiny_model.parent) for a in args]
    read, write = os.pipe()
    os.close(read)  # the reader is gone before modelmon writes a byte: every write fails
    try:
        done = subprocess.run(
            [*MODELMON, *words],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == ExitCode.PIPE_CLOSED == 141, done.stderr
    assert done.stderr == ""
