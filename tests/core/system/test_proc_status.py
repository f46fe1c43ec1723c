"""This process's own sizes, read from /proc/self/status."""

from __future__ import annotations

import mmap

from modelmon.core.system.proc_status import left_out_of_peak, own_peak_watch, own_status_bytes


def test_peak_and_current_rss_follow_memory_this_process_touches() -> None:
    before = own_status_bytes("VmHWM:")
    assert before is not None and before > 0
    size = before + (64 << 20)  # past the old peak, whatever it was
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for offset in range(0, size, mmap.PAGESIZE):
            memory[offset] = 1
        rss, peak = own_status_bytes("VmRSS:"), own_status_bytes("VmHWM:")
        assert rss is not None and peak is not None
        assert rss >= size and peak >= rss
    finally:
        memory.close()


def test_a_line_that_is_not_there_is_none() -> None:
    assert own_status_bytes("NoSuchField:") is None


def touch(size: int) -> None:
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        for offset in range(0, size, mmap.PAGESIZE):
            memory[offset] = 1
    finally:
        memory.close()


def test_a_peak_watch_sees_its_own_span_not_the_process_lifetime() -> None:
    touch(96 << 20)  # an earlier peak of this process
    with own_peak_watch() as peak:
        first = peak()
        rss = own_status_bytes("VmRSS:")
        assert first is not None and rss is not None
        assert first < rss + (48 << 20)  # the earlier 96 MiB is not this watch's
        touch(64 << 20)
        during = peak()
        assert during is not None and during >= rss + (56 << 20)


def test_overlapping_watches_share_one_reset() -> None:
    with own_peak_watch() as outer:
        touch(64 << 20)
        with own_peak_watch() as inner:  # does not forget what the outer watch saw
            seen = inner()
            assert seen is not None and seen == outer()


def test_memory_touched_and_given_back_in_a_left_out_span_is_not_the_watchs_peak() -> None:
    with own_peak_watch() as peak:
        rss = own_status_bytes("VmRSS:")
        assert rss is not None
        touch(64 << 20)  # the run's own: kept in its peak
        kept = peak()
        assert kept is not None and kept >= rss + (56 << 20)
        with left_out_of_peak():
            touch(128 << 20)  # priming: touched and given back
        after = peak()
        assert after is not None and after == max(kept, own_status_bytes("VmHWM:") or 0)
        assert after < rss + (112 << 20)  # the 128 MiB span is not in it, the 64 MiB one is


def test_a_span_left_out_with_no_watch_running_leaves_the_peak_alone() -> None:
    with left_out_of_peak():
        touch(64 << 20)
    peak, rss = own_status_bytes("VmHWM:"), own_status_bytes("VmRSS:")
    assert peak is not None and rss is not None and peak >= rss + (56 << 20)
