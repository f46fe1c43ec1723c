"""The A/B verdict in plain words, for each kind of verdict."""

from __future__ import annotations

import math
import re

from modelmon.core.measuring.ab import Verdict, judge
from modelmon.core.output.verdict import gain_text, pairs_lines, stopped_words, verdict_words


def test_faster_names_the_side_and_its_gain_in_percent():
    verdict = judge([1.12, 1.13, 1.14])
    assert verdict.text == "B faster"
    assert verdict_words(verdict, 3) == (
        "B is 13 % faster by the median pair: every one of the 3 pairs agrees (B/A per pair "
        "1.12–1.14×, 2 of the 3 pairs within ±1 % of their median)"
    )


def test_slower_b_is_said_as_a_faster_never_as_a_loss():
    verdict = judge([0.5, 0.52, 0.48])
    assert verdict.text == "A faster"
    words = verdict_words(verdict, 3)
    assert words.startswith(
        "A is 2.00× faster by the median pair: every one of the 3 pairs agrees (A/B per pair"
    )
    assert "1.92–2.08×" in words


def test_within_noise_says_who_is_ahead_and_why_it_is_not_certain():
    # The case: every pair favours B, yet the spread makes the gain uncertain.
    verdict = judge([1.04, 1.13, 2.79, 1.05, 1.3])
    assert verdict.text == "within noise"
    words = verdict_words(verdict, 5)
    assert words.startswith(
        "B is 13 % faster by the median pair; not certain: every pair favours B, but the pairs"
    )
    # Twice the spread is held in log space: said as the gain it allows (1.087² = 18 %).
    assert "1.04–2.79×" in words and "within twice that spread (up to 18 %)" in words
    disagree = verdict_words(judge([0.95, 1.1, 1.02]), 3)
    assert disagree.startswith(
        "B is 2.0 % faster by the median pair; not certain: the pairs disagree"
    )
    even = verdict_words(Verdict("within noise", 1.0001, 0.98, 1.02, 0.01), 3)
    assert even == (
        "A and B are as fast as each other (B/A per pair 0.98–1.02×, 2 of the 3 pairs within "
        "±1 % of their median)"
    )


def test_one_pair_is_too_few_to_be_certain():
    verdict = judge([1.3])
    assert verdict_words(verdict, 1) == (
        "B was 30 % faster in the one pair run; not certain: one pair gives no estimate of "
        "the noise, run more pairs"
    )


def test_one_pairs_verdict_says_why_once():
    verdict = judge([1.3])
    lines = pairs_lines([1.3], verdict, 1)
    assert sum(line.count("no estimate of") for line in lines) == 1, lines
    assert lines[0] == "B/A per pair: 1.30 → 1.30 (1 pair)"  # no median or range of one
    many = pairs_lines([1.2, 1.3, 1.4], judge([1.2, 1.3, 1.4]), 3)
    assert many[0].startswith("B/A per pair: 1.20 1.30 1.40 → 1.30 (median of 3 pairs, 1.20–1.40, ")
    # Walk 20: "half the pairs within ±4 % of the median" above a verdict that said "2 of
    # the 3 pairs within ±4 % of their median": one spread, counted one way in both lines.
    counted = "2 of the 3 pairs within ±8 % of their median"
    assert counted in many[0] and counted in many[1], many


def test_a_stopped_ab_has_no_verdict():
    assert stopped_words(True, 1, 3) == "A/B cancelled after 1 of 3 pairs: no verdict"
    assert stopped_words(False, 0, 3, "B run 1 failed: disk gone") == (
        "A/B stopped after 0 of 3 pairs: no verdict (B run 1 failed: disk gone)"
    )


def test_gain_text_switches_to_times_from_two():
    assert (gain_text(1.05), gain_text(1.5), gain_text(2.31)) == ("5.0 %", "50 %", "2.31×")


def test_the_spread_says_how_many_pairs_it_bounds():
    """Of 3 pairs the median absolute deviation bounds the median pair and the nearer other:
    2 of them, not "half"; of 2, both; of 6, at least 3."""
    from modelmon.core.output.verdict import spread_words

    verdict = judge([0.8, 1.0, 1.3])  # deviations from the median pair: 0.22, 0, 0.26
    assert spread_words(verdict.noise, 3) == "2 of the 3 pairs within ±25 % of their median"
    assert spread_words(0.05, 2) == "both pairs within ±5 % of their median"
    # Rounded up: the sixth walk's nearer pair, 2.4 % off the median, is within ±3 %.
    assert spread_words(0.024, 3) == "2 of the 3 pairs within ±3 % of their median"
    assert spread_words(0.05, 6) == "3 of the 6 pairs within ±5 % of their median"
    assert spread_words(0.05) == "half the pairs within ±5 % of the median"


def test_the_band_is_always_the_pairs_own_spread():
    """Every verdict's ± is its pairs' spread: an A/B timed to a watch's samples says the
    timing's bound in words of its own, so two A/Bs never show two quantities as one band
    (±15 % of spread, then ±75 % of timing)."""
    for verdict in (
        judge([1.12, 1.13, 1.14]),
        judge([0.95, 1.1, 1.02]),
        judge([1.3, 1.1, 1.18]),
        judge([1.06, 1.06, 1.06], resolution=0.75),
        judge([1.05, 1.2, 1.1], resolution=0.15),
    ):
        words = verdict_words(verdict, 3)
        assert re.findall(r"±(\d+) %", words) == [f"{math.ceil(verdict.noise * 100)}"], words
