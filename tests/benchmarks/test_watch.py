"""benchmarks/watch.py on a small local model: each bench function runs end to end and says
what the bench will tabulate (the full runs are by hand or ./dev bench: minutes each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks import watch as bench
from modelmon.core import write_safetensors_model


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bench-watch")
    return write_safetensors_model(folder, layers=4, hidden=512, vocab=4096, seed=5)


def test_watched_against_the_programs_own_timing(model: Path, tmp_path: Path) -> None:
    row = bench.watch_once(model, "read-whole", tmp_path, interval_s=0.01)
    assert row.exit_code == 0 and row.cold and row.watched_bytes == model.stat().st_size
    assert row.own_mbps and row.watched_mbps > 0 and row.ratio and row.ratio > 0
    # On one clock: the arrivals overlap the program's own load (scans are spaced by their
    # CPU budget, so each end may be off by a scan window).
    assert row.first_byte_s is not None and row.last_byte_s is not None
    assert row.first_byte_s <= row.last_byte_s
    assert row.own_start_s < row.last_byte_s and row.first_byte_s < row.own_end_s


def test_overhead_and_its_control_run(model: Path) -> None:
    for control in (False, True):
        found = bench.watch_overhead(model, pairs=1, interval_s=0.02, control=control)
        assert found.control is control and len(found.ratios) == 1
        assert found.median_seconds_plain > 0
        assert (found.watch_core_share_median is None) is control
