"""Runs a measured load: ``LoadRun`` is the one thing that runs a load in worker processes.

Every measurement (``modelmon.core.measure``, the CLI's ``load`` and ``bench``, A/B pairs,
ceilings, the recommendation search, a monitored ``Session``) is a ``LoadRun``; each worker
process runs ``loading.worker.worker_main``. A load into the caller's own process (the
tensors come back) does not come here: that is ``modelmon.core.load``.

Parent side of the data path: spawn workers (``spawn`` context, never ``fork`` from a process
that may hold Qt or threads), wait until every worker has parsed its share, put the page cache
in the requested state and measure it, then say go and collect small records until every
worker is done, one has failed, or the caller cancels (the parent's ends of the workers' pipes,
and what came over them, are ``loading.worker_pipes``). Shutdown always escalates
join → terminate → kill, so no worker outlives the run.

Every signal between the parent and its workers is something a dead process cannot hold: go
is a word over each worker's own pipe, stop a flag in shared memory that the workers poll
(``loading.sharing``) plus the pipes' closing, and a worker's death is its ``sentinel``, or
how it is ending while a FUSE request keeps it from exiting (``processes.ending_code``). A
worker killed at any instant (the OOM killer's SIGKILL) fails the run, named with its signal,
and the others are stopped within about a second.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing as mp
import os
import threading
from collections.abc import Callable
from typing import Any

from modelmon.core.loading.drop_behind import dropped_behind, strategy_drops_behind
from modelmon.core.loading.envelope import RunEnvelope, StartGate, run_envelope
from modelmon.core.loading.fills import shared_work_checksums
from modelmon.core.loading.handout import hand_out
from modelmon.core.loading.messages import WorkerDone, WorkerReady
from modelmon.core.loading.preflight import check_memory, preflight
from modelmon.core.loading.processes import (
    FAILED_GRACE_S,
    JOIN_GRACE_S,
    halted_on_exit,
    held_note,
    start_workers,
    stop_processes,
)
from modelmon.core.loading.reads import ReadLog, descriptor_sharing, new_descriptor_id, now_ns
from modelmon.core.loading.result import (
    LoadResult,
    block_timings,
    cancelled_error,
    model_checksum,
    object_reads,
    residency_after,
    run_notes,
    worker_timings,
)
from modelmon.core.loading.shared_copy import SharedCopy
from modelmon.core.loading.sharing import RunMemory
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.loading.worker import GO, WorkerTask, worker_main
from modelmon.core.loading.worker_pipes import WorkerPipes
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.tensor_parallel import tp_slice
from modelmon.core.options import LoadOptions
from modelmon.core.system import cache, host_memory
from modelmon.core.system.memory_cgroup import MemoryCgroup
from modelmon.core.system.memory_limit import oom_failure
from modelmon.core.system.oom import oom_kills


class LoadRun:
    """One load, start to finish. ``run()`` blocks; ``cancel()`` may come from any thread."""

    def __init__(
        self,
        model: Model | str | os.PathLike[str],
        strategy: str = "sequential",
        options: LoadOptions | None = None,
        *,
        on_message: Callable[[object], None] | None = None,
        on_start: Callable[[LoadRun], None] | None = None,
        cancel: threading.Event | None = None,
        memory_limit: int | None = None,
        time_limit_s: float | None = None,
        share: tuple[int, int] = (0, 1),
        start_gate: StartGate | None = None,
        prepare: Callable[[LoadRun], cache.CacheState] | None = None,
        shared: SharedCopy | None = None,
        memory_cgroup: MemoryCgroup | None = None,
    ) -> None:
        opened = model if isinstance(model, Model) else open_model(model)
        # Rank ``share[0]`` of ``share[1]`` loads only its tensor-parallel part of each
        # tensor (ranks.py): a stretch of rows, or the tensor read whole and a part kept.
        self.share = share
        self.model, self.parts = tp_slice(opened, *share)
        # A one-reader load fills the node's shared copy (``shared_copy``), not arrays of
        # its workers' own; ranks that run together put their workers in one cgroup, the
        # node's (``memory_cgroup``), which this run then neither makes nor records.
        self.shared = shared
        self._node_cgroup = memory_cgroup
        self.strategy = strategy
        self.strategy_class = get_strategy(strategy)
        self.options = options or LoadOptions()
        self.on_message = on_message
        self.on_start = on_start  # called in run()'s thread right after the workers are told go
        # Hears the measured cache state once every worker is ready, in run()'s thread, and
        # says whether they may go (``envelope.StartGate``): runs that start together (ranks,
        # a fleet's nodes) wait there for each other; False cancels this run.
        self.start_gate = start_gate
        # Runs that load at once on one machine (ranks) prepare their files' cache once, for
        # all of them, when all are ready: ``prepare`` does it for the group (default: this
        # run's own ``prepare_cache``).
        self.prepare = prepare
        self.memory_limit = memory_limit
        self.t0_ns = 0
        self._cancel = cancel or threading.Event()  # may be shared by a series of runs
        self.pipes = WorkerPipes(self._cancel)  # the workers, and what they said
        # Set on cancel or a worker's death while the run waits to start: the cache
        # preparation (seconds on FUSE) stops, and the run does not wait for it.
        self._halt = threading.Event()
        self.time_limit_s = time_limit_s  # stop a load that runs longer (status "cancelled")
        self.timed_out = False
        self._oom_kills: int | None = None  # the kernel's OOM kills so far, at the start
        self.setup_notes: list[str] = []  # what was done to the machine for the run
        self.host_reported: int | None = None  # free memory reported to the host during the load
        # What priming is about to touch, and why, once planned (a progress line says it).
        self.priming: host_memory.Primed | None = None
        self._own_peak: Callable[[], int | None] = lambda: None
        self.drop_behind: str | None = None  # why its reads' page cache is dropped behind them
        self._envelope: RunEnvelope | None = None  # open while run() runs
        self.overlapped: tuple[str, ...] = ()  # other modelmon runs on the devices while timed
        self.held: str | None = None  # workers killed but still held by the kernel at the end

    # What the workers said so far, live: the app and a session read these from other threads
    # while the load runs.
    @property
    def reads(self) -> ReadLog:
        return self.pipes.reads

    @property
    def ready(self) -> dict[int, WorkerReady]:
        return self.pipes.ready

    @property
    def done(self) -> dict[int, WorkerDone]:
        return self.pipes.done

    @property
    def shares_work(self) -> bool:
        """Whether the workers draw their reads from one shared queue instead of being dealt
        fixed shares up front (``loading.sharing``): so that they finish together."""
        strategy, options = self.strategy_class, self.options
        return (
            options.workers > 1
            and strategy.shares_work
            and not strategy.shares_fd
            and strategy.partition_for(options) == "contiguous"
        )

    def prepare_cache(self) -> cache.CacheState:
        """Put the files in the requested cache state and measure it (run() does this once
        every worker is ready, before its start gate)."""
        fills = self.strategy_class.fills_arrays(self.options)
        if self.strategy_class.reads_objects:
            return cache.of_objects(
                self.options.cache,
                arrays=self.model.total_bytes if fills else 0,
                stop=self._halt,
                on_priming=self._priming_planned,
            )
        return cache.prepare(
            self.paths,
            self.options.cache,
            stop=self._halt,
            arrays=self.model.total_bytes if fills else 0,
            page_cache=self.strategy_class.fills_page_cache(self.paths),
            on_priming=self._priming_planned,
        )

    def _priming_planned(self, plan: host_memory.Primed) -> None:
        self.priming = plan

    def cancel(self) -> None:
        self._cancel.set()
        self._halt.set()

    @property
    def halted(self) -> bool:
        """Cancelled, or a worker died, before the start (a start gate need not wait on)."""
        return self._halt.is_set()

    @property
    def loaded_bytes(self) -> int:
        """Bytes the workers reported loaded so far (safe to read from any thread)."""
        return self.reads.bytes

    def worker_pids(self) -> dict[int, int]:
        return {worker: ready.pid for worker, ready in list(self.ready.items())}

    @property
    def memory_cgroup(self) -> MemoryCgroup | None:
        """The memory cgroup the workers run in while the run runs under a limit (or the
        node's, for ranks that run together)."""
        if self._node_cgroup is not None:
            return self._node_cgroup
        envelope = self._envelope
        return envelope.memory if envelope is not None else None

    @property
    def paths(self) -> list[str]:
        """The model's files on this machine (none of a model in object storage): what the
        page cache, the readahead and the devices' use are about."""
        return [f.path for f in self.model.files if f.remote is None]

    def run(self) -> LoadResult:
        # The run's envelope (``loading.envelope``): the readahead the options set, the
        # device's use announced, this process's own peak over the run (priming left out),
        # reported beside the workers': what the whole modelmon process tree took.
        checks = preflight(self.strategy_class, self.model, self.options, in_process=False)
        check_memory(self.model, self.options, self.memory_limit)  # before the cgroup is made
        # Under ``memory_limit``, the workers run in a memory cgroup of that size (the envelope
        # makes it; where it cannot, the limit is only planned with, and a note says so).
        envelope_of = run_envelope(self.paths, self.options.readahead, self.memory_limit)
        with checks, envelope_of as envelope:
            self.setup_notes = envelope.setup_notes
            self._envelope = envelope
            self._own_peak = envelope.own_peak
            try:
                return self._run()
            finally:
                self._envelope = None

    def _run(self) -> LoadResult:
        strategy = self.strategy_class
        self.drop_behind = strategy_drops_behind(
            self.model.file_bytes,
            self.options,
            reads_objects=strategy.reads_objects,
            maps_file=strategy.maps_file,
            releases_mappings=strategy.releases_mappings,
            shared_copy=self.shared is not None,
            memory_limit=self.memory_limit,
        )
        context = mp.get_context("spawn")
        self._oom_kills = oom_kills()  # a worker SIGKILLed later: was it the OOM killer?
        workers = self.options.workers
        shared = (
            [os.open(p, os.O_RDONLY | os.O_CLOEXEC) for p in self.paths]
            if self.strategy_class.shares_fd
            else []
        )
        shared_ids = tuple(new_descriptor_id() for _ in shared)
        memory = RunMemory(workers * self.options.threads if self.shares_work else 0)
        pipes = self.pipes
        state = cache.not_measured(self.options.cache)
        status = "ok"
        try:
            cache.prepare_early(self.paths, self.options.cache)
            mode = None if self.shares_work else self.strategy_class.partition_for(self.options)
            handouts = hand_out(self.model, workers, mode)
            try:
                drops = self.drop_behind is not None
                tasks = WorkerTask.of_run(
                    handouts,
                    self.strategy,
                    self.options,
                    shared_ids,
                    drops,
                    self.parts,
                    self.shared,
                )
                cgroup = self.memory_cgroup
                into = cgroup.add if cgroup is not None else None  # the run's memory cgroup
                start_workers(
                    context, tasks, worker_main, memory, shared, pipes.processes, pipes.conns, into
                )
            finally:  # each started worker holds its own descriptor of its handout
                for handout in handouts:
                    handout.close()
            pipes.collect(self.on_message, until_ready=True)
            if self._going:
                # Measured after the workers took their handouts, just before go: what the load
                # really starts from. Meanwhile a worker's death or a cancel halts the wait
                # (the preparation, and a gate's wait for other runs).
                with halted_on_exit(pipes.processes, self._halt, self._cancel):
                    state = (self.prepare or LoadRun.prepare_cache)(self)
                    gate = self.start_gate
                    if not self.halted and gate is not None and not gate(state):
                        self.cancel()
                pipes.note_deaths(self.on_message)
            if self._going:
                reported = host_memory.reported_bytes()
                if self._envelope is not None:
                    self._envelope.timed_part_begins()
                self.t0_ns = now_ns()
                for conn in pipes.conns.values():
                    with contextlib.suppress(OSError):  # a worker that died: its sentinel says
                        conn.send_bytes(GO)
                if self.on_start is not None:
                    self.on_start(self)
                limit = self.time_limit_s
                deadline = None if limit is None else self.t0_ns + int(limit * 1e9)
                self.timed_out = pipes.collect(
                    self.on_message, until_ready=False, deadline_ns=deadline
                )
                self.host_reported = host_memory.reported_since(reported)
                if self._envelope is not None:
                    self.overlapped = self._envelope.timed_part_ended()
            if pipes.failed:
                status = "failed"
            elif (self._cancel.is_set() or self.timed_out) and len(self.done) < workers:
                status = "cancelled"
        finally:
            # Stop: the flag for workers that load, the pipes' end for any still waiting for
            # go (and for one blocked sending to us). Neither waits for any worker.
            memory.stop()
            pipes.close()
            grace_s = FAILED_GRACE_S if pipes.failed else JOIN_GRACE_S
            self.held = held_note(stop_processes(pipes.processes, grace_s))
            cgroup = self.memory_cgroup
            pipes.name_death(self._oom_kills, cgroup.oom_kills() if cgroup is not None else None)
            host_memory.note_free()  # the workers' memory, their arrays and interpreters
            for descriptor in shared:
                os.close(descriptor)
            memory.close()
        return self._result(status, state)

    @property
    def _going(self) -> bool:
        return not self.pipes.failed and not self._cancel.is_set()

    def _result(self, status: str, state: cache.CacheState) -> LoadResult:
        resident_after, vanished = residency_after(
            self.paths, worker_died=self.pipes.dead is not None, drops=self.drop_behind is not None
        )
        cgroup = self.memory_cgroup if self._node_cgroup is None else None
        limited = cgroup.record() if cgroup is not None else None
        failure = oom_failure(self.pipes.failure, limited) or vanished
        state = dataclasses.replace(state, resident_after=resident_after)
        done = self.done
        end_ns = max((d.end_ns for d in done.values()), default=self.t0_ns)
        seconds = (end_ns - self.t0_ns) / 1e9 if done else 0.0
        crcs = {name: crc for d in done.values() for name, crc in d.checksums}
        if self.shares_work and status == "ok" and failure is None:
            spans = (d.spans for d in done.values())
            crcs, failure = shared_work_checksums(self.model, spans, self.options.verify)
        verified = self.options.verify and status == "ok"
        columns = self.reads.columns()
        objects = any(file.remote is not None for file in self.model.files)
        sharing = descriptor_sharing(columns, objects)  # named wherever it happens
        dropped = dropped_behind(self.drop_behind, done.values())
        notes = run_notes(
            done.values(),
            self.setup_notes,
            sharing.text() if sharing is not None and sharing.shared else None,
            host_memory.reported_notes(self.host_reported),
            dropped,
            self.overlapped,
            self.held,
        )
        return LoadResult(
            status=status if failure is None else "failed",
            strategy=self.strategy,
            options=self.options.to_dict(),
            model=self.model.path,
            format=self.model.format,
            files=tuple(f.path for f in self.model.files),
            object_reads=object_reads([*done.values(), *self.pipes.stopped.values()], self.options),
            objects=tuple(f.remote for f in self.model.files if f.remote is not None),
            bytes=sum(d.bytes for d in done.values()),
            seconds=seconds,
            cache=state,
            blocks=tuple(block_timings(self.model, columns, self.t0_ns)) if done else (),
            workers=worker_timings(done, self.ready, columns),
            checksum=model_checksum(crcs, self.model) if verified else None,
            tensor_checksums=crcs if verified else {},
            error=failure or cancelled_error(status, self.timed_out, self.time_limit_s),
            notes=notes,
            host_reported=self.host_reported,
            parent_peak_rss=self._own_peak(),
            dropped_behind=dropped,
            descriptor_sharing=sharing.text() if sharing is not None and sharing.shared else None,
            overlapped=self.overlapped,
            memory_limit=limited,
            storage_error=self.pipes.storage_error if failure == self.pipes.failure else None,
        )


def run_load(
    model: Model | str | os.PathLike[str],
    strategy: str = "sequential",
    options: LoadOptions | None = None,
    **kwargs: Any,
) -> LoadResult:
    """Load once in worker processes and return the measured result."""
    return LoadRun(model, strategy, options, **kwargs).run()
