"""A finished run: the job's report of a run's end, and the results table's and the exports'
row. Its outcome's type says what ran (``modelmon.core.runs.RunOutcome``, or a watch): modelmon's
strategy with its series (``SessionResult``), a program as a configuration, watched and
counted as a load (``ProgramResult``), or a watch of File ▸ Watch (``WatchResult``). Qt-free."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelmon.core import CacheState, Ceilings, LoadResult, ProgramResult, WatchResult
from modelmon.core.measuring import keeps_bytes
from modelmon.core.runs import (
    NO_ARRIVALS,
    BlockTiming,
    SessionResult,
    blocks_ready_s,
    untimed_reason,
)
from modelmon.core.system import MemoryLimit

WATCH_LABEL = "W"  # a watched run's label: its colour and its curves' key


def run_key(label: str) -> str:
    """A run's name in a plot's key: "run A", or "watch" for a watched program's."""
    return "watch" if label == WATCH_LABEL else f"run {label}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    label: str  # "A" | "B" | WATCH_LABEL
    spec: str  # the configuration in words, or a watch's title
    pair: int | None  # 0-based pair of an A/B; None for a single run
    # What it ended with; None when it could not start (``error`` says why).
    outcome: SessionResult | ProgramResult | WatchResult | None
    error: str | None = None  # why it could not start (one line)
    session: str | None = None  # the A/B it belongs to: "A/B 2 at 14:03:55"; None if single
    number: int = 0  # of a watch: the how-manieth on this model, for its name
    stderr_line: str = ""  # of a watched command: the last line of its errors
    # Of a watch: when each block arrived, from its first byte (a load's are its result's).
    arrivals: tuple[BlockTiming, ...] = ()

    @property
    def sampled(self) -> SessionResult | None:
        """modelmon's own run, with its series and reads."""
        return self.outcome if isinstance(self.outcome, SessionResult) else None

    @property
    def watched(self) -> WatchResult | None:
        """What a watch saw: of a watch, or of a program run as a configuration."""
        if isinstance(self.outcome, WatchResult):
            return self.outcome
        if isinstance(self.outcome, ProgramResult):
            return self.outcome.watch
        return None

    @property
    def is_watch(self) -> bool:
        """A watch of File ▸ Watch: not a configuration's run, not counted as a load."""
        return isinstance(self.outcome, WatchResult)

    @property
    def result(self) -> LoadResult | None:
        """The run as a load (None for a watch, or a run that could not start)."""
        if isinstance(self.outcome, SessionResult | ProgramResult):
            return self.outcome.result
        return None

    @property
    def blocks(self) -> tuple[BlockTiming, ...]:
        """When each block was read (a load) or arrived (a watch), in use order."""
        return self.result.blocks if self.result is not None else self.arrivals

    @property
    def first_block_s(self) -> float | None:
        """When the first block in use order was complete (None without blocks)."""
        return blocks_ready_s(self.blocks, 1)

    @property
    def untimed(self) -> str | None:
        """Why the run has no block to draw, in a few words; None when it has some."""
        if self.blocks:
            return None
        if self.status != "ok":
            return f"{self.status}: blocks are timed only for a run that finished"
        watched = self.watched
        if watched is not None:
            return untimed_reason(watched) or NO_ARRIVALS
        return "no block was loaded in full"

    @property
    def memory_limit(self) -> MemoryLimit | None:
        """The memory cgroup the run ran in (``--memory-limit``, Run ▸ Memory limit…): a
        load's, or a watched program's; None where it ran without one."""
        if self.result is not None and self.result.memory_limit is not None:
            return self.result.memory_limit
        watched = self.watched
        return watched.memory_limit if watched is not None else None

    @property
    def status(self) -> str:
        if isinstance(self.outcome, WatchResult):
            return watch_status(self.outcome)
        return self.result.status if self.result is not None else "failed"

    @property
    def message(self) -> str | None:
        if self.result is not None and self.result.status == "failed":
            return self.result.error
        if isinstance(self.outcome, WatchResult) and self.error is None:
            return watch_failure(self.outcome)
        return self.error

    @property
    def run_name(self) -> str:
        """ "A", or "B · pair 2 · A/B 1 at 14:03:55": runs of different A/Bs never share a
        name; "watch 2" for a watched program's."""
        if self.label == WATCH_LABEL:
            return f"watch {self.number}" if self.number else "watch"
        if self.pair is None:
            return self.label
        name = f"{self.label} · pair {self.pair + 1}"
        return f"{name} · {self.session}" if self.session else name

    @property
    def measured(self) -> bool:
        """The run has a throughput to show (it finished, or stopped after reading some)."""
        if isinstance(self.outcome, WatchResult):
            return self.outcome.mbps is not None
        result = self.result
        return result is not None and (result.status == "ok" or result.bytes > 0)

    @property
    def mbps(self) -> float | None:
        if isinstance(self.outcome, WatchResult):
            return self.outcome.mbps
        return self.result.mbps if self.measured and self.result is not None else None

    @property
    def seconds(self) -> float | None:
        if isinstance(self.outcome, WatchResult):
            return self.outcome.seconds
        return self.result.seconds if self.measured and self.result is not None else None

    @property
    def cache(self) -> CacheState | None:
        """The verified page-cache state the run started from (None: not prepared)."""
        if isinstance(self.outcome, WatchResult):
            return self.outcome.cache
        return self.result.cache if self.result is not None else None

    def peak_rss(self) -> tuple[int, str] | None:
        """Peak resident memory of the workers together, and how it was measured.

        The max of the sampler's ``workers_rss`` (their RSS summed, every sample interval): a
        load shorter than a sample interval has none. Not the sum of ``WorkerTiming.peak_rss``
        (each worker's own VmHWM): the workers peak at different moments, so the sum of
        their peaks overstates what they held at once.
        """
        if self.watched is not None:
            peak = self.watched.peak_rss
            return (
                (
                    peak,
                    "the watched process tree's peak resident memory (its live processes "
                    "together, model pages it maps included)",
                )
                if peak
                else None
            )
        sampled = self.sampled
        if sampled is None:
            return None
        values = sampled.series.get("workers_rss", (None, np.empty(0)))[1]
        seen = values[np.isfinite(values) & (values > 0)]
        if not len(seen):
            return None
        return (
            int(seen.max()),
            f"max of the workers' summed RSS over {len(seen)} samples "
            f"taken every {sampled.interval_s * 1000:.0f} ms (a page mapped by several "
            "workers counts once for each)",
        )

    def peak_mapped(self) -> int | None:
        """Of the workers' peak RSS (``peak_rss``), the file pages they mapped at that
        sample (the model's under mmap, libraries'): page cache, not memory the load owns;
        None where it was not sampled."""
        sampled = self.sampled
        if self.watched is not None or sampled is None:
            return None
        rss = sampled.series.get("workers_rss", (None, np.empty(0)))[1]
        mapped = sampled.series.get("workers_mapped", (None, np.empty(0)))[1]
        if len(mapped) != len(rss) or not len(rss):
            return None
        seen = np.where(np.isfinite(rss) & (rss > 0), rss, -1.0)
        at = int(np.argmax(seen))
        return int(mapped[at]) if seen[at] > 0 and np.isfinite(mapped[at]) else None


