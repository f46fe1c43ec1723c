"""A real network FUSE mount for a test: rclone serving a folder over HTTP on loopback and
``rclone mount`` of it (``benchmarks.envs.fuse_mount``), or the test's skip, saying why this
machine has none."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.envs import EnvUnavailable, fuse_mount


@contextlib.contextmanager
def mounted_or_skip(
    source: Path,
    mount_point: Path,
    mount_flags: Sequence[str] = (),
    via: Callable[[int], AbstractContextManager[str]] | None = None,
) -> Iterator[Path]:
    """``source`` mounted at ``mount_point`` for the block; the test skips where it cannot
    be mounted. ``mount_flags`` go to ``rclone mount`` (``("--bwlimit", "1M")``); ``via``:
    a proxy the mount reads the server through (``fuse_mount``)."""
    try:
        with fuse_mount(source, mount_point, mount_flags=mount_flags, via=via) as mounted:
            yield mounted
    except EnvUnavailable as exc:
        pytest.skip(str(exc))
