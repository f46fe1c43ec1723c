"""The CLI run as users run it: ``python -m modelmon`` in a subprocess."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable

import psutil
import pytest

MODELMON = [sys.executable, "-m", "modelmon"]

# What multiprocessing's spawn runs in a worker once it has exec'd. A child just forked still
# shows its parent's command line, and may be about to exec the resource tracker instead.
WORKER_MARK = "spawn_main"

RunCli = Callable[..., subprocess.CompletedProcess[str]]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODELMON, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def modelmon() -> RunCli:
    """``modelmon(*args, timeout=60)``: the finished process, stdout and stderr as text."""
    return run


@pytest.fixture
def modelmon_argv() -> list[str]:
    """The command line that starts ``modelmon``, for tests that drive the process."""
    return list(MODELMON)


def load_workers(parent: psutil.Process) -> list[psutil.Process]:
    """``parent``'s load workers that have exec'd: never multiprocessing's resource tracker,
    which holds the parent's stdout and stderr until the parent exits (a test that froze it
    would wait for those pipes to close for ever)."""
    found = []
    for child in parent.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if WORKER_MARK in " ".join(child.cmdline()):
                found.append(child)
    return found
