"""This process's own sizes, read from /proc/self/status."""

from __future__ import annotations

import mmap

from modelmon.core.system.proc_status import own_status_bytes


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
