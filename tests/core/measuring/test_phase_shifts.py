"""Where two servers' times to ready differ, phase by phase: the phases the watch cut are
compared in every pair; a server's own line only where every run printed it."""

from __future__ import annotations

from dataclasses import dataclass, field

from modelmon.core.measuring.ab import phase_shifts
from modelmon.core.output.verdict import shift_words


@dataclass
class Run:
    ready_s: float
    phases: dict[str, float] = field(default_factory=dict)


def test_a_line_only_one_server_prints_is_no_shift_to_zero() -> None:
    """vLLM's default loader prints 'Loading weights took 5.3 seconds'; with Run:ai's
    streamer it prints no such line: B's weights are not said to have taken 0 s by it."""
    a = [
        Run(42.0, {"before": 31, "weights": 5.2, "after": 5.0, "line: Loading weights": 5.3}),
        Run(42.5, {"before": 31, "weights": 5.6, "after": 5.6, "line: Loading weights": 5.6}),
        Run(41.0, {"before": 30, "weights": 5.3, "after": 5.2, "line: Loading weights": 5.3}),
    ]
    b = [
        Run(38.0, {"before": 31, "weights": 1.8, "after": 5.0}),
        Run(39.0, {"before": 31, "weights": 2.4, "after": 5.5}),
        Run(38.5, {"before": 30, "weights": 1.9, "after": 5.3}),
    ]
    shifts = phase_shifts(a, b)
    assert [s.name for s in shifts] == ["before", "weights", "after"]
    weights = shifts[1]
    assert weights.differs and weights.a_s == 5.3 and weights.b_s == 1.9
    assert shift_words(shifts) == "the weights 5.3 s → 1.9 s, the rest equal"


def test_the_phase_that_moved_most_is_said_first() -> None:
    a = [Run(3.0, {"before": 0.9, "weights": 0.1, "after": 2.0}) for _ in range(2)]
    b = [Run(5.4, {"before": 0.6, "weights": 2.8, "after": 2.0}) for _ in range(2)]
    words = shift_words(phase_shifts(a, b))
    assert words.startswith("the weights 0.1 s → 2.8 s, ") and "before the weights" in words
