"""The cut: a racing run that is on course to take more than ``CUT_FACTOR`` times the leader's
load time is stopped where it is.

A run's course is its own pace so far: ``t`` seconds into its load with ``loaded`` of the
model's ``total`` bytes, it is on course for ``t × total / loaded``. Loads do not speed up as
they go, so a run on course for twice the leader's time cannot come within the noise of it:
it is stopped, and its rate so far is the bound it stayed under. Its bytes are judged only
from ``JUDGE_AFTER_S`` into its load: workers report bytes as whole reads complete (a 16 MiB
read on a slow disk takes most of a second) and the first reads wait for the storage, so a
shorter stretch says little of a run's pace. The clock alone says more: a run not done at
``CUT_FACTOR`` × the leader's load time is stopped there, though never before
``MIN_LIMIT_S`` (a busy machine may hold a ready process back for tenths of a second).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

CUT_FACTOR = 2.0
JUDGE_AFTER_S = 1.5
MIN_LIMIT_S = 0.5


class Progressing(Protocol):
    """What a run exposes while it loads (``LoadRun`` does)."""

    @property
    def loaded_bytes(self) -> int: ...

    @property
    def t0_ns(self) -> int: ...


def cut_reason(t: float, loaded: int, total: int, leader_s: float | None) -> str | None:
    """Why a run with ``loaded`` of ``total`` bytes ``t`` s into its load should stop, racing
    a leader that loaded everything in ``leader_s``; None while it may still finish in time."""
    if leader_s is None or t < JUDGE_AFTER_S or loaded * CUT_FACTOR * leader_s >= t * total:
        return None
    return (
        f"cut early: {loaded / 1e6:.0f} of {total / 1e6:.0f} MB loaded after {t:.2f} s, on "
        f"course for more than {CUT_FACTOR:g}× the leader's {leader_s:.2f} s"
    )


class RaceStop(threading.Event):
    """The stop event of one racing run: set by the caller's cancel, or by the cut.

    ``LoadRun`` polls its stop event every few tens of milliseconds while it waits for its
    workers, so judging the run inside ``is_set`` needs no thread of its own; the judgement
    latches (once cut, the event stays set) and keeps where the run was cut.
    """

    def __init__(
        self, cancel: threading.Event | None, leader_s: float | None = None, total: int = 0
    ) -> None:
        super().__init__()
        self.cancel, self.leader_s, self.total = cancel, leader_s, total
        self.run: Progressing | None = None
        self.reason: str | None = None
        self.cut_at: tuple[float, int] | None = None  # (seconds into the load, bytes loaded)

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
        reason = cut_reason(t, loaded, self.total, self.leader_s)
        if reason is None:
            return False
        self.reason, self.cut_at = reason, (t, loaded)
        self.set()
        return True
