"""How the window words an A/B verdict and the ceilings (Qt-free)."""

from __future__ import annotations

import dataclasses
import math

from modelmon.core import ABResult, Ceiling, Ceilings, Verdict
from modelmon.core.measuring import SideSummary
from modelmon.gui.state.formatting import (
    ab_detail_lines,
    ceiling_label,
    ceilings_forms,
    ceilings_text,
    nice_ceiling,
    verdict_text,
)


def test_the_verdict_label_is_the_sentence_capitalised():
    b_wins = Verdict("B faster", 2.31, 2.10, 2.52, 0.03)
    assert verdict_text(b_wins, 3).startswith(
        "B is 2.31× faster by the median pair: every one of the 3 pairs"
    )
    tie = Verdict("within noise", 1.0, 0.95, 1.05, 0.02)
    assert verdict_text(tie, 3).startswith("A and B are as fast as each other")


def test_ceilings_read_as_one_line_in_mb_per_s():
    ceilings = Ceilings(
        "m",
        (
            Ceiling("sequential_read", 480.4, (480.4,), "", True),
            Ceiling("parallel_read", 1250.0, (1250.0,), "", True),
            Ceiling("memcpy", 9812.0, (9812.0,), "", None),
        ),
    )
    assert ceilings_text(ceilings) == (
        "ceilings: sequential 480 MB/s · parallel 1,250 MB/s · memcpy 9,812 MB/s"
    )
    assert ceilings_text(Ceilings("m", ())) == "no ceilings measured"


def test_the_ceilings_are_said_shorter_with_their_bounds_first():
    rates = {"sequential_read": 480.0, "memory_fill": 3641.0, "storage": 1300.0, "memcpy": 9812.0}
    ceilings = Ceilings(
        "m", tuple(Ceiling(name, mbps, (mbps,), "x", True) for name, mbps in rates.items())
    )
    forms = ceilings_forms(ceilings, "measured 14:02")
    assert forms[0] == f"{ceilings_text(ceilings)} (measured 14:02)"
    assert forms[1:] == [
        "storage 1,300 MB/s · memory fill 3,641 MB/s · +2 more (measured 14:02)",
        "storage 1,300 MB/s · memory fill 3,641 MB/s · +2 more",
        "storage 1,300 MB/s · memory fill 3,641 MB/s (measured 14:02)",
        "storage 1,300 MB/s · memory fill 3,641 MB/s",
        "storage 1,300 · memory fill 3,641 MB/s",
    ]
    # No bound measured (an older set): the first ceiling stands for them.
    reads = Ceilings("m", (Ceiling("sequential_read", 480.0, (480.0,), "x", True),))
    assert ceilings_forms(reads, "w")[1:] == [
        "sequential 480 MB/s (w)",
        "sequential 480 MB/s",
    ]


def test_ranges_grow_in_nice_steps():
    assert [nice_ceiling(v) for v in (0.07, 0.1, 0.11, 2.5, 7.2, 950)] == [
        0.08,
        0.1,
        0.15,
        3.0,
        8.0,
        1000.0,
    ]
    assert nice_ceiling(0.0) == nice_ceiling(math.nan) == 1.0


def test_an_ab_details_each_side_and_the_pairs():
    a = SideSummary("sequential", 2, 480.0, 470.0, 490.0, 1.0, 0.98, 1.02, 0.01)
    b = SideSummary("pread", 2, 12_500.0, 12_000.0, 13_000.0, 0.04, 0.037, 0.041, 0.02)
    ab = ABResult(a, b, (25.53, 26.0), Verdict("B faster", 25.8, 25.53, 26.0, 0.01), cache="warm")
    assert ab_detail_lines(ab) == [
        "A: sequential: 480 MB/s (median of 2 runs, 470 MB/s–490 MB/s)",
        "B: pread: 12.5 GB/s (median of 2 runs, 12.0 GB/s–13.0 GB/s)",
        "pairs B/A: 25.53, 26.00; cache: warm",
    ]
    once = dataclasses.replace(ab, a=dataclasses.replace(a, runs=1, min_mbps=480, max_mbps=480))
    assert ab_detail_lines(once)[0] == "A: sequential: 480 MB/s (1 run)"  # no range of one


