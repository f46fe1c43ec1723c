"""The race's cut: a run on course for more than CUT_FACTOR × the leader's load time, never
before JUDGE_AFTER_S."""

from __future__ import annotations

from modelmon.core.measuring.cutoff import CUT_FACTOR, JUDGE_AFTER_S, cut_reason

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
