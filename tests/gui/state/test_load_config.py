"""A panel's knobs (Qt-free): chunk sizes as text, and the options a load really gets."""

from __future__ import annotations

from modelmon.core import STRATEGIES
from modelmon.core.options import LoadOptions
from modelmon.gui.state.load_config import KNOBS, chunk_text, effective_options


def test_chunk_sizes_read_in_the_largest_unit_that_divides_them():
    assert [chunk_text(n) for n in (4096, 3 << 20, 1 << 30, 3000)] == [
        "4 KiB",
        "3 MiB",
        "1 GiB",
        "3000 B",
    ]


def test_options_a_strategy_does_not_use_go_back_to_their_defaults():
    edited = LoadOptions(workers=3, chunk=1 << 20, fadvise="sequential", madvise="random")
    pread = effective_options("pread", edited, discard_forced=False)
    uses = STRATEGIES["pread"].uses
    for name in KNOBS:
        expected = getattr(edited if name in uses else LoadOptions(), name)
        assert getattr(pread, name) == expected, name
    shared = effective_options("mmap-shared-fd", edited, discard_forced=False)
    assert shared.fadvise == "none" and shared.workers == 3


def test_forced_discard_stays_on_whatever_the_strategy():
    edited = LoadOptions(discard=True)
    for name, cls in STRATEGIES.items():
        assert effective_options(name, edited, discard_forced=True).discard, name
        if "discard" not in cls.uses:
            assert not effective_options(name, edited, discard_forced=False).discard, name
