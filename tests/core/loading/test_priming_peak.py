"""What priming free memory before a load does to the run's memory figures: the parent's peak
is the run's own, and the result says what was primed on its cache line."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions
from modelmon.core.output.text import memory_text, render_result
from modelmon.core.system import host_memory
from modelmon.core.system.proc_status import own_status_bytes

from .sparse import sparse_model

MIB = 1 << 20


@pytest.fixture
def priming(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a VM whose host takes free pages back, without the wait before priming, and with
    no task stalled on memory: the suite's other worker may be loading gigabytes beside this
    test, and priming rightly stands back then (its own test holds that rule)."""
    monkeypatch.setattr(host_memory, "_mode", "on")
    monkeypatch.setattr(host_memory, "REPORT_DELAY_S", 0.0)
    monkeypatch.setattr(host_memory, "memory_pressure", lambda *_: 0.0)


def test_the_memory_primed_before_a_load_is_not_in_its_parents_peak(
    tmp_path: Path, priming: None
) -> None:
    model = sparse_model(tmp_path, tensors=6, tensor_bytes=64 * MIB)  # 384 MiB of arrays
    before = own_status_bytes("VmRSS:")
    assert before is not None
    result = LoadRun(model, "sequential", LoadOptions(workers=1, threads=1, cache="cold")).run()
    assert result.status == "ok", result.error
    primed = result.cache.primed
    assert primed.bytes == 384 * MIB, primed  # the workers' arrays, touched in this process
    assert primed.why == "the load's arrays"
    assert result.parent_peak_rss is not None
    assert result.parent_peak_rss < before + 128 * MIB  # the 384 MiB primed is not in it
    assert "(priming included)" not in memory_text(result)
    assert "primed 0.4 GB of free memory in" in render_result(result)
