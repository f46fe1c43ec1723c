"""Cutting a losing run short, by physics as well as by clock.

A candidate run races the leader's best run: the leader's bytes-loaded curve is recorded, and
a run that has loaded fewer than ``CUT_FRACTION`` of what the leader had loaded at (nearly)
the same moment of its own load is stopped at once: it is more than 3× slower, and loads do
not speed up. (At 1/4, the library on an rclone mount, 0.27× the leader, ran to its end: 16 s
of a 60 s budget for a candidate that could never be picked. Runs of one configuration on
this project's noisiest storage, a shared virtual disk, spread up to 2.3×: inside 3×.)
Once the leader's whole load time has passed, a run with less than ``LATE_CUT_FRACTION`` of
the model is at least 2× slower and stops too: on an rclone mount under load the library ran
at 0.46× the leader, 23 s of a 60 s budget for one run that could not be picked.
Workers report bytes only as reads complete (a 64 MiB read is one report), and a loaded
machine starts processes late, so the judgement waits out a grace period and gives the
candidate ``LAG_S`` of head start over the leader's curve.
"""

from __future__ import annotations

import bisect
import threading
import time
from typing import Protocol

CUT_FRACTION = 1 / 3  # below this share of the leader's bytes at the same moment: cut
LATE_CUT_FRACTION = 0.5  # of the model, once the leader's whole load time (+ lag) has passed
GRACE_S = 1.5  # never judge before this much of a load has run (process and first reads)
GRACE_FRACTION = 0.5  # ... nor before this share of the leader's whole load time
LAG_S = 0.5  # compare with the leader's bytes this much earlier: reports lag the reads


class Progressing(Protocol):
    """What a run exposes while it loads (``LoadRun`` does)."""

    @property
    def loaded_bytes(self) -> int: ...

    @property
    def t0_ns(self) -> int: ...


class Curve:
    """Bytes loaded against seconds since go, from samples; linear between them."""

    def __init__(self, samples: list[tuple[float, int]], seconds: float, total: int) -> None:
        points = sorted({(0.0, 0), *samples, (seconds, total)})
        self.times = [t for t, _ in points]
        self.bytes = [b for _, b in points]
        self.seconds, self.total = seconds, total

    def bytes_at(self, t: float) -> float:
        if t >= self.seconds:
            return float(self.total)
        i = bisect.bisect_right(self.times, t)
        t0, t1 = self.times[i - 1], self.times[i]
        b0, b1 = self.bytes[i - 1], self.bytes[i]
        return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else float(b1)


def cut_reason(t: float, loaded: int, leader: Curve | None) -> str | None:
    """Why a run that has loaded ``loaded`` bytes ``t`` s into its load should stop, or None."""
    if leader is None or t < max(GRACE_S, GRACE_FRACTION * leader.seconds):
        return None
    if t >= leader.seconds + LAG_S and loaded < LATE_CUT_FRACTION * leader.total:
        return (
            f"cut early: {loaded / 1e6:.0f} MB loaded after {t:.2f} s, when the leader had "
            f"loaded all {leader.total / 1e6:.0f} MB: under half, 2× slower or more"
        )
    ahead = leader.bytes_at(t - LAG_S)
    if ahead <= 0 or loaded >= CUT_FRACTION * ahead:
        return None
    return (
        f"cut early: {loaded / 1e6:.0f} MB loaded after {t:.2f} s, "
        f"under {CUT_FRACTION:.0%} of the leader's {ahead / 1e6:.0f} MB at that moment"
    )


class RaceStop(threading.Event):
    """The stop event of one candidate run: set by the caller's cancel, or by the race.

    ``LoadRun`` polls its stop event every few tens of milliseconds while it waits for its
    workers, so checking the race inside ``is_set`` needs no thread of its own; the check
    latches (once cut, the event stays set) and samples the run's curve as it goes, so the
    run can become the next leader.
    """

    def __init__(self, cancel: threading.Event | None, leader: Curve | None) -> None:
        super().__init__()
        self.cancel, self.leader = cancel, leader
        self.run: Progressing | None = None
        self.reason: str | None = None
        self.samples: list[tuple[float, int]] = []

    def watch(self, run: Progressing) -> None:
        self.run = run

    def is_set(self) -> bool:
        if super().is_set():
            return True
        if self.cancel is not None and self.cancel.is_set():
            return True
        run = self.run
        if run is None or run.t0_ns == 0:  # not started: nothing to judge yet
            return False
        t = (time.perf_counter_ns() - run.t0_ns) / 1e9
        loaded = run.loaded_bytes
        self.samples.append((t, loaded))
        reason = cut_reason(t, loaded, self.leader)
        if reason is None:
            return False
        self.reason = reason
        self.set()
        return True

    def curve(self, seconds: float, total: int) -> Curve:
        """This run's curve, once it finished in ``seconds`` with ``total`` bytes."""
        return Curve([(t, b) for t, b in self.samples if t < seconds], seconds, total)
