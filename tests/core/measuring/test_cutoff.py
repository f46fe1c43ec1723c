"""The race's cut: by bytes behind the leader at the same moment, never before the grace."""

from __future__ import annotations

from modelmon.core.measuring.cutoff import (
    CUT_FRACTION,
    GRACE_FRACTION,
    GRACE_S,
    LAG_S,
    LATE_CUT_FRACTION,
    Curve,
    cut_reason,
)


def test_curve_interpolates_and_saturates() -> None:
    curve = Curve([(0.5, 400)], seconds=1.0, total=1000)
    assert curve.bytes_at(0.25) == 200
    assert curve.bytes_at(0.75) == 700
    assert curve.bytes_at(5.0) == 1000


def test_far_behind_the_leader_is_cut_with_the_figures() -> None:
    leader = Curve([], seconds=10.0, total=1_000_000_000)
    t = max(GRACE_S, GRACE_FRACTION * leader.seconds) + 1.0
    ahead = leader.bytes_at(t - LAG_S)  # what the leader had, with the reports' lag granted
    assert ahead == 0.1 * (t - LAG_S) * 1e9
    reason = cut_reason(t, int(CUT_FRACTION * ahead) - 1, leader)
    assert reason is not None and reason.startswith("cut early")
    assert f"after {t:.2f} s" in reason and f"leader's {ahead / 1e6:.0f} MB" in reason
    assert cut_reason(t, int(CUT_FRACTION * ahead) + 1, leader) is None


def test_no_cut_before_the_grace_or_without_a_leader() -> None:
    leader = Curve([], seconds=0.01, total=100)
    assert cut_reason(GRACE_S / 2, 0, leader) is None
    assert cut_reason(10.0, 0, None) is None
    assert cut_reason(GRACE_S, 0, leader) is not None


def test_under_half_when_the_leader_had_finished_is_cut() -> None:
    """0.46× the leader never trips the 1/3 rule; once the leader's whole load time has
    passed, under half of the model is 2× slower or more."""
    leader = Curve([], seconds=10.0, total=1_000_000_000)
    rate = 0.46 * 1e8  # bytes per second
    assert cut_reason(10.0, int(rate * 10.0), leader) is None  # the lag not yet granted
    t = 10.0 + LAG_S
    reason = cut_reason(t, int(rate * t), leader)
    assert reason is not None and "when the leader had loaded all 1000 MB" in reason
    assert cut_reason(t, int(LATE_CUT_FRACTION * 1e9) + 1, leader) is None
