"""The race's cut: a run on course for more than CUT_FACTOR × the leader's load time, never
before JUDGE_AFTER_S."""

from __future__ import annotations

import time

from modelmon.core.measuring.cutoff import (
    CUT_FACTOR,
    JUDGE_AFTER_S,
    TRICKLE,
    RaceStop,
    cut_reason,
)

GB = 1_000_000_000


def test_far_behind_the_leader_is_cut_with_the_figures() -> None:
    leader_s, t = 10.0, JUDGE_AFTER_S + 3.0
    on_the_line = t * GB / (CUT_FACTOR * leader_s)  # bytes by t of a run at 1/F the pace
    reason = cut_reason(t, int(on_the_line) - 1, GB, leader_s)
    assert reason is not None and reason.startswith("cut early")
    assert f"after {t:.2f} s" in reason and f"{CUT_FACTOR:g}× the leader's 10.00 s" in reason
    assert cut_reason(t, int(on_the_line) + 1, GB, leader_s) is None


def test_no_cut_before_the_grace_or_without_a_leader() -> None:
    assert cut_reason(JUDGE_AFTER_S / 2, 0, GB, 0.01) is None
    assert cut_reason(10.0, 0, GB, None) is None
    assert cut_reason(JUDGE_AFTER_S, 0, GB, 0.01) is not None


def test_under_half_the_leader_s_pace_is_cut_at_any_moment() -> None:
    """0.46× the leader is on course for 2.17× its time: cut, before and after the leader's
    own load time has passed; 0.55× may still finish within twice it."""
    leader_s = 10.0
    for t in (JUDGE_AFTER_S, 5.0, leader_s, 15.0):
        assert cut_reason(t, int(0.46 * GB * t / leader_s), GB, leader_s) is not None
        assert cut_reason(t, int(0.55 * GB * t / leader_s), GB, leader_s) is None
    assert cut_reason(CUT_FACTOR * leader_s + 0.1, GB - 1, GB, leader_s) is not None


def test_a_trickle_before_the_reads_begin_does_not_count_as_the_load() -> None:
    """Another loader's clock starts at its model's first page to arrive: a page that came
    1.5 s before its imports were done, then 25 MB in the first moments of its reads, is no
    pace (it was cut so, though it ran as fast as the leader before and after). Its pace
    counts from the last moment no more than TRICKLE of the model had arrived."""
    total, leader_s = 1_262 * 10**6, 1.45
    assert cut_reason(1.54, 25 * 10**6, total, leader_s) is not None  # from the first page
    assert cut_reason(1.54, 25 * 10**6, total, leader_s, since=(1.50, 1 << 20)) is None
    # Judged JUDGE_AFTER_S after it, at half the leader's pace or less it is cut all the same.
    then, before = 1.50, 1 << 20
    t = then + JUDGE_AFTER_S
    slow = before + int(0.45 * total / leader_s * JUDGE_AFTER_S)
    assert cut_reason(t, slow, total, leader_s, since=(then, before)) is not None


class Trickling:
    """A run ``started_s`` into its load (its first page's arrival) with ``loaded`` bytes."""

    def __init__(self, started_s: float, loaded: int) -> None:
        self.load_started_ns = time.perf_counter_ns() - int(started_s * 1e9)
        self.loaded_bytes = loaded


def test_a_race_stop_judges_a_run_from_the_end_of_its_trickle() -> None:
    total = GB
    stop = RaceStop(None, 1.0, total)
    run = Trickling(JUDGE_AFTER_S + 0.5, int(TRICKLE * total))  # a trickle for 2 s
    stop.watch(run)
    assert not stop.is_set()
    run.loaded_bytes = total // 20  # its reads begin: 5 % by now is no pace yet
    assert not stop.is_set() and stop.cut_at is None
    # A run past its trickle from its first page on, at 1/40 of the leader's pace: cut.
    slow = RaceStop(None, 1.0, total)
    slow.watch(Trickling(2 * JUDGE_AFTER_S, total // 20))
    assert slow.is_set() and slow.reason is not None and slow.reason.startswith("cut early")
