"""A run on network storage starts once the storage has rested after this process's last run
on it (``storage_rest.rest_storage``); on a local disk nothing waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core.system import device_use, readahead, storage_rest

from ...fuse import mounted_or_skip


@pytest.fixture(autouse=True)
def no_runs_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """No run of this process has ended on any device (a mount's number is reused)."""
    monkeypatch.setattr(device_use, "_ended", {})


@pytest.fixture
def mounted_file(tmp_path: Path, own_state: Path) -> Iterator[Path]:
    """A small file on a real network FUSE mount (rclone serving ``tmp_path`` over HTTP)."""
    source = tmp_path / "source"
    source.mkdir()
    (source / "weights.bin").write_bytes(b"\1" * (1 << 20))
    with mounted_or_skip(source, tmp_path / "mnt") as mounted:
        yield mounted / "weights.bin"


def a_run_on(path: Path) -> float:
    """A run's announcement on ``path``'s device, as every measured run makes; its start."""
    started = time.monotonic()
    with device_use.activity(readahead.device_names([path])):
        pass
    return started


def test_a_run_on_a_network_mount_waits_out_the_rest_after_the_last(mounted_file: Path) -> None:
    files = [mounted_file]
    assert storage_rest.rest_left(files) == 0.0  # no run of this process has ended on it yet
    started = a_run_on(mounted_file)
    left = storage_rest.rest_left(files)
    asked = time.monotonic()
    # Counted from the end of that run: between its start and our asking.
    assert storage_rest.STORAGE_REST_S - (asked - started) <= left <= storage_rest.STORAGE_REST_S
    # The way out: a set stop ends the wait at once, the rest still to come.
    stop = threading.Event()
    stop.set()
    assert storage_rest.rest_storage(files, stop) > 0
    assert storage_rest.rest_left(files) > 0


def test_rest_storage_returns_once_the_storage_rested(
    mounted_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(storage_rest, "STORAGE_REST_S", 0.3)
    a_run_on(mounted_file)
    assert 0 < storage_rest.rest_storage([mounted_file]) <= 0.3
    assert storage_rest.rest_left([mounted_file]) == 0.0


def test_a_local_disk_needs_no_rest(tmp_path: Path, own_state: Path) -> None:
    local = tmp_path / "weights.bin"
    local.write_bytes(b"\1" * 4096)
    a_run_on(local)
    assert storage_rest.rest_left([local]) == 0.0
    assert storage_rest.rest_storage([local]) == 0.0
