"""Ranks on one node: how N processes of a tensor-parallel job get their weights, measured.

A rank is what one process of a multi-process server or training job does when it loads its
weights. The three ways this node can do it (``RANKS_MODES``):
- ``whole``: every rank reads every byte into its own memory and keeps its part, as engines
  whose loaders read each full tensor and narrow it do (vLLM's default loaders under tensor
  parallelism; Run:ai's streamer per worker): the node holds N copies at once;
- ``slice``: every rank reads only its tensor-parallel part of each tensor (a stretch of rows,
  or a strided tensor read whole and a part kept: ``model.tensor_parallel``);
- ``one-reader``: one process reads the model into one shared copy (``loading.shared_copy``)
  and every rank maps it, as a broadcast from one reader makes them share it.

All ranks start at one barrier: every rank's workers have taken their share, the page cache
of the model's files is put in the requested state and measured ONCE, then all go. The
server is ready when its slowest rank has its weights: that rank's end is the run's time.

The node's memory is measured, not summed: every rank's processes run in one memory cgroup
(``ranks_node``).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import os
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from modelmon.core.loading.envelope import StartGate
from modelmon.core.loading.processes import main_module_hidden, polling_thread, stop_processes
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.runner import LoadRun
from modelmon.core.loading.shared_copy import SharedCopy, rank_main, shared_copy
from modelmon.core.measuring.ranks_checks import check_fits, check_ranks
from modelmon.core.measuring.ranks_node import node_cgroup, node_memory, weights_bytes
from modelmon.core.measuring.ranks_records import (
    NodeMemory,
    RankResult,
    RanksMode,
    RanksResult,
)
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.tensor_parallel import kept_bytes, tp_slice
from modelmon.core.options import LoadOptions
from modelmon.core.system import cache
from modelmon.core.system.memory_cgroup import MemoryCgroup
from modelmon.core.system.memory_limit import ram_text

ATTACH_WAIT_S = 60.0  # for a one-reader rank to map and touch the copy, once it is whole
POLL_S = 0.05  # how often the ranks look whether their caller asked them to stop
# Under a limit, ranks that have read this many times the model again after reclaim thrash:
# they would go on for minutes, timing the limit, not the load. Looked at every THRASH_LOOK_S.
THRASH_STOP_SHARE = 1.0
THRASH_LOOK_S = 0.5


class RanksRun:
    """N ranks on this node, one barrier. ``cancel()`` from any thread."""

    def __init__(
        self,
        model: Model | str | os.PathLike[str],
        strategy: str = "sequential",
        options: LoadOptions | None = None,
        ranks: int = 2,
        mode: RanksMode = "whole",
        *,
        on_message: Callable[[object], None] | None = None,
        cancel: threading.Event | None = None,
        memory_limit: int | None = None,
        time_limit_s: float | None = None,
        start_gate: StartGate | None = None,
    ) -> None:
        self.model = model if isinstance(model, Model) else open_model(model)
        self.strategy = strategy
        self.options = options or LoadOptions()
        check_ranks(self.model, strategy, ranks, mode, self.options)
        if memory_limit is not None and not self.options.discard:
            check_fits(self.model, ranks, mode, memory_limit)
        self.mode: RanksMode = mode
        self.ranks = ranks
        self.memory_limit = memory_limit
        self.time_limit_s = time_limit_s  # each rank's load (and a reader's) is stopped past it
        # Hears the node's measured cache state once every rank is ready, and says whether
        # they may go (False cancels them): a fleet's nodes wait there for each other.
        self.start_gate = start_gate
        self.on_message = on_message
        # The ranks stop each other on their own event; the caller's (``cancel``) stops them
        # all, and is left as it was when a rank's failure stops them.
        self._asked = cancel
        self._cancel = threading.Event()
        self.runs: list[LoadRun] = []
        self._barrier = threading.Barrier(1)
        self._state = cache.not_measured(self.options.cache)
        self._cache_error: BaseException | None = None
        self._arrived: set[int] = set()
        self._lock = threading.Lock()
        self._failed_rank: int | None = None  # the first rank whose load failed
        self._thrashed: int | None = None  # bytes read again after reclaim, when stopped so

    def cancel(self) -> None:
        self._cancel.set()
        self._barrier.abort()

    def run(self) -> RanksResult:
        cpus = os.cpu_count() or 1
        extra = []
        if self.ranks > cpus:
            extra.append(
                f"{self.ranks} ranks on {cpus} CPUs share the cores (a node with a device per "
                "rank would not): their times include waiting for a core"
            )
        with ExitStack() as stack:
            asked = self._asked
            if asked is not None:
                if asked.is_set():
                    self.cancel()

                def look() -> bool | None:
                    return True if asked.wait(POLL_S) else None

                stack.enter_context(
                    polling_thread(look, lambda _: self.cancel(), "modelmon-ranks-stop")
                )
            node, notes = stack.enter_context(node_cgroup(self.memory_limit))
            if node is not None and self.memory_limit is not None:
                stack.enter_context(self._stop_thrashing(node))
            if self.mode == "one-reader":
                copy = stack.enter_context(shared_copy(self.model))
                ranks, reader = self._one_reader(copy, node)
            else:
                ranks, reader = self._own_loads(node), None
            loads = [r.result for r in ranks if r.result is not None] + ([reader] if reader else [])
            memory = node_memory(node, loads, self.memory_limit is not None)
        return self._result(ranks, reader, memory, extra + notes)

    # --- the node's cgroup ----------------------------------------------------------------

    def _stop_thrashing(self, node: MemoryCgroup) -> Any:
        """For the run, a thread that stops the ranks once they have read
        ``THRASH_STOP_SHARE`` of the model again after reclaim under the limit."""
        bound = THRASH_STOP_SHARE * self.model.total_bytes

        def look() -> int | None:
            if self._cancel.wait(THRASH_LOOK_S):
                return None
            reread = node.reread_bytes()
            return reread if reread >= bound else None

        def stop(reread: int) -> None:
            self._thrashed = reread
            self.cancel()

        return polling_thread(look, stop, "modelmon-ranks-thrash")

    # --- whole and slice: a load of its own per rank -------------------------------------

    def _own_loads(self, node: MemoryCgroup | None) -> list[RankResult]:
        share = self.mode == "slice"
        self.runs = [
            LoadRun(
                self.model,
                self.strategy,
                self.options,
                on_message=self.on_message,
                cancel=self._cancel,
                share=(rank, self.ranks) if share else (0, 1),
                prepare=self._prepare_together,
                memory_cgroup=node,
                time_limit_s=self.time_limit_s,
            )
            for rank in range(self.ranks)
        ]
        self._barrier = threading.Barrier(self.ranks, action=self._prepare_cache)
        results = self._run_all()
        went = [run.t0_ns for run in self.runs if run.t0_ns]
        first = min(went, default=0)
        ranks = []
        for rank, run in enumerate(self.runs):
            result = results[rank]
            kept = 0 if self.options.discard else kept_bytes(run.model, run.parts)
            if self.mode == "whole" and not self.options.discard:  # it narrows to its part
                kept = kept_bytes(*tp_slice(self.model, rank, self.ranks))
            ranks.append(
                RankResult(
                    rank,
                    len(run.model.extents),
                    (run.t0_ns - first) / 1e9 if run.t0_ns else 0.0,
                    result.seconds,
                    result.status,
                    result.bytes,
                    kept,
                    result,
                    result.error,
                )
            )
        return ranks

    def _prepare_cache(self) -> None:
        try:
            self._state = self.runs[0].prepare_cache()  # every rank's files and options
        except BaseException as exc:  # raised again in every rank's thread
            self._cache_error = exc
            return
        if self.start_gate is not None and not self.start_gate(self._state):
            self._cancel.set()  # every rank's run sees it before its go

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

    def _run_all(self) -> dict[int, LoadResult]:
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
        failed = self._failed_rank
        for rank, result in results.items():  # said why it stopped, if a failed rank did it
            if failed is not None and rank != failed and result.status == "cancelled":
                results[rank] = dataclasses.replace(result, error=f"stopped: rank {failed} failed")
        return results

    # --- one-reader: one load into the shared copy, every rank maps it --------------------

    def _one_reader(
        self, copy: SharedCopy, node: MemoryCgroup | None
    ) -> tuple[list[RankResult], LoadResult]:
        context = mp.get_context("spawn")
        pipes, processes = [], []
        try:
            for rank in range(self.ranks):
                parent, child = context.Pipe()
                process = context.Process(
                    target=rank_main,
                    args=(child, self.model, copy),
                    name=f"modelmon-rank-{rank}",
                    daemon=True,
                )
                with main_module_hidden():  # a caller's script is not run again in each
                    process.start()
                child.close()
                if node is not None and process.pid is not None:
                    node.add(process.pid)
                pipes.append(parent)
                processes.append(process)
            reader = LoadRun(
                self.model,
                self.strategy,
                self.options,
                on_message=self.on_message,
                cancel=self._cancel,
                shared=copy,
                memory_cgroup=node,
                time_limit_s=self.time_limit_s,
                start_gate=self.start_gate,
            )
            self.runs = [reader]
            result = reader.run()
            self._state = result.cache
            ranks = self._attach(pipes, result)
        finally:
            for pipe in pipes:
                pipe.close()
            stop_processes(processes, 1.0)
        return ranks, result

    def _attach(self, pipes: list[Any], reader: LoadResult) -> list[RankResult]:
        """Once the copy is whole, every rank maps it and touches it: its time is the
        reader's and its own."""
        if reader.status == "ok":
            for pipe in pipes:
                pipe.send_bytes(b"go")
        ranks = []
        deadline = time.monotonic() + ATTACH_WAIT_S
        for rank, pipe in enumerate(pipes):
            if reader.status != "ok":
                why = "the reader did not finish"
                ranks.append(RankResult(rank, 0, 0.0, 0.0, reader.status, 0, 0, None, why))
                continue
            answer: Any = None
            if pipe.poll(max(0.0, deadline - time.monotonic())):
                try:
                    answer = pipe.recv()
                except (EOFError, OSError):
                    answer = "it ended without a word"
            if isinstance(answer, tuple):
                seconds, touched, _ = answer
                whole = touched == self.model.total_bytes
                ranks.append(
                    RankResult(
                        rank,
                        len(self.model.extents),
                        0.0,
                        reader.seconds + seconds,
                        "ok" if whole else "failed",
                        0,
                        0,
                        None,
                        None if whole else "it touched part of the copy",
                        touched,
                    )
                )
            else:
                why = answer or f"no answer within {ATTACH_WAIT_S:.0f} s"
                ranks.append(RankResult(rank, 0, 0.0, 0.0, "failed", 0, 0, None, why))
        return ranks

    # --- the whole --------------------------------------------------------------------------

    def _result(
        self,
        ranks: list[RankResult],
        reader: LoadResult | None,
        memory: NodeMemory,
        notes: list[str],
    ) -> RanksResult:
        statuses = {r.status for r in ranks} | ({reader.status} if reader else set())
        status = next((s for s in ("failed", "cancelled") if s in statuses), "ok")
        error = None
        if self._thrashed is not None and self.memory_limit is not None:
            status = "failed"
            error = (
                f"thrashing under the {ram_text(self.memory_limit)} limit: the ranks read "
                f"{ram_text(self._thrashed)} again after reclaim dropped it "
                f"({self._thrashed / self.model.total_bytes:.1f}× the model) and went on; "
                "stopped there: a load that cannot keep its pages times the limit, not itself "
                f"(its weights hold {ram_text(weights_bytes(self.model, self.ranks, self.mode))}, "
                "its processes and the page cache its reads pass through more)"
            )
        elif reader is not None and reader.status != "ok":
            error = f"the reader: {reader.error or reader.status}"
        elif status != "ok":
            worst = next(r for r in ranks if r.status == status)
            error = f"rank {worst.rank}: {worst.error or status}"
        loads = [r.result for r in ranks if r.result is not None] + ([reader] if reader else [])
        storage = next((load.storage_error for load in loads if load.storage_error), None)
        return RanksResult(
            status,
            self.strategy,
            self.options,
            self.model.path,
            self.mode,
            self._state,
            tuple(ranks),
            self.model.total_bytes,
            memory,
            reader,
            error,
            storage,
            tuple(notes),
        )


def run_ranks(
    model: Model | str | os.PathLike[str],
    strategy: str = "sequential",
    options: LoadOptions | None = None,
    ranks: int = 2,
    mode: RanksMode = "whole",
    **kwargs: Any,
) -> RanksResult:
    """Run ``ranks`` ranks of ``model`` on this node in ``mode``; see the module docstring."""
    return RanksRun(model, strategy, options, ranks, mode, **kwargs).run()
