"""The live view (Qt-free): throughput bins, access points, read by cursor from a load's log."""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from modelmon.core import Model, open_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun, ReadBatch, Session, WorkerReady
from modelmon.core.system import Primed
from modelmon.gui.state.live import LiveView, display_bin_s
from modelmon.gui.state.pacing import BASE_S, MAX_S, FramePacer


def test_shown_bins_get_coarser_as_the_load_goes_on():
    assert display_bin_s(0.3) == 0.01
    assert display_bin_s(1.5) == 0.02
    assert display_bin_s(4.0) == 0.05
    assert display_bin_s(600.0) == 0.1


def test_the_view_stacks_files_and_counts_only_load_bytes(two_file_model: Model):
    # A LoadRun that is not run: the records below are what its workers would send it.
    load = LoadRun(two_file_model, "sequential", LoadOptions(workers=1))
    view = LiveView(load)
    t0 = 1_000_000_000
    assert view.update(t0).phase == "starting workers"
    load.ready[0] = WorkerReady(0, 123, 2, 4_999_984, True)
    assert view.update(t0).phase == "preparing cache" and view.update(t0).priming == ""
    load.priming = Primed(bytes=3 << 30, wanted=5 << 30, why="capped at half of …")
    assert view.update(t0).priming == "priming 3.2 GB of free memory (capped at half of …)"
    load.reads.add(
        ReadBatch(
            0, (1,), (1000,), (500_000,), (t0 + 10_000_000,), (t0 + 20_000_000,), prefetch=True
        )
    )
    load.reads.add(
        ReadBatch(
            0,
            (0, 1),
            (8, 8),
            (1_000_000, 1_000_000),
            (t0, t0 + 30_000_000),
            (t0 + 10_000_000, t0 + 40_000_000),
        )
    )
    load.t0_ns = t0
    update = view.update(t0 + 500_000_000)
    assert update.phase == "loading" and view.cursor == 3
    assert update.bytes_done == 2_000_000  # the prefetch read is not load progress
    assert update.fraction == pytest.approx(2_000_000 / 4_999_984)  # of the tensor bytes
    reads = update.new_reads
    assert len(reads) == 3
    # File b starts after file a's 2 MB: its offset 8 is 2.000008 MB up the stacked axis.
    assert list(reads.prefetch) == [True, False, False]
    assert reads.y_start == pytest.approx([2.001, 0.000008, 2.000008])
    assert reads.y_end[1] == pytest.approx(1.000008)
    assert len(view.update(t0 + 540_000_000).new_reads) == 0  # nothing new since the cursor
    final = view.update(t0 + 600_000_000, final=True)
    assert final.phase == "done" and len(final.new_reads) == 0
    assert final.load_mbps.sum() * final.bin_s * 1e6 == pytest.approx(2_000_000)
    assert final.prefetch_mbps.sum() * final.bin_s * 1e6 == pytest.approx(500_000)
    assert final.recent_mbps == pytest.approx(2.0 / final.elapsed_s)  # the whole load's
    assert view.workers_qt_free
    with pytest.raises(RuntimeError):  # the view let go of the load
        view.update(t0 + 700_000_000)


def test_the_rate_and_eta_follow_the_last_second(two_file_model: Model):
    load = LoadRun(two_file_model, "sequential", LoadOptions(workers=1))
    view = LiveView(load)
    t0 = 1_000_000_000
    load.t0_ns = t0
    # 1 MB in the first 100 ms, then nothing for 2 s: the recent rate drops to zero.
    load.reads.add(ReadBatch(0, (0,), (8,), (1_000_000,), (t0,), (t0 + 100_000_000,)))
    early = view.update(t0 + 400_000_000)
    assert early.recent_mbps == pytest.approx(1.0 / 0.25, rel=0.05)  # over the settled bins
    left = early.bytes_total - early.bytes_done
    assert early.eta_s == pytest.approx(left / (early.recent_mbps * 1e6))
    stalled = view.update(t0 + 2_300_000_000)
    assert stalled.recent_mbps == 0.0 and math.isinf(stalled.eta_s)


def test_the_view_reads_a_running_load_by_cursor_in_bounded_steps(sharded_model: Path):
    model = open_model(sharded_model)
    options = LoadOptions(workers=2, chunk=16 << 10, cache="keep")
    session = Session(model, "pread", options, monitor=False)
    view = LiveView(session.load, max_reads=64)
    runner = threading.Thread(target=session.run)
    runner.start()
    updates = []
    while runner.is_alive():  # the GUI thread's ticks, as fast as they come
        before = view.cursor
        updates.append(view.update(session.load.t0_ns or 1))
        assert view.cursor - before <= 64 + 256  # whole batches of at most 256 reads
    runner.join()
    updates.append(view.update(0, final=True))
    assert view.cursor == session.load.reads.count > 0
    assert sum(len(u.new_reads) for u in updates) == session.load.reads.count
    assert updates[-1].bytes_done == model.total_bytes
    binned = view.load_bins.mbps(view.last_end_s + 0.1, view.bin_s).sum() * view.bin_s * 1e6
    assert binned == pytest.approx(model.total_bytes)  # every read's bytes landed in a bin


def test_plots_redraw_less_often_while_the_event_loop_lags():
    pacer = FramePacer(tick_s=0.04)
    now, frames = 0.0, 0
    for _ in range(60):  # 2.4 s of ticks on time: a redraw on every third 40 ms tick
        now += 0.04
        frames += pacer.tick(now)
    assert 19 <= frames <= 21 and pacer.interval_s == BASE_S
    for _ in range(10):  # the loop lags 60 ms a tick: redraws back off, to MAX_S at most
        now += 0.1
        pacer.tick(now)
    assert pacer.interval_s == MAX_S
    for _ in range(200):  # on time again: back to the base rate
        now += 0.04
        pacer.tick(now)
    assert pacer.interval_s == BASE_S
    pacer.pause()  # between loads the tick stops: the gap to the next one is no lag
    now += 5.0
    assert pacer.tick(now) and pacer.interval_s == BASE_S
