"""The FUSE environment's server can hold the model's files in memory: locked pages stay
cached through a drop, and go back to the kernel's keeping when the block ends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchmarks.envs import held_in_memory
from modelmon.core.system import evict, residency_of


def test_held_files_stay_cached_through_a_drop(tmp_path: Path) -> None:
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for path in files:
        path.write_bytes(os.urandom(4 << 20))
    (tmp_path / "empty").touch()  # nothing to map: left alone
    evict(files)
    if residency_of(files) > 0.5:
        pytest.skip("this filesystem keeps files cached through a drop (tmpfs)")
    with held_in_memory(tmp_path):
        assert residency_of(files) == 1.0
        evict(files)
        assert residency_of(files) == 1.0
    evict(files)
    assert residency_of(files) < 0.5
