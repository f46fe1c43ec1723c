"""Ranks on one node: N loaders at once, started together, each with its own worker processes.

A rank is one ``LoadRun``: what one process of a multi-process inference or training job does
when it loads its weights. Replica ranks each load the whole model (data parallel, N server
replicas); split ranks each load their slice of the tensors (tensor parallel,
``plan.rank_slice``). All ranks start at one barrier: every rank's workers have taken their
share, the page cache of the model's files is put in the requested state and measured ONCE
(a second eviction after the first rank went would be a different experiment), then all go.

What comes back is each rank's own result, the aggregate rate (every rank's bytes over the
wall time from the first go to the last rank's end) and the straggler (slowest rank against
the median): the number a job that waits for its last rank really sees. A rank whose load
fails (a worker of it killed, say) stops the others: they come back cancelled, saying which
rank stopped them.

Replica ranks read the same files, so they share the page cache: the storage serves a byte
once, the ranks may receive it N times. The aggregate counts what the ranks received.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.errors import OptionsError, StorageError
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.runner import LoadRun
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import MAX_PARALLEL, LoadOptions, format_spec
from modelmon.core.system import cache


@dataclass(frozen=True, slots=True)
class Straggler:
    """The slowest of several loaders that started together, against their median."""

    who: str  # "rank 2", or a fleet node's id
    seconds: float
    median_seconds: float

    @property
    def ratio(self) -> float:
        """max/median seconds: 1.0 when every loader took as long as the typical one."""
        return self.seconds / self.median_seconds if self.median_seconds > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = round(self.ratio, 4) if math.isfinite(self.ratio) else None
        return data


def find_straggler(seconds: Sequence[tuple[str, float]]) -> Straggler | None:
    """The slowest of (who, seconds) pairs, or None when there are none."""
    if not seconds:
        return None
    who, slowest = max(seconds, key=lambda pair: pair[1])
    return Straggler(who, slowest, statistics.median(s for _, s in seconds))


@dataclass(frozen=True, slots=True)
class RankResult:
    rank: int
    tensors: int  # how many tensors this rank loaded
    start: float  # seconds after the first rank went: the barrier's own spread
    result: LoadResult

    @property
    def end(self) -> float:
        return self.start + self.result.seconds

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {
            "rank": self.rank,
            "status": result.status,
            "error": result.error,
            "tensors": self.tensors,
            "bytes": result.bytes,
            "seconds": result.seconds,
            "mbps": round(result.mbps, 3),
            "start": self.start,
            "end": self.end,
            "peak_rss": max((w.peak_rss for w in result.workers), default=0),
            "resident_after": result.cache.resident_after,
            "checksum": result.checksum,
            "notes": list(result.notes),
        }


@dataclass(frozen=True, slots=True)
class RanksResult:
    status: str  # "ok" | "cancelled" | "failed": the worst of the ranks'
    strategy: str
    options: LoadOptions
    model: str
    split: bool  # each rank loaded its slice (tensor parallel), not the whole model
    cache: cache.CacheState  # measured once, before every rank went
    ranks: tuple[RankResult, ...]
    error: str | None = None

    @property
    def bytes(self) -> int:
        return sum(r.result.bytes for r in self.ranks)

    @property
    def seconds(self) -> float:
        """Wall time from the first rank's go to the last rank's end."""
        return max((r.end for r in self.ranks), default=0.0)

    @property
    def mbps(self) -> float:
        """The aggregate: every rank's bytes over the wall time, decimal MB/s."""
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def storage_error(self) -> StorageError | None:
        """The StorageError that failed the ranks (the failed rank's), if the storage did."""
        if self.status != "failed":
            return None
        return next((r.result.storage_error for r in self.ranks if r.result.storage_error), None)

    @property
    def straggler(self) -> Straggler | None:
        return find_straggler([(f"rank {r.rank}", r.result.seconds) for r in self.ranks])

    def to_dict(self) -> dict[str, Any]:
        straggler = self.straggler
        return {
            "status": self.status,
            "error": self.error,
            "strategy": self.strategy,
            "spec": format_spec(self.strategy, self.options),
            "options": self.options.to_dict(),
            "model": self.model,
            "split": self.split,
            "cache": asdict(self.cache),
            "bytes": self.bytes,
            "seconds": self.seconds,
            "mbps": round(self.mbps, 3),
            "straggler": None if straggler is None else straggler.to_dict(),
            "ranks": [r.to_dict() for r in self.ranks],
        }