def ceiling_for(record: RunRecord, ceilings: Ceilings | None) -> tuple[float, str] | None:
    """This run's MB/s as a fraction of the bound that applies (``Ceilings.bound``), and that
    bound's name: the storage for a load that discards or maps its bytes, the lower of the
    storage and the memory fill for one that keeps them (a program's load does), the warm
    parallel read for a run that started verified warm (against a cold bound it would read
    as several hundred percent)."""
    mbps, cache, result = record.mbps, record.cache, record.result
    if ceilings is None or mbps is None:
        return None
    program = isinstance(record.outcome, ProgramResult)
    strategy = "" if program or result is None else result.strategy
    discard = bool(result.options.get("discard")) if result is not None and not program else False
    warm = cache is not None and cache.warm
    efficiency = ceilings.efficiency(mbps, keeps_bytes(strategy, discard), warm)
    return (efficiency.fraction, efficiency.bound.name) if efficiency is not None else None


def watch_status(result: WatchResult) -> str:
    """ "ok" (it exited 0, was stopped once quiet, or detached, having read the model),
    "cancelled", or "failed" (as the CLI's exit codes 5 and 6: it failed, or never opened
    or mapped a file of the model)."""
    if result.ended_by == "cancel":
        return "cancelled"
    if result.status == "killed" or (result.status == "exited" and result.exit_code):
        return "failed"
    return "ok" if result.saw_model else "failed"


def watch_failure(result: WatchResult) -> str | None:
    """Why a watched run is not a plain success, in one line; None when it is."""
    if result.status == "killed":
        return f"killed by {result.signal}"
    if result.status == "exited" and result.exit_code:
        return f"exited with {result.exit_code}"
    if not result.saw_model:
        return "it never opened or mapped a file of the open model"
    if result.ended_before_first_sample:
        return (
            f"it ended within one sample ({result.interval_s * 1000:.0f} ms): its rate is "
            "rough (View ▸ Sample metrics every: a shorter period sees more)"
        )
    return None
