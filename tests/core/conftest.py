"""Fixtures of the engine's tests that need a device of their own."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def loop_disk(tmp_path: Path) -> Iterator[Path]:
    """A folder on an ext4 filesystem on a loop device made for this test."""
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "mount")):
        pytest.skip("needs root, losetup, mkfs.ext4 and mount")
    image = tmp_path / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(48 << 20)
    try:
        device = _run("losetup", "--find", "--show", str(image))
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"no loop device here: {exc}")
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    try:
        _run("mkfs.ext4", "-q", "-F", device)
        _run("mount", device, str(mount_point))
        try:
            yield mount_point
        finally:
            _run("umount", str(mount_point))
    finally:
        _run("losetup", "-d", device)


@pytest.fixture
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state
