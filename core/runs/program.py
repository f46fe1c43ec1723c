"""One run of a program configuration, watched, counted as a load: ``ProgramRun``.

The model's files are put in the requested cache state and measured as for modelmon's own runs
(by the watch, before the command starts), the device's readahead set where asked (and put
back), and the command runs watched (in a memory cgroup where a limit is asked): its MB/s is
the bytes that arrived from storage from the first to the last. The outcome is a ``LoadResult``
like any load's for an A/B, a search or a fleet round, beside the watch's own result.

A command that exits non-zero, is killed, never opens the model, or reads only part of it
from a cold start is a failed run, with its exit code and the last line it wrote on stderr
(``runs.verdict``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass, replace
from typing import Any

from modelmon.core.configuration import ProgramConfig
from modelmon.core.errors import WatchError, redact_urls
from modelmon.core.loaders.registry import get_engine
from modelmon.core.loading.envelope import StartGate, run_envelope
from modelmon.core.loading.reads import ReadLog, now_ns
from modelmon.core.loading.result import (
    LoadResult,
    WorkerTiming,
    coarse,
    overlap_note,
)
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode
from modelmon.core.runs.arrivals import arrival_blocks
from modelmon.core.runs.command_output import last_line, own_figure, own_report
from modelmon.core.runs.compile_cache import CompileCaches
from modelmon.core.runs.direct import DIRECT_OWN_CLOCK, DIRECT_READS, bypassed_cache, direct_reads
from modelmon.core.runs.verdict import judge
from modelmon.core.system.cache import CacheState, not_measured
from modelmon.core.watching.ready import ReadyCondition, resolution_s
from modelmon.core.watching.result import Finding, WatchResult
from modelmon.core.watching.watch import MAP_INTERVAL_S, Watch

INTERVAL_S = 0.1  # the watch's sampling period
POLL_S = 0.05  # how often a run looks at its stop event and its time limit
# A program still running this long after its whole model arrived, with nothing more
# arriving, has loaded (a server that now serves): the run ends there, timed as any other.
SETTLED_S = 5.0
# Set for engine runs: a model on disk loads without asking the hub anything.
ENGINE_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "RUNAI_STREAMER_LOG_LEVEL": "WARNING",
}


@dataclass(frozen=True)
class ProgramResult:
    """A program's run: as a load (what an A/B or a search counts), and what the watch saw."""

    result: LoadResult  # the run as a load: status, bytes, seconds, cache, error
    watch: WatchResult | None  # what the watch saw; None when the command never started
    own: dict[str, Any] | None  # an engine run's own report (loaders/child.py), else None
    stderr: str  # the last line the command wrote on stderr


