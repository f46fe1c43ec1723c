"""A pre-forking server (gunicorn --preload's way): the command reads its weights, then forks
workers that listen. The workers share what it read; a listen of theirs is the server's ready,
even where the command opened, read and closed the model between two looks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core import Watch, write_safetensors_model

from .test_cold_start import running_with
from .test_server_phases import FORKED_LISTENERS

# argv[1]: the model; argv[2]: a marker of the test. Reads the model whole at once, then
# forks two workers that each listen on a port of their own and serve.
PREFORK = (
    """
import os, socket, sys, time
with open(sys.argv[1], "rb") as weights:
    while weights.read(8 << 20):
        pass
"""
    + FORKED_LISTENERS
)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 22 MB model: read whole within one of the watch's looks on most disks."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("prefork"), layers=1, hidden=1024, vocab=4096, seed=23
    )


def test_the_workers_a_server_forks_after_its_weights_make_it_ready(
    model: Path, tmp_path: Path
) -> None:
    marker = str(tmp_path / "prefork")
    result = Watch(
        [sys.executable, "-c", PREFORK, str(model), marker],
        model=str(model),
        ready_timeout_s=30,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ).run()
    cold = result.cold_start
    assert result.ended_by == "ready", (result.ended_by, cold)
    assert cold is not None and cold.ready_s is not None and cold.ready_by == "listen"
    worker = int((cold.ready_detail or "").split()[1])
    assert worker != result.pid and "listened on :" in (cold.ready_detail or "")
    assert result.bytes_read >= 0.9 * model.stat().st_size
    assert result.first_byte_s is not None and cold.ready_s >= result.first_byte_s
    assert not any("neither the command nor" in why for *_, why in cold.early_listens)
    assert not running_with(marker), "a worker outlived the watch"