class RanksRun:
    """N ``LoadRun`` s in threads of this process, one barrier. ``cancel()`` from any thread."""

    def __init__(
        self,
        model: Model | str | os.PathLike[str],
        strategy: str = "sequential",
        options: LoadOptions | None = None,
        ranks: int = 2,
        split: bool = False,
        *,
        on_message: Callable[[object], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self.model = model if isinstance(model, Model) else open_model(model)
        whole = isinstance(ranks, int) and not isinstance(ranks, bool)
        if not whole or not 1 <= ranks <= MAX_PARALLEL:
            raise OptionsError(
                f"ranks must be a whole number from 1 to {MAX_PARALLEL}, not {ranks!r}"
            )
        if split and ranks > len(self.model.extents):
            raise OptionsError(
                f"{ranks} split ranks but the model has only {len(self.model.extents)} tensors"
            )
        self.strategy = strategy
        self.options = options or LoadOptions()
        self.split = split
        self._cancel = cancel or threading.Event()  # shared by every rank
        self.runs = [
            LoadRun(
                self.model,
                strategy,
                self.options,
                on_message=on_message,
                cancel=self._cancel,
                share=(rank, ranks) if split else (0, 1),
                prepare=self._prepare_together,
            )
            for rank in range(ranks)
        ]
        # The last rank to arrive measures the cache for all, then every rank is released.
        self._barrier = threading.Barrier(ranks, action=self._prepare_cache)
        self._state = cache.not_measured(self.options.cache)
        self._cache_error: BaseException | None = None
        self._arrived: set[int] = set()
        self._lock = threading.Lock()
        self._failed_rank: int | None = None  # the first rank whose load failed

    def cancel(self) -> None:
        self._cancel.set()
        self._barrier.abort()

    def _prepare_cache(self) -> None:
        try:
            self._state = self.runs[0].prepare_cache()  # every rank's files and options
        except BaseException as exc:  # raised again in every rank's thread
            self._cache_error = exc

    def _prepare_together(self, run: LoadRun) -> cache.CacheState:
        """Every rank's preparation: the last rank ready measures the cache for all."""
        with self._lock:
            self._arrived.add(id(run))
        try:
            self._barrier.wait()
        except threading.BrokenBarrierError:  # a rank failed before it was ready, or cancel
            self._cancel.set()
            return self._state
        if self._cache_error is not None:
            raise self._cache_error
        return self._state

    def run(self) -> RanksResult:
        results: dict[int, LoadResult] = {}
        errors: dict[int, BaseException] = {}

        def run_rank(rank: int) -> None:
            run = self.runs[rank]
            try:
                results[rank] = run.run()
                with self._lock:  # the first rank that fails stops the others
                    first = results[rank].status == "failed" and self._failed_rank is None
                    if first:
                        self._failed_rank = rank
                if first:
                    self.cancel()
            except BaseException as exc:
                errors[rank] = exc
            finally:
                with self._lock:
                    arrived = id(run) in self._arrived
                if not arrived:  # the others must not wait for a rank that never comes
                    self._barrier.abort()

        threads = [
            threading.Thread(target=run_rank, args=(rank,), name=f"modelmon-rank-{rank}")
            for rank in range(len(self.runs))
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                thread.join()
        except BaseException:
            self.cancel()
            for thread in threads:
                thread.join()
            raise
        if errors:
            raise errors[min(errors)]
        return self._result(results)

    def _result(self, results: dict[int, LoadResult]) -> RanksResult:
        went = [run.t0_ns for run in self.runs if run.t0_ns]
        first = min(went, default=0)
        failed = self._failed_rank
        for rank, result in results.items():  # said why it stopped, if a failed rank did it
            if failed is not None and rank != failed and result.status == "cancelled":
                results[rank] = dataclasses.replace(result, error=f"stopped: rank {failed} failed")
        ranks = tuple(
            RankResult(
                rank,
                len(run.model.extents),
                (run.t0_ns - first) / 1e9 if run.t0_ns else 0.0,
                results[rank],
            )
            for rank, run in enumerate(self.runs)
        )
        statuses = {r.result.status for r in ranks}
        status = next((s for s in ("failed", "cancelled") if s in statuses), "ok")
        worst = next((r for r in ranks if r.result.status == status), None)
        error = None
        if status != "ok" and worst is not None:
            error = f"rank {worst.rank}: {worst.result.error or status}"
        return RanksResult(
            status,
            self.strategy,
            self.options,
            self.model.path,
            self.split,
            self._state,
            ranks,
            error,
        )


def run_ranks(
    model: Model | str | os.PathLike[str],
    strategy: str = "sequential",
    options: LoadOptions | None = None,
    ranks: int = 2,
    split: bool = False,
    **kwargs: Any,
) -> RanksResult:
    """Run ``ranks`` loaders of ``model`` at once from one barrier; see the module docstring."""
    return RanksRun(model, strategy, options, ranks, split, **kwargs).run()