class ProgramRun:
    """One watched run of ``program`` on ``model`` from the cache state ``cache``.

    While it runs, ``reads``, ``sampler`` and ``t0_ns`` (its watch's) are what the app plots
    live, as it plots a ``Session``'s load. ``cancel()`` from any thread stops the command and
    everything it started; so does ``cancel`` (an event, polled: a search's cut decides
    inside ``is_set``) and ``time_limit_s`` (from the command's start). ``start_gate`` hears
    the measured cache state just before the command starts (``envelope.StartGate``).
    """

    def __init__(
        self,
        model: Model,
        program: ProgramConfig,
        cache: CacheMode = "cold",
        *,
        cancel: threading.Event | None = None,
        time_limit_s: float | None = None,
        interval_s: float = INTERVAL_S,
        start_gate: StartGate | None = None,
        path: str | None = None,
        map_interval_s: float = MAP_INTERVAL_S,
        memory_limit: int | None = None,
        ready: ReadyCondition | None = None,
        ready_timeout_s: float | None = None,
        compile_caches: CompileCaches | None = None,
    ) -> None:
        self.model, self.program, self.cache = model, program, cache
        # Where its compile caches go, when it asks for them (``runs.compile_cache``): the
        # experiment's folders, else folders of its own for this run.
        self.compile_caches = compile_caches
        # What {path} stands for: the path the user named (a folder, say), else the model's;
        # an object's URL as it is requested (its query whole), written only redacted.
        self.path = _requested(path or model.path, model)
        self.stop = cancel or threading.Event()
        self.time_limit_s, self.interval_s = time_limit_s, interval_s
        self.map_interval_s, self.memory_limit = map_interval_s, memory_limit
        self.start_gate = start_gate
        # When a command is ready (a server): the default, its first listening socket after
        # its weights; its run then ends there, timed to ready (``runs.verdict``).
        self.ready, self.ready_timeout_s = ready, ready_timeout_s
        self.paths = [f.path for f in model.files if f.remote is None]  # cache, readahead
        self.watch: Watch | None = None
        self.limit_reached = False
        self.settled = False  # ended by modelmon once its model had arrived (SETTLED_S)
        self._over = threading.Event()  # the watch has returned

    def cancel(self) -> None:
        self.stop.set()

    @property
    def t0_ns(self) -> int:
        """When the command started (0 before): the origin of its plots."""
        return self.watch.t0_ns if self.watch is not None else 0

    @property
    def load_started_ns(self) -> int:
        """When its model's bytes began to arrive (0 before): a search judges its pace from
        there, not from its start, which its imports take."""
        watch = self.watch
        first = watch.progress().first_arrival_ns if watch is not None else None
        return first or 0

    @property
    def loaded_bytes(self) -> int:
        """The model's bytes that arrived so far."""
        return self.watch.progress().arrived_bytes if self.watch is not None else 0

    @property
    def reads(self) -> ReadLog:
        return self.watch.reads if self.watch is not None else ReadLog()

    @property
    def sampler(self) -> Sampler | None:
        return self.watch.sampler if self.watch is not None else None

    def run(self) -> ProgramResult:
        with contextlib.ExitStack() as stack:
            caches = self.compile_caches
            if caches is None and self.program.compile_cache is not None:
                caches = stack.enter_context(CompileCaches())
            compiled = stack.enter_context(caches.environment(self.program)) if caches else {}
            return self._run(compiled)

    def _run(self, compiled: dict[str, str]) -> ProgramResult:
        with (
            tempfile.TemporaryFile() as out,
            tempfile.TemporaryFile() as err,
            run_envelope(self.paths, self.program.readahead) as envelope,
        ):
            environment = {**os.environ, **self.program.environment(self.path), **compiled}
            if self.program.kind == "engine":
                environment |= ENGINE_ENVIRONMENT
            command = self.program.command(self.path)

            def gate(state: CacheState) -> bool:
                if self.stop.is_set():
                    return False
                if self.start_gate is not None and not self.start_gate(state):
                    return False
                envelope.timed_part_begins()
                return True

            self.watch = Watch(
                command,
                model=self.paths or self.model,  # a bucket's: not read again to watch it
                cache=self.cache,
                stdout=out.fileno(),
                stderr=err.fileno(),
                env=environment,
                interval_s=self.interval_s,
                start_gate=gate,
                map_interval_s=self.map_interval_s,
                memory_limit=self.memory_limit,
                # The child harness is no server: it ends once it has loaded, and the sockets
                # its ranks listen on (a torch.distributed store, gloo's) say nothing of ready.
                after_ready="watch" if self.program.kind == "engine" else "stop",
                ready=self.ready if self.program.kind != "engine" else None,
                ready_timeout_s=self.ready_timeout_s if self.program.kind != "engine" else None,
            )
            stopper = threading.Thread(target=self._stop_when_asked, name="modelmon-program")
            stopper.start()
            try:
                watched = self.watch.run()
            except WatchError as exc:
                stopped = self.stop.is_set()
                return ProgramResult(self._failed(str(exc), stopped), None, None, "")
            finally:
                self._over.set()  # ends the stopper
                stopper.join()
            overlapped = envelope.timed_part_ended()
            stderr = last_line(err)
            own = own_report(out)
        load, found = self._as_load(watched, stderr, [*envelope.setup_notes], overlapped, own)
        # The watch as the run judged it: no finding the run ruled out beside its result.
        return ProgramResult(load, replace(watched, findings=found), own, stderr)

    def _stop_when_asked(self) -> None:
        """Ends the watch, and so the command, when asked or at the time limit; returns
        once the run is over either way."""
        while not self._over.wait(POLL_S):
            if self.stop.is_set():
                break
            watch = self.watch
            started = watch.t0_ns if watch is not None else 0
            limit = self.time_limit_s
            if limit is not None and started and now_ns() - started > limit * 1e9:
                self.limit_reached = True
                break
            if watch is not None and started and self._loaded_and_quiet(watch):
                self.settled = True
                break
        else:
            return
        if self.watch is not None:
            self.watch.cancel()

    def _loaded_and_quiet(self, watch: Watch) -> bool:
        """Whether the program has been quiet for ``SETTLED_S`` after its whole model
        arrived (from a cold cache; from a cache as it is, where the model may already be
        there and nothing arrives, after it was active at all: an uncounted warm-up run).
        Never for a server asked to be ready, or given a time to be: its ready ends it, or
        its timeout."""
        if self.ready_timeout_s is not None or (self.ready is not None and self.ready.asked):
            return False
        if self.cache == "cold":
            model_bytes = sum(f.size for f in self.model.files)
            if watch.progress().arrived_bytes < model_bytes:
                return False
        return watch.observer.quiet_for_ns(now_ns()) >= SETTLED_S * 1e9

    def _failed(self, error: str, cancelled: bool) -> LoadResult:
        return LoadResult(
            status="cancelled" if cancelled else "failed",
            strategy=self.program.spec,
            options=self._options(),
            model=self.model.path,
            format=self.model.format,
            files=tuple(self.paths),
            bytes=0,
            seconds=0.0,
            cache=not_measured(self.cache),
            error=error,
        )

    def _options(self) -> dict[str, Any]:
        return {
            "command": [redact_urls(word) for word in self.program.command(self.path)],
            "env": {
                name: redact_urls(value)
                for name, value in self.program.environment(self.path).items()
            },
            "readahead": self.program.readahead,
        }

    def _as_load(
        self,
        watched: WatchResult,
        stderr: str,
        notes: list[str],
        overlapped: tuple[str, ...],
        own: dict[str, Any] | None,
    ) -> tuple[LoadResult, tuple[Finding, ...]]:
        """The run as a load, and the watch's findings that apply to it."""
        engine = get_engine(self.program.engine) if self.program.engine else None
        own_seconds, own_bytes = own_figure(own, "seconds"), own_figure(own, "bytes")
        engine_warm = self.cache == "warm" and self.program.kind == "engine"
        if engine_warm and own_seconds and own_bytes:
            # From a warm page cache nothing arrives from storage for the watch to time: the
            # child harness's own clock (its load and its touch of every byte) times it.
            watched = replace(watched, bytes_read=int(own_bytes), seconds=own_seconds)
            notes.append(
                "timed by the loader's own clock (its load and its touch of every byte, "
                "imports apart): from a warm page cache no bytes arrive for the watch to time"
            )
        own_clock = engine_warm and bool(own_seconds and own_bytes)
        known = engine is not None and engine.reads_direct(self.program.settings)
        past_cache = (
            not own_clock and bool(own_seconds) and bypassed_cache(watched, own_bytes, known)
        )
        direct = None if own_clock or past_cache else direct_reads(watched, known)
        if past_cache and own_seconds and own_bytes:
            # The tree's reads count a direct read as it is asked (read_bytes at submission,
            # before a throttle queues it) or not at all (asynchronous reads in no rchar):
            # the child harness's clock, over its load and its touch of every byte, is true.
            watched = replace(watched, bytes_read=int(own_bytes), seconds=own_seconds)
            notes.append(DIRECT_OWN_CLOCK)
            own_clock = True
        elif direct is not None:
            watched = replace(watched, bytes_read=direct[0], seconds=direct[1])
            notes.append(DIRECT_READS)
        status, error = judge(
            watched,
            stderr,
            self.model,
            settled=self.settled,
            limit_reached=self.limit_reached,
            own_clock=own_clock,
        )
        seconds = watched.seconds or 0.0
        # Read past the page cache, its bytes could not arrive there: no partial read.
        past_cache = past_cache or direct is not None
        found = tuple(f for f in watched.findings if not past_cache or f.code != "partial-read")
        notes += [f"{f.code}: {f.text}" for f in found]
        notes += list(watched.notes)
        if overlapped:
            notes.append(overlap_note(overlapped))
        if self.settled:
            notes.append(
                f"its whole model had arrived and nothing more for {SETTLED_S:g} s while it "
                "still ran (a server that loaded and serves): modelmon ended it there"
            )
        cold = watched.cold_start
        served = cold is not None and status == "ok" and watched.ended_by == "ready"
        ready_s = cold.ready_s if served and cold is not None else None
        if status == "ok" and ready_s is None and coarse(seconds, watched.interval_s):
            notes.append(
                f"the load lasted {seconds:.2f} s, about {seconds / watched.interval_s:.0f} of "
                f"the watch's {watched.interval_s:g} s samples: its rate is known to a sample, "
                "not finer (a larger model, or slower storage, times it well)"
            )
        load = LoadResult(
            status=status,
            strategy=self.program.spec,
            options=self._options(),
            model=self.model.path,
            format=self.model.format,
            files=tuple(self.paths),
            bytes=watched.bytes_read if status == "ok" else 0,
            seconds=seconds if status == "ok" else 0.0,
            cache=watched.cache or not_measured(self.cache),
            blocks=(
                arrival_blocks(self.model, self.watch, watched)
                if status == "ok" and not past_cache and self.watch is not None
                else ()
            ),
            workers=(
                WorkerTiming(0, watched.pid, watched.bytes_read, seconds, 0, watched.peak_rss),
            ),
            error=error,
            notes=tuple(notes),
            timed_every_s=0.0 if self.cache == "warm" else watched.interval_s,
            overlapped=overlapped,
            own_seconds=own_seconds,
            memory_limit=watched.memory_limit,
            ready_s=ready_s,
            ready_every_s=resolution_s(cold.ready_by) if cold is not None else 0.0,
            phases=cold.spans() if cold is not None and ready_s is not None else {},
        )
        return load, found


def run_program(
    model: Model,
    program: ProgramConfig,
    cache: CacheMode = "cold",
    *,
    cancel: threading.Event | None = None,
    time_limit_s: float | None = None,
    path: str | None = None,
) -> ProgramResult:
    """One watched run of ``program`` (see ``ProgramRun``)."""
    run = ProgramRun(model, program, cache, cancel=cancel, time_limit_s=time_limit_s, path=path)
    return run.run()


def _requested(path: str, model: Model) -> str:
    """``path``, or the URL it is written for (query values redacted) as it is requested."""
    for file in model.files:
        if file.remote is not None and file.path == path:
            return file.remote.request_url or path
    return path
