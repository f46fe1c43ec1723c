"""The cut: a racing run that is on course to take more than ``CUT_FACTOR`` times the leader's
load time is stopped where it is.

A run's course is its own pace so far: ``t`` seconds into its load with ``loaded`` of the
model's ``total`` bytes, it is on course for ``t × total / loaded``. Loads do not speed up as
they go, so a run on course for twice the leader's time cannot come within the noise of it:
it is stopped, and its rate so far is the bound it stayed under. Its bytes are judged only
from ``JUDGE_AFTER_S`` into its load: workers report bytes as whole reads complete (a 16 MiB
read on a slow disk takes most of a second) and the first reads wait for the storage, so a
shorter stretch says little of a run's pace. Nor does a trickle start it: until more than
``TRICKLE`` of the model has arrived, the run's pace is judged from its latest moment with no
more. Another loader's clock starts at the first byte of its model to arrive, and a page that
arrives before its imports are done (its header, a page another reader brought in) would
otherwise count the imports as its load. The clock alone says more: a run not done at
``CUT_FACTOR`` × the leader's load time is stopped there, though never before
``MIN_LIMIT_S`` (a busy machine may hold a ready process back for tenths of a second), nor
before another loader's imports could be done (``clock_limit``).

The rule is the same for every candidate of every search (``measuring.search``'s and the
user's loader's rounds, ``measuring.loader_rounds``), whatever runs it.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

CUT_FACTOR = 2.0
JUDGE_AFTER_S = 1.5
MIN_LIMIT_S = 0.5
# A run's pace is judged from the last moment no more than this share of its model had
# arrived: a stray page before its reads begin is not its load's start.
TRICKLE = 0.01
# Another loader's run starts with its imports, which vary with how busy the machine is: its
# clock limit allows this many times the start measured for it.
START_SLACK = 2.0


def clock_limit(leader_s: float, start_s: float = 0.0) -> float:
    """The clock's cut, the same for every search: a run not done ``CUT_FACTOR`` × the
    leader's load time after its load could begin (``start_s``: another loader's process start
    and imports, as measured for it) is stopped there."""
    return max(MIN_LIMIT_S, CUT_FACTOR * leader_s) + START_SLACK * start_s


class Progressing(Protocol):
    """What a run exposes while it loads (every ``runs.start.Run`` does): its bytes so far,
    and when its load began (0: not yet; another loader's imports come before it)."""

    @property
    def loaded_bytes(self) -> int: ...

    @property
    def load_started_ns(self) -> int: ...


def cut_reason(
    t: float,
    loaded: int,
    total: int,
    leader_s: float | None,
    since: tuple[float, int] = (0.0, 0),
) -> str | None:
    """Why a run with ``loaded`` of ``total`` bytes ``t`` s into its load should stop, racing
    a leader that loaded everything in ``leader_s``; None while it may still finish in time.
    Its pace counts from ``since`` (seconds into the load, bytes loaded then)."""
    if leader_s is None:
        return None
    then, before = since
    judged_s, judged = t - then, loaded - before
    if judged_s < JUDGE_AFTER_S or judged * CUT_FACTOR * leader_s >= judged_s * total:
        return None
    return (
        f"cut early: {loaded / 1e6:.0f} of {total / 1e6:.0f} MB loaded after {t:.2f} s, on "
        f"course for more than {CUT_FACTOR:g}× the leader's {leader_s:.2f} s"
    )


class RaceStop(threading.Event):
    """The stop event of one racing run: set by the caller's cancel, or by the cut.

    Every run polls its stop event every few tens of milliseconds while it waits for its
    workers or its program, so judging the run inside ``is_set`` needs no thread of its own;
    the judgement
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
        self.since: tuple[float, int] = (0.0, 0)  # where its pace is judged from (TRICKLE)

    def watch(self, run: Progressing) -> None:
        self.run = run

    def is_set(self) -> bool:
        if super().is_set():
            return True
        if self.cancel is not None and self.cancel.is_set():
            return True
        run = self.run
        if run is None or run.load_started_ns == 0:  # not started: nothing to judge yet
            return False
        started = run.load_started_ns
        t = (time.perf_counter_ns() - started) / 1e9
        loaded = run.loaded_bytes
        if loaded <= TRICKLE * self.total:
            self.since = (t, loaded)
        reason = cut_reason(t, loaded, self.total, self.leader_s, self.since)
        if reason is None:
            return False
        self.reason, self.cut_at = reason, (t, loaded)
        self.set()
        return True
