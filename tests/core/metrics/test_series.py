"""RingTable keeps the newest rows in order; the schedule never drifts nor bursts."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from modelmon.core.metrics.base import Rate
from modelmon.core.metrics.sampler import next_slot
from modelmon.core.metrics.series import RingTable


def test_a_table_returns_what_was_appended_in_order_one_series_a_name():
    table = RingTable(["half", "negated"], 5)
    for index in range(3):
        table.append(100 + index, [index / 2, -index])
    series = table.arrays()
    times, values = series["half"]
    assert times.dtype == np.int64 and values.dtype == np.float64
    assert times.tolist() == [100, 101, 102] == series["negated"][0].tolist()
    assert values.tolist() == [0.0, 0.5, 1.0]
    assert series["negated"][1].tolist() == [0.0, -1.0, -2.0]
    assert len(table) == 3 and table.dropped == 0


def test_a_full_table_drops_the_oldest_and_stays_in_time_order():
    table = RingTable(["value"], 4)
    for index in range(11):
        table.append(index, [float(index)])
    times, values = table.arrays()["value"]
    assert times.tolist() == [7, 8, 9, 10]
    assert values.tolist() == [7.0, 8.0, 9.0, 10.0]
    assert len(table) == 4 and table.dropped == 7


def test_arrays_are_copies():
    table = RingTable(["value"], 3)
    table.append(1, [1.0])
    times, values = table.arrays()["value"]
    times[0], values[0] = 99, 99.0
    assert table.arrays()["value"][0].tolist() == [1]
    assert table.arrays()["value"][1].tolist() == [1.0]


def test_a_reader_never_sees_a_torn_series_while_a_writer_appends():
    table = RingTable(["value"], 64)
    stop = threading.Event()

    def write() -> None:
        index = 0
        while not stop.is_set():
            table.append(index, [float(index)])  # value == time: a torn copy would differ
            index += 1

    writer = threading.Thread(target=write, name="ring-writer")
    writer.start()
    try:
        for _ in range(300):
            times, values = table.arrays()["value"]
            assert np.array_equal(times.astype(np.float64), values)
            assert np.all(np.diff(times) == 1)
    finally:
        stop.set()
        writer.join()


def test_capacity_must_be_positive():
    with pytest.raises(ValueError):
        RingTable(["value"], 0)


def test_the_next_slot_follows_on_time_and_skips_the_missed_ones_after_an_overrun():
    t0, interval = 1_000, 100
    assert next_slot(t0, interval, now_ns=t0 + 105, slot=1) == 2  # on time: the next slot
    assert next_slot(t0, interval, now_ns=t0 + 99, slot=1) == 2  # woke a hair early
    # Slot 1 overran to t0 + 430: slots 2, 3 and 4 are skipped, not taken back to back.
    assert next_slot(t0, interval, now_ns=t0 + 430, slot=1) == 5


def test_a_rate_needs_a_baseline_and_restarts_when_the_counter_goes_back():
    rate = Rate()
    assert np.isnan(rate.update(0, 100.0))
    assert rate.update(500_000_000, 150.0) == pytest.approx(100.0)  # 50 in half a second
    assert np.isnan(rate.update(600_000_000, 10.0))  # reset
    assert rate.update(700_000_000, 20.0) == pytest.approx(100.0)
    assert np.isnan(rate.update(700_000_000, 30.0))  # no time passed


def test_rows_keep_the_interval_they_cover_and_the_newest_can_be_rewritten():
    table = RingTable(["rate", "level"], 3)
    assert table.last() is None
    for index in range(4):  # one more than fits: the oldest goes
        table.append(10 * (index + 1), [float(index), -float(index)], start_ns=10 * index)
    table.replace_last(45, [9.0, -9.0], start_ns=20)
    assert table.last() == (20, 45, [9.0, -9.0])
    rows = table.sampled()
    assert rows.starts.tolist() == [10, 20, 20] and rows.ends.tolist() == [20, 30, 45]
    placed = rows.placed({"rate": "interval"})
    assert placed["rate"][0].tolist() == [15, 25, 32]  # the middle of each interval
    assert placed["level"][0].tolist() == [20, 30, 45]  # an instant: when it was read
    assert placed["rate"][1].tolist() == [1.0, 2.0, 9.0]
