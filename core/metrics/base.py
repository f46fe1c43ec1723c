"""What every metric source shares: the spec of a series, the target, failure counting.

A source is one small class that reads one kind of system state (``/proc/diskstats``, CPU
times, worker memory...) and turns it into named values at each sample. Sources know
nothing about threads or timing: the ``Sampler`` calls ``sample(now_ns)`` from its one
thread, and a source may keep whatever it needs between calls (previous counters for rates).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from modelmon.core.metrics.series import INSTANT, INTERVAL

if TYPE_CHECKING:
    import numpy as np

    from modelmon.core.system.memory_cgroup import MemoryCgroup

NAN = math.nan
FAILURES_TO_REPORT = 3  # a reading that failed this many times and never worked is reported


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str  # series name, e.g. "device_read_mbps", "worker_rss.2"
    unit: str  # "MB/s", "IOPS", "%", "bytes", "fraction"
    description: str  # one sentence, shown as a tooltip
    # INTERVAL: the value covers the time since the previous sample (a rate, a share of CPU
    # time), and is placed at that interval's middle. INSTANT: the state when it was sampled.
    over: str = INSTANT

    def __post_init__(self) -> None:
        if self.over not in (INSTANT, INTERVAL):  # a programming error in a source
            raise ValueError(f"{self.name}: over must be {INSTANT!r} or {INTERVAL!r}")


@dataclass
class MonitorTarget:
    """What to watch: the model's files and the load's workers, read live through callables."""

    paths: tuple[str, ...]  # the model's files
    workers: int  # how many workers the load uses
    pids: Callable[[], dict[int, int]]  # worker id -> pid, of the workers started so far
    loaded_bytes: Callable[[], int]  # bytes the load has completed so far (worker events)
    # Residency maps of the files in ``bins`` bins where the run already tracks its pages (a
    # watch does): the sampler's rounds take them from here when it has no residency source.
    residency_maps: Callable[[int], dict[str, np.ndarray]] | None = None
    # Under a memory limit (``--memory-limit``): its size, and the run's memory cgroup once
    # it is made (None before, after, or where none could be made).
    memory_limit: int | None = None
    memory_cgroup: Callable[[], MemoryCgroup | None] | None = None


def describe_error(error: BaseException) -> str:
    """One line naming the error: "AccessDenied: (pid=123)", "OSError: [Errno 2] ..."."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class FailureLog:
    """Attempts of one reading; says why once it has failed every time.

    A reading that works sometimes gives gaps (NaN) where it failed and is not reported: a
    worker that is denied once is noise, one that is always denied means the series is empty.
    """

    def __init__(self, what: str) -> None:
        self.what = what  # "worker CPU times", "system CPU times"
        self.failures = 0
        self.successes = 0
        self.last_error = ""

    def ok(self) -> None:
        self.successes += 1

    def failed(self, error: BaseException) -> None:
        self.failures += 1
        self.last_error = describe_error(error)

    def reason(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        if self.successes or self.failures < max(1, at_least):
            return None
        return f"{self.what} failed on every sample ({self.last_error})"


class Source:
    """One kind of measurement. Subclasses set ``name`` and ``description``; the package lists
    them in ``SOURCES``."""

    name: ClassVar[str]  # unique among the sources: how a caller picks one
    description: ClassVar[str]

    def __init__(self, target: MonitorTarget) -> None:
        self.target = target

    def specs(self) -> list[MetricSpec]:
        """The series this source gives, fixed at construction."""
        raise NotImplementedError

    def unavailable(self) -> str | None:
        """None, or why this source cannot measure here (then it is never sampled)."""
        return None

    def sample(self, now_ns: int) -> dict[str, float]:
        """Series name -> value at ``now_ns``; NaN (or a missing name) is a gap.

        Rates are taken against the previous call, so the first call only sets baselines and
        gives NaN for them.
        """
        raise NotImplementedError

    def failing(self, at_least: int = FAILURES_TO_REPORT) -> str | None:
        """Why a part of this source has failed on every attempt so far (its series are
        gaps), once it failed ``at_least`` times; None while it works or may still work."""
        return None

    def close(self) -> None:
        """Release what the source holds. Called once, from the thread that sampled."""


class Rate:
    """Per-second rate of a counter that only grows, between consecutive updates."""

    def __init__(self) -> None:
        self._last: tuple[int, float] | None = None

    def update(self, now_ns: int, value: float) -> float:
        """Rate since the previous update; NaN on the first, or if time or counter went back.

        A counter that went back (reset, wrap, a different device) restarts the baseline.
        """
        last, self._last = self._last, (now_ns, value)
        if last is None or not math.isfinite(value) or not math.isfinite(last[1]):
            return NAN
        elapsed_ns, change = now_ns - last[0], value - last[1]
        if elapsed_ns <= 0 or change < 0:
            return NAN
        return change * 1e9 / elapsed_ns