def test_a_panels_line_names_every_knob_its_strategy_uses_defaults_included():
    from modelmon.core.options import LoadOptions
    from modelmon.gui.state.load_config import full_spec_text

    assert full_spec_text("sequential", LoadOptions(cache="cold")) == (
        "sequential workers=1 threads=4 chunk=8MiB fadvise=none partition=contiguous cache=cold"
    )
    assert full_spec_text("sequential", LoadOptions(discard=True, readahead=1024)).endswith(
        "cache=keep discard=true readahead=1024"
    )


def test_a_share_above_its_bound_beyond_the_spread_is_marked_not_shown_as_efficiency():
    from modelmon.core import Ceiling, Ceilings
    from modelmon.gui.state.results_rows import above_bound

    ceilings = Ceilings("m", (Ceiling("storage", 1000.0, (950.0, 1000.0, 1050.0), "sweep", True),))
    assert not above_bound((1.04, "storage"), ceilings)  # within its ±5 % spread
    assert above_bound((1.16, "storage"), ceilings)
    single = Ceilings("m", (Ceiling("storage", 1000.0, (1000.0,), "sweep", True),))
    assert not above_bound((1.01, "storage"), single) and above_bound((1.03, "storage"), single)


def test_a_ceiling_label_names_ceilings_of_one_rate_together_and_never_cuts_a_rate():
    group = [("storage", 908.0), ("sequential", 908.0), ("parallel", 950.0)]
    rooms = (99, 20, 5)
    forms = [ceiling_label(group, lambda text, room=room: len(text) <= room) for room in rooms]
    assert forms == [
        "parallel 950 MB/s · storage · sequential 908 MB/s",
        "950 · 908 MB/s",
        "950 MB/s +2",  # the shortest, even when nothing fits
    ]
    assert ceiling_label([("memcpy", 12_000.0)], lambda text: True) == "memcpy ceiling 12.0 GB/s"


def test_a_bucket_load_s_tip_says_how_the_throttles_paced_it() -> None:
    from modelmon.core import ReadStats
    from modelmon.core.storage import PacePoint
    from modelmon.gui.state.formatting import requests_tip

    pace = (PacePoint(0.0, 4, 8 << 20), PacePoint(0.1, 1, 64 << 20), PacePoint(0.5, 3, 64 << 20))
    stats = ReadStats(22, 10**9, 5.0, 0.02, 0.2, 10, 10, 0, (), pace)
    assert requests_tip(stats).splitlines()[-1] == (
        "paced by the throttles: 4 connections × 8 MiB at the start, 1 at the fewest, parts "
        "up to 64 MiB; 3 × 64 MiB at the end"
    )
    steady = ReadStats(22, 10**9, 5.0, 0.02, 0.2, 0, 0, 0, (), pace[:1])
    assert "paced" not in requests_tip(steady)


def test_an_ab_config_says_which_figure_its_verdict_gives():
    """The walk's A/B: "A is 69 % faster" (the median pair) beside medians of 1,626 and
    1,163 MB/s (1.40×): the file says which figure is which; where they agree, nothing."""
    from modelmon.gui.state.ab_config import explain_ab, pick

    a = SideSummary("sequential", 3, 1626.0, 974.0, 2247.0, 1.55, 1.1, 2.6, 0.3)
    b = SideSummary("mmap-shared-fd workers=4", 3, 1163.0, 798.0, 1333.0, 2.2, 1.9, 3.2, 0.2)
    verdict = Verdict("within noise", 1 / 1.69, 0.49, 1.19, 0.21, pairs=3)
    ab = ABResult(a, b, (0.59, 0.49, 1.19), verdict)
    lines = explain_ab(ab, pick(ab))
    assert (
        "The verdict's figure is the median of the pairs' B/A ratios (0.59), each of two runs "
        "made back to back; the sides' medians, of all their runs, are 0.72 B/A."
    ) in lines
    agreeing = dataclasses.replace(ab, verdict=dataclasses.replace(verdict, median_ratio=0.71))
    assert not [line for line in explain_ab(agreeing, pick(agreeing)) if "figure" in line]
