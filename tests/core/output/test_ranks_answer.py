"""A ranks answer in words (``recommend --ranks N``, the app's ranks panel): memory in the
units of the limit it is held against, and what each time is the median of."""

from __future__ import annotations

import math
import re
import shlex
import subprocess
from dataclasses import replace

from modelmon.core.measuring.ranks_records import NodeMemory, RankResult, RanksResult
from modelmon.core.measuring.ranks_search import RanksRecommendation, RanksWay, WayMeasured
from modelmon.core.options import LoadOptions
from modelmon.core.output.ranks_answer import paste_lines, render_ranks_answer
from modelmon.core.output.text import render_ranks
from modelmon.core.system.cache import CacheState

GiB, MiB = 1 << 30, 1 << 20
DECIMAL = re.compile(r"\d (kB|MB|GB)\b")  # a byte count in decimal units (not MB/s)


def ranks_run(seconds: float, peak: int, held: int) -> RanksResult:
    state = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
    node = NodeMemory(peak, held, peak - held, True, None, held)
    ranks = tuple(RankResult(r, 1, 0.0, seconds, "ok", 1, 1, None) for r in range(2))
    return RanksResult("ok", "sequential", LoadOptions(), "/m", "slice", state, ranks, 1, node)


def ranks_found(*runs: RanksResult, limit: int = 10 * GiB) -> RanksRecommendation:
    way = RanksWay("slice", "sequential", LoadOptions(cache="cold"))
    pick = WayMeasured(way, needs_bytes=3 * GiB + 300 * MiB, runs=runs)
    return RanksRecommendation(
        model="/m/model.safetensors",
        model_bytes=2_520_000_000,
        ranks=2,
        memory_limit=limit,
        ways=(pick,),
        pick=pick,
        holds_at=6 * GiB,
        holds_verified=True,
        budget_s=120.0,
        seconds=100.0,
    )


def test_the_node_memory_is_said_in_the_limits_units() -> None:
    """Held against a 10 GiB limit, the node's peak is said in GiB too, never in GB beside
    it: one unit system in one sentence."""
    found = ranks_found(
        ranks_run(1.5, int(2.52e9), int(2.1e9)), ranks_run(1.7, int(2.6e9), int(2.2e9))
    )
    text = render_ranks_answer(found, None)
    head, ways = text.split("\n", 1)[0], text.split("Ways measured", 1)[1]
    assert "within 10 GiB" in head and "the node peaks at 2.4 GiB" in head
    assert "it held under a 6.0 GiB limit" in head
    assert not DECIMAL.search(head) and not DECIMAL.search(ways), text
    assert "node peak 2.4 GiB, 2.0 GiB held" in ways


def test_a_ways_time_of_one_run_is_that_runs() -> None:
    """One run: "(1 run)", no median of one; two or more: the median of them."""
    one = render_ranks_answer(ranks_found(ranks_run(1.5, 300 * MiB, 200 * MiB)), None)
    assert "slowest rank 1.50 s (1 run), node peak 300 MiB, 200 MiB held" in one
    assert "median of 1" not in one
    runs = ranks_run(1.5, GiB, GiB), ranks_run(1.7, GiB, GiB)
    two = render_ranks_answer(ranks_found(*runs), None)
    assert "slowest rank 1.60 s (median of 2 runs)" in two


def test_a_pick_on_fewer_runs_than_its_rounds_says_it_is_not_certain() -> None:
    one = render_ranks_answer(ranks_found(ranks_run(1.5, GiB, GiB)), None).split("\n")[0]
    assert one.endswith(
        " Not certain: only 1 run of it fitted the budget; give it a longer budget."
    )
    runs = [ranks_run(1.5 + i / 10, GiB, GiB) for i in range(3)]
    assert "Not certain" not in render_ranks_answer(ranks_found(*runs), None).split("\n")[0]


