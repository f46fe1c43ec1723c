"""Which runs read past the page cache, decided from what the watch saw and what the child
harness (or a command's own report) touched: the ones timed by the loader's own clock
instead of the arrivals."""

from __future__ import annotations

import dataclasses

from modelmon.core.runs.direct import bypassed_cache, reads_direct
from modelmon.core.system.cache import CacheState
from modelmon.core.watching.result import DescriptionReport

from ..watching.test_findings import GB, a_file, a_result

NOTHING_ARRIVED = a_result((a_file(arrived_bytes=0, bytes_read=0, resident_after=0.0),))
WARM = CacheState("warm", 1.0, 1.0, True, False, "cachestat")


def _description(o_direct: bool, file: int = 0) -> DescriptionReport:
    return DescriptionReport(file, "/mnt/fuse/m.gguf", (100,), ((100, 3),), {}, "0", o_direct, 0, 0)


def test_direct_reads_are_known_or_seen_on_a_descriptor_of_the_model() -> None:
    assert reads_direct(NOTHING_ARRIVED, known=True)
    assert not reads_direct(NOTHING_ARRIVED)
    seen = dataclasses.replace(NOTHING_ARRIVED, descriptions=(_description(True),))
    assert reads_direct(seen)
    # An O_DIRECT descriptor on some other file says nothing of the model's reads.
    elsewhere = dataclasses.replace(NOTHING_ARRIVED, descriptions=(_description(True, 7),))
    assert not reads_direct(elsewhere)
    buffered = dataclasses.replace(NOTHING_ARRIVED, descriptions=(_description(False),))
    assert not reads_direct(buffered)


def test_bytes_touched_that_never_arrived_in_a_cold_cache_were_read_past_it() -> None:
    # No descriptor seen (opened and closed between two looks): the child touched the whole
    # model, and nothing arrived in a cache verified cold.
    assert bypassed_cache(NOTHING_ARRIVED, own_bytes=GB)
    # The child did not touch it: a lazy load, not one past the cache.
    assert not bypassed_cache(NOTHING_ARRIVED, own_bytes=GB // 100)
    assert not bypassed_cache(NOTHING_ARRIVED, own_bytes=None)
    # A report its tree's reads do not bear out (nothing read from storage) loads nothing.
    unread = dataclasses.replace(NOTHING_ARRIVED, read_bytes=GB // 100, read_chars=GB // 100)
    assert not bypassed_cache(unread, own_bytes=GB)
    # Its bytes arrived: a buffered load, timed by its arrivals.
    assert not bypassed_cache(a_result(), own_bytes=GB)
    # From a warm cache nothing arrives for anyone: not a sign of direct reads.
    assert not bypassed_cache(dataclasses.replace(NOTHING_ARRIVED, cache=WARM), own_bytes=GB)
    # Direct reads seen are past the cache whatever arrived.
    seen = dataclasses.replace(a_result(), descriptions=(_description(True),))
    assert bypassed_cache(seen, own_bytes=GB)
