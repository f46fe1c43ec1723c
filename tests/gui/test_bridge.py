"""LoadController: a load in a thread, its records through a pipe, ticks and the outcome."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core import open_model
from modelmon.core.options import LoadOptions
from modelmon.core.storage import MemoryFacts
from modelmon.gui.bridge import LoadController

from .conftest import SLOW_OPTIONS, worker_processes


def test_a_load_ticks_then_finishes_with_every_byte(qtbot, small_model: Path):
    controller = LoadController()
    model = open_model(small_model)
    ticks = []
    controller.tick.connect(ticks.append)
    with qtbot.waitSignal(controller.finished, timeout=20_000) as finished:
        assert controller.start(model, "sequential", LoadOptions(workers=2, cache="cold"))
    result = finished.args[0]
    assert result.status == "ok" and result.bytes == model.total_bytes
    final = ticks[-1]
    assert final.phase == "done" and final.bytes_done == model.total_bytes
    assert sum(len(t.new_reads) for t in ticks) > 0
    live = controller.live
    binned = live.load_bins.mbps(live.last_end_s + 0.1, live.bin_s).sum() * live.bin_s * 1e6
    assert binned == pytest.approx(model.total_bytes)  # every read's bytes landed in a bin
    assert len(final.load_mbps) > 0
    assert not controller.running
    assert all(ready.qt_free for ready in controller.live.ready), "a worker imported Qt"


def test_an_unknown_strategy_fails_in_one_line(qtbot, small_model: Path):
    controller = LoadController()
    with qtbot.waitSignal(controller.failed, timeout=5_000) as failed:
        assert not controller.start(open_model(small_model), "teleport", LoadOptions())
    assert "unknown strategy 'teleport'" in failed.args[0]
    assert "\n" not in failed.args[0]


def test_refusing_a_load_larger_than_ram_becomes_failed(qtbot, small_model: Path, monkeypatch):
    tiny = MemoryFacts(total=1 << 20, available=1 << 20, page_cache=0, cgroup_limit=None,
                       cgroup_used=None, usable=1 << 20)
    monkeypatch.setattr("modelmon.core.runner.memory_facts", lambda: tiny)
    controller = LoadController()
    with qtbot.waitSignal(controller.failed, timeout=5_000) as failed:
        controller.start(open_model(small_model), "sequential", LoadOptions())
    assert "would not fit" in failed.args[0] and "\n" not in failed.args[0]
    assert not controller.running


def test_shutdown_mid_load_stops_workers_and_thread(qtbot, slow_model: Path):
    controller = LoadController()
    ticks = []
    controller.tick.connect(ticks.append)
    controller.start(open_model(slow_model), "sequential", SLOW_OPTIONS)
    qtbot.waitUntil(lambda: bool(ticks) and ticks[-1].bytes_done > 0, timeout=20_000)
    assert worker_processes()
    assert controller.shutdown()
    assert not controller.running
    assert worker_processes() == []
