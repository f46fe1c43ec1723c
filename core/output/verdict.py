"""An A/B verdict in plain words: which side is faster, by how much, and how certain that is.

"B faster: 1.13×" or "within noise, B/A 1.13×" makes the reader do the arithmetic and guess
why; these sentences say it: "B is 13 % faster by the median pair; not certain: every pair
favours B, but the pairs vary 1.04–2.79× (half of them within ±9 % of the median)". The
noise is said as what it is (the median distance of a pair from the median pair), so that a
small one beside a wide range reads as it should: most pairs agree, a few do not. The app's
verdict label and the CLI's A/B text use them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from modelmon.core.measuring.ab import BY_READY, PhaseShift, Verdict
from modelmon.core.output.comparison import twice_bound
from modelmon.core.output.run_words import counted, median_words

__all__ = [
    "gain_text",
    "pairs_lines",
    "phase_name",
    "shift_words",
    "sooner_text",
    "spread_words",
    "stopped_words",
    "verdict_words",
]
# A server's phases as the verdict names them.
PHASE_NAMES = {"before": "before the weights", "weights": "the weights", "after": "after them"}


def spread_words(noise: float, pairs: int | None = None) -> str:
    """The pairs' noise (``Verdict.noise``: exp of the median absolute deviation of the log
    ratios, minus 1) as what it means. Of ``pairs`` pairs, as many as it bounds: at least
    half of them (rounded up), both of two ("2 of the 3 pairs within ±29 % of their
    median": of three pairs the median one and the nearer of the others, not "half" of
    them); without the count, "half the pairs within ±7 % of the median"."""
    # Rounded up: a pair 2.4 % off its median is not "within ±2 %".
    within = f"±{math.ceil(noise * 100 - 1e-9):.0f} %"
    if pairs is None or pairs < 2:
        return f"half the pairs within {within} of the median"
    if pairs == 2:
        return f"both pairs within {within} of their median"
    return f"{math.ceil(pairs / 2)} of the {pairs} pairs within {within} of their median"


def gain_text(ratio: float) -> str:
    """How much faster a side is, from its speed ratio (≥ 1): "13 %", "2.31×" from 2× on (as
    every ratio is said, so that one comparison never shows as two figures)."""
    if ratio >= 2:
        return f"{ratio:.2f}×"
    percent = (ratio - 1) * 100
    return f"{percent:.1f} %" if percent < 10 else f"{percent:.0f} %"


def sooner_text(ratio: float) -> str:
    """How much sooner a server is ready, from its speed-up (the other's time to ready over
    its own, ≥ 1): "in 31 % less time", "2.50× sooner" from 2× on."""
    if ratio >= 2:
        return f"{ratio:.2f}× sooner"
    less = (1 - 1 / ratio) * 100
    return f"in {less:.1f} % less time" if less < 10 else f"in {less:.0f} % less time"


def _range(low: float, high: float) -> str:
    return f"{low:.2f}–{high:.2f}×"


def verdict_words(verdict: Verdict, pairs: int) -> str:
    """The verdict of ``pairs`` A/B pairs as a sentence (the "not verified cold" note aside).

    Kinds: a side faster (every pair agrees, the gain beyond twice the noise); a side ahead
    but not certain (the pairs disagree, or the gain is within the noise); as fast as each
    other; one pair only (no estimate of the noise at all).
    """
    ratio, low, high = verdict.median_ratio, verdict.min_ratio, verdict.max_ratio
    # Servers are compared by their time to ready: the same ratio, said as who is ready first.
    ready = verdict.by == BY_READY

    def ahead(who: str, verb: str, gain: float) -> str:
        if ready:
            return f"{who} {verb} ready {sooner_text(gain)}"
        return f"{who} {verb} {gain_text(gain)} faster"

    leader, trailer = "B", "A"
    if ratio < 1:  # say the leader's gain, not the other's loss: A's speed over B's
        leader, trailer = "A", "B"
        ratio, low, high = 1 / ratio, 1 / high, 1 / low
    noise = spread_words(verdict.noise, pairs)
    ratios = (
        f"{trailer}'s time to ready over {leader}'s per pair {_range(low, high)}"
        if ready
        else f"{leader}/{trailer} per pair {_range(low, high)}"
    )
    if pairs < 2:
        return (
            f"{ahead(leader, 'was', ratio)} in the one pair run; not certain: one "
            "pair gives no estimate of the noise, run more pairs"
        )
    if verdict.text in ("A faster", "B faster"):
        return (
            f"{ahead(leader, 'is', ratio)} by the median pair: every one of the "
            f"{pairs} pairs agrees "
            f"({ratios}, {noise})"
        )
    if round((ratio - 1) * 100, 1) == 0:
        alike = "ready as soon as" if ready else "as fast as"
        return f"A and B are {alike} each other ({ratios}, {noise})"
    if verdict.within_timing:
        # The ± is the pairs' own spread in every verdict; the timing's bound is said in
        # its own words: beside it, a second ± of another quantity reads as the same band.
        why = (
            f"timed to the watch's samples, no finer than {verdict.resolution * 100:.0f} % "
            f"({ratios}, {noise}): a larger model times finer"
            if not ready
            else f"its ready is seen no finer than {verdict.resolution * 100:.0f} % "
            f"({ratios}, {noise})"
        )
    elif low < 1:
        why = f"the pairs disagree on which is faster ({ratios}, {noise})"
    else:  # the gain twice the spread allows, said as the gain is (twice ±10 % is 21 %)
        bound = twice_bound(ratio, math.log1p(verdict.noise), gain_text)
        why = (
            f"every pair favours {leader}, but the pairs vary {_range(low, high)} ({noise}): "
            f"the gain is within twice that spread ({bound}), run more pairs"
        )
    return f"{ahead(leader, 'is', ratio)} by the median pair; not certain: {why}"


def pairs_lines(ratios: Sequence[float], verdict: Verdict, pairs: int) -> list[str]:
    """An A/B's pairs and its verdict, as the CLI's reports end: "B/A per pair: …" and
    "verdict: …"."""
    each = " ".join(f"{r:.2f}" for r in ratios)
    # Counted as the verdict under it counts them: one spread, said one way.
    spread = spread_words(verdict.noise, len(ratios))
    span = f"{verdict.min_ratio:.2f}–{verdict.max_ratio:.2f}, {spread}"
    of = median_words(counted(len(ratios), "pair"), len(ratios), span)
    head = "A/B time to ready per pair" if verdict.by == BY_READY else "B/A per pair"
    return [
        f"{head}: {each} → {verdict.median_ratio:.2f} ({of})",
        # The words say what a note would (one pair: no noise known), once.
        f"verdict: {verdict_words(verdict, pairs)}",
    ]


def stopped_words(cancelled: bool, pairs_done: int, pairs: int, error: str | None = None) -> str:
    """An A/B that ended without a verdict: cancelled, or a run failed."""
    done = f"after {pairs_done} of {pairs} pairs" if pairs else ""
    if cancelled:
        return " ".join(("A/B cancelled", done)).strip() + ": no verdict"
    reason = f" ({error})" if error else ""
    return " ".join(("A/B stopped", done)).strip() + f": no verdict{reason}"


def phase_name(name: str) -> str:
    """A phase of a cold start as a verdict names it: "the weights", "'init engine'"."""
    if name.startswith("line: "):
        return f"its line '{name.removeprefix('line: ')}'"
    return PHASE_NAMES.get(name, name)


def shift_words(shifts: Sequence[PhaseShift]) -> str:
    """Where two servers' times to ready differ, phase by phase: "the weights 4.1 s → 1.2 s,
    the rest equal"; the phases the watch cut first, then the server's own lines, each by how
    far it moved, most first: the reason for the difference leads."""
    moved = sorted(
        (s for s in shifts if s.differs),
        key=lambda s: (s.name.startswith("line: "), -abs(s.change_s)),
    )
    if not moved:
        return "no phase differs beyond the pairs' noise on its own"
    said = ", ".join(f"{phase_name(s.name)} {s.a_s:.1f} s → {s.b_s:.1f} s" for s in moved)
    unmoved = [s for s in shifts if not s.differs and not s.name.startswith("line: ")]
    return f"{said}, the rest equal" if unmoved else said
