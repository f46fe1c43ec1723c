"""A load under a memory limit it really runs under: its workers in a memory cgroup of that
size (root and cgroup v1 here; skipped with the reason elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.errors import LoadError
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions
from modelmon.core.runs.session import Session
from modelmon.core.system import memory_cgroup
from modelmon.core.system.memory_cgroup import CgroupUnavailable

from ..system.test_memory_cgroup import REAL
from .sparse import sparse_model

MiB = 1 << 20


def own_cgroups() -> set[Path]:
    base, _ = memory_cgroup.own_parent()
    return set(base.glob(f"modelmon-{os.getpid()}-*"))


@REAL
def test_a_streaming_load_twice_the_limit_runs_and_peaks_under_it(tmp_path: Path) -> None:
    """As a 2.2 GB model streamed under 1 GiB: 256 MiB under 128 MiB."""
    model = sparse_model(tmp_path, tensors=8, tensor_bytes=32 * MiB)
    options = LoadOptions(discard=True, cache="cold")
    before = own_cgroups()
    result = LoadRun(model, "sequential", options, memory_limit=128 * MiB).run()
    assert result.status == "ok", result.error
    limited = result.memory_limit
    assert limited is not None
    assert limited.limit_bytes == 128 * MiB
    assert 0 < limited.peak_bytes <= 128 * MiB
    assert limited.anon_peak_bytes > 0 and limited.cache_peak_bytes > 0
    assert not limited.oom_killed
    assert not Path(limited.cgroup).exists() and own_cgroups() == before
    assert result.to_dict()["memory_limit"]["peak_bytes"] == limited.peak_bytes


@REAL
def test_a_copying_load_larger_than_the_limit_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    model = sparse_model(tmp_path, tensors=8, tensor_bytes=32 * MiB)
    before = own_cgroups()
    with pytest.raises(LoadError, match="would not fit in the memory limit of 128 MiB"):
        LoadRun(model, "sequential", LoadOptions(cache="cold"), memory_limit=128 * MiB).run()
    assert own_cgroups() == before


@REAL
def test_a_worker_oom_killed_under_the_limit_is_named_with_it(tmp_path: Path) -> None:
    """Arrays of 96 MiB fit a 100 MiB limit on paper; with the worker's interpreter they do
    not, and the kernel kills it in the cgroup."""
    model = sparse_model(tmp_path, tensors=6, tensor_bytes=16 * MiB)
    result = LoadRun(model, "sequential", LoadOptions(cache="cold"), memory_limit=100 * MiB).run()
    assert result.status == "failed"
    assert result.error is not None
    assert "OOM killer" in result.error and "memory limit of 100 MiB" in result.error
    assert result.memory_limit is not None and result.memory_limit.oom_killed
    assert not Path(result.memory_limit.cgroup).exists()


def test_where_no_cgroup_can_be_made_the_limit_is_planned_with_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse() -> tuple[Path, int]:
        raise CgroupUnavailable("not root, and no cgroup delegated to this user")

    monkeypatch.setattr(memory_cgroup, "own_parent", refuse)
    model = sparse_model(tmp_path, tensors=4, tensor_bytes=4 * MiB)
    options = LoadOptions(discard=True)
    result = LoadRun(model, "sequential", options, memory_limit=64 * MiB).run()
    assert result.status == "ok" and result.memory_limit is None
    said = [note for note in result.notes if "cannot run under a memory limit here" in note]
    assert said == [
        "cannot run under a memory limit here (not root, and no cgroup delegated to this "
        "user): planning with 64 MiB only, as a number"
    ]
    line = memory_cgroup.limit_unavailable(64 * MiB)
    assert line == said[0]


@REAL
def test_a_monitored_load_under_a_limit_samples_its_split_beside_the_limit(
    tmp_path: Path,
) -> None:
    model = sparse_model(tmp_path, tensors=8, tensor_bytes=32 * MiB)
    options = LoadOptions(discard=True, cache="cold")
    outcome = Session(model, "sequential", options, interval_s=0.01, memory_limit=128 * MiB).run()
    assert outcome.result.status == "ok"
    series = outcome.series
    _, limit = series["limit_bytes"]
    assert set(limit[~np.isnan(limit)]) == {128 * MiB}
    for name in ("cgroup_bytes", "cgroup_anon_bytes", "cgroup_cache_bytes"):
        _, values = series[name]
        assert np.nanmax(values) > 0 and np.nanmax(values) <= 128 * MiB, name
    plain = Session(model, "sequential", options, interval_s=0.05).run()
    assert "cgroup_bytes" not in plain.series and "memory_limit" not in plain.unavailable