def test_load_ranks_says_the_node_memory_in_the_units_of_ram() -> None:
    """``modelmon load --ranks N``'s node memory in GiB and MiB, as its limit line and every
    figure of RAM say it, never in decimal MB beside them."""
    text = render_ranks(ranks_run(1.5, int(2.52e9), int(2.1e9)))
    (line,) = [line for line in text.splitlines() if line.startswith("node memory")]
    assert line.startswith("node memory: peak 2.3 GiB, "), line
    assert "(2.0 GiB anonymous, 401 MiB page cache and shared memory at most)" in line, line
    assert " MB" not in line and " GB" not in line, line


def close_ways() -> tuple[RanksRecommendation, WayMeasured, WayMeasured]:
    """The walk's ranks answer: a pick (slice) at 2.28 s, one-reader at 2.31 s ("+1 %
    slower", within NOISE), slice with O_DIRECT beyond it."""
    from dataclasses import replace

    from modelmon.core.measuring.ranks_search import NOISE

    found = ranks_found(ranks_run(2.28, int(2.6 * GiB), int(2.4 * GiB)))
    assert found.pick is not None
    near = WayMeasured(
        RanksWay("one-reader", "sequential", LoadOptions(workers=4, cache="cold")),
        needs_bytes=3 * GiB,
        runs=(ranks_run(2.31, int(2.8 * GiB), int(2.5 * GiB)),),
    )
    far = WayMeasured(
        RanksWay("slice", "direct", LoadOptions(cache="cold")),
        needs_bytes=3 * GiB,
        runs=(ranks_run(2.28 * (1 + 2 * NOISE), int(2.4 * GiB), int(2.4 * GiB)),),
    )
    return replace(found, ways=(found.pick, near, far)), near, far


def test_a_way_within_noise_of_the_pick_is_said_to_be_the_same_speed() -> None:
    """A "+2 % slower" beside the pick is no difference the search tells apart (NOISE: 5 %):
    the answer says which ways ran at its speed, and that it holds the least of them."""
    from modelmon.core.output.ranks_answer import same_speed_words

    found, near, far = close_ways()
    said = same_speed_words(found)
    assert said.startswith(
        "Within 5% of the pick's 2.28 s (ways this close are the same speed to the search): "
    )
    assert "what a memory limit cannot reclaim: 2.4 GiB held by the pick" in said
    assert near.way.spec in said and far.way.spec not in said
    assert said in render_ranks_answer(found, None).split("\n")


def test_a_pick_whose_node_peak_is_page_cache_says_so() -> None:
    """The fifth walk: the pick peaked at the 4 GiB limit but held 2.4 GiB, beside a way at
    2.8 GiB peak and 2.5 GiB held: its peak is page cache a limit reclaims, said."""
    from dataclasses import replace

    from modelmon.core.output.ranks_answer import same_speed_words

    found, near, _ = close_ways()
    assert found.pick is not None
    pick = replace(found.pick, runs=(ranks_run(2.28, 4 * GiB, int(2.4 * GiB)),))
    said = same_speed_words(replace(found, pick=pick, ways=(pick, near)))
    assert said.endswith(
        "2.4 GiB held by the pick; its node peak of 4.0 GiB is mostly page cache, which a "
        "limit reclaims."
    )


def test_a_limit_modelmon_planned_is_said_in_gib_like_the_peak_beside_it() -> None:
    found = ranks_found(ranks_run(1.5, int(2.52e9), int(2.1e9)))
    planned = replace(found, holds_at=2816 * MiB, holds_verified=False)
    head = render_ranks_answer(planned, None).split("\n")[0]
    assert "a 2.8 GiB limit should hold it (not run at it)" in head, head
    assert "MiB" not in head


def test_the_ranks_paste_line_runs_in_a_fresh_shell() -> None:
    """Pasted into a shell that has not activated modelmon's environment (no modelmon on
    its PATH), the line's command is found: its own path, or this Python's ``-m``."""
    line = paste_lines(ranks_found(ranks_run(1.5, GiB, GiB)), None)["modelmon"]
    command = shlex.split(line.split(" load ", 1)[0])
    done = subprocess.run(
        [*command, "--version"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith("modelmon "), (line, done.stderr)
    assert " load /m/model.safetensors --ranks 2 --ranks-mode slice" in line
