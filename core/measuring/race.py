"""One cold run of a candidate at a time, against the budget and against the leader.

The race keeps what planning needs: the leader (fastest completed load so far, its bytes
curve and load time), each candidate's own wall time per run (process start, eviction and
load), and the overhead a run pays around its load. A run is started only when it can finish
inside the budget at the pace expected of it, and stopped when it falls far behind the
leader (``cutoff``), when it exceeds ``SLOW_RUN_FACTOR`` × the leader's load time, or when
the budget would be overrun.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import threading
import time
from collections.abc import Callable

from modelmon.core.errors import LoadError, ReadaheadError
from modelmon.core.loading.result import OVERLAP_NOTE, LoadResult, WorkerTiming
from modelmon.core.loading.runner import LoadRun
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import Curve, RaceStop
from modelmon.core.measuring.peers import run_peer
from modelmon.core.model.records import Model
from modelmon.core.system import host_memory
from modelmon.core.system.proc_status import own_peak_watch

SLOW_RUN_FACTOR = 4.0  # a run this many times longer than the leader's load is stopped
MIN_LIMIT_S = 0.5  # the shortest time limit a run is given
# What a peer's run costs beyond one of modelmon's, before any run of that peer measured it:
# a fresh interpreter importing its library (torch: 1-4 s on this project's machines). An
# unrun peer planned at the leader's pace once took 8-16 s where 5 were planned, and ate the
# runs kept for the pick's evidence.
PEER_START_GUESS_S = 3.0


class Race:
    def __init__(
        self,
        model: Model,
        deadline: float,
        first_pace_s: float,
        progress: Callable[[str], None],
        cancel: threading.Event | None,
        evidence_overrun_s: float = 0.0,
    ) -> None:
        self.model, self.deadline = model, deadline
        # How far past the deadline the pick's own runs may go to reach EVIDENCE_RUNS (fill).
        self.evidence_overrun_s = evidence_overrun_s
        self.progress, self.cancel = progress, cancel
        self.first_pace_s = first_pace_s  # a run's wall time, before any candidate ran
        self.leader: Curve | None = None
        self.overheads: list[float] = []  # wall time of a run minus its load time
        # The same for each peer library: its process start and imports come on top.
        self.peer_overheads: dict[str, list[float]] = {}

    def left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def overhead_s(self) -> float:
        return statistics.median(self.overheads) if self.overheads else self.first_pace_s / 2

    @property
    def leader_pace_s(self) -> float:
        """Wall seconds of one run at the leader's pace."""
        if self.leader is None:
            return self.first_pace_s
        return self.leader.seconds + self.overhead_s

    def pace(self, candidate: Candidate) -> float:
        """Expected wall seconds of one more run of ``candidate``: its own median when it has
        run, else the leader's pace (a run slower than that is cut or stopped at the limit),
        plus, for a peer, the start of its process and imports (``peer_overhead_s``)."""
        if candidate.wall_seconds and candidate.results:
            return statistics.median(candidate.wall_seconds)
        if candidate.peer is None:
            return self.leader_pace_s
        load_s = self.first_pace_s if self.leader is None else self.leader.seconds
        return load_s + self.peer_overhead_s(candidate.peer.peer)

    def peer_overhead_s(self, peer: str) -> float:
        """A run of ``peer`` minus its load: measured on an earlier run of it, else the
        overhead of modelmon's runs and ``PEER_START_GUESS_S``."""
        measured = self.peer_overheads.get(peer)
        if measured:
            return statistics.median(measured)
        return self.overhead_s + PEER_START_GUESS_S

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("recommendation cancelled")

    def run(
        self,
        candidate: Candidate,
        *,
        race: bool = True,
        first: bool = False,
        keep_s: float = 0.0,
        over_s: float = 0.0,
    ) -> LoadResult | None:
        """One cold run; the completed result (also appended to the candidate) or None.

        ``race`` False runs without the leader cut and the slow-run limit (the finalists'
        pairs), but never past the budget. ``first``: the first run of the search, which runs
        to the end even past the budget (without one completed load there is no answer).
        ``keep_s``: budget this run must leave untouched (kept for the semifinal and finals).
        ``over_s``: how far past the deadline this run may end (the pick's evidence runs).
        """
        self.check_cancel()
        budget_limit = math.inf if first else self.left() + over_s - keep_s - self.overhead_s
        limit = budget_limit
        clock_cut = race and self.leader is not None
        if clock_cut and self.leader is not None:
            limit = min(limit, SLOW_RUN_FACTOR * self.leader.seconds)
        limit = max(MIN_LIMIT_S, limit)
        time_limit = None if math.isinf(limit) else limit
        started = time.monotonic()
        if candidate.peer is not None:
            end_by = None if first else self.deadline + over_s - keep_s
            result, loaded, stop = self._run_peer(candidate, time_limit, end_by)
        else:
            try:
                result, loaded, stop = self._run_load(candidate, time_limit, race)
            except ReadaheadError as exc:
                # Another modelmon run holds the device's readahead: this run of a readahead
                # candidate cannot be made, the search goes on (it ended recommend, exit 2,
                # when two test suites ran at once).
                candidate.ended, candidate.reason = "failed", f"failed: {exc}"
                self.progress(f"{candidate.spec}: {candidate.reason}")
                return None
        candidate.wall_seconds.append(time.monotonic() - started)
        self.check_cancel()
        if result.status == "ok":
            overhead = candidate.wall_seconds[-1] - result.seconds
            if candidate.peer is None:
                self.overheads.append(overhead)
            else:
                self.peer_overheads.setdefault(candidate.peer.peer, []).append(overhead)
            candidate.results.append(result)
            # A rescreened candidate keeps no stale "not measured" reason.
            candidate.ended, candidate.reason = "finished", ""
            if self.leader is None or result.seconds < self.leader.seconds:
                samples = stop.curve(result.seconds, result.bytes) if stop else None
                self.leader = samples or Curve([], result.seconds, result.bytes)
            cold = "" if result.cache.cold else " (not verified cold)"
            self.progress(f"{candidate.spec}: {result.mbps:.0f} MB/s{cold}")
            return result
        if candidate.results:  # a finalist stopped by the budget: its earlier runs stand
            self.progress(f"{candidate.spec}: run stopped ({result.error}): not counted")
            return None
        if result.error == "not ready":  # a peer still importing its library at the deadline
            candidate.ended = "not measured"
            candidate.reason = "not measured: its library did not import within the budget"
        elif stop is not None and stop.reason is not None:
            elapsed, got = stop.samples[-1] if stop.samples else (limit, loaded)
            candidate.stopped_below_mbps = got / max(elapsed, 1e-9) / 1e6
            candidate.ended, candidate.reason = "cut early", stop.reason
        elif result.status == "cancelled":
            why = (
                f"{SLOW_RUN_FACTOR:g}× the leader's load time"
                if clock_cut and limit < budget_limit
                else "the budget kept for the finals"
                if keep_s > 0
                else "the end of the budget"
            )
            candidate.stopped_below_mbps = loaded / limit / 1e6
            candidate.ended = "cut early"
            candidate.reason = f"cut early: stopped at the time limit of {limit:.1f} s ({why})"
        else:
            candidate.ended, candidate.reason = "failed", f"failed: {result.error}"
        self.progress(f"{candidate.spec}: {candidate.reason}")
        return None

    def _run_load(
        self, candidate: Candidate, limit: float | None, race: bool
    ) -> tuple[LoadResult, int, RaceStop]:
        # A warm-up pass reports its reads apart from the load's (they are not loaded bytes),
        # so a warm-up run would look stalled until its load starts: only the clock cuts it.
        judged = race and candidate.strategy != "warmup"
        stop = RaceStop(self.cancel, self.leader if judged else None)
        options = candidate.options.with_(cache="cold")
        load = LoadRun(self.model, candidate.strategy, options, cancel=stop, time_limit_s=limit)
        stop.watch(load)
        result = load.run()
        return result, load.loaded_bytes, stop

    def _run_peer(
        self, candidate: Candidate, limit: float | None, end_by: float | None
    ) -> tuple[LoadResult, int, RaceStop | None]:
        """A peer's run; its imports and priming count against the budget, so ``end_by``
        (the deadline less what is kept for later rounds) ends the whole run, not the load
        alone: a slow import once spent the runs kept for the pick's evidence."""
        assert candidate.peer is not None
        files = [f.path for f in self.model.files]
        expected = self.leader.seconds if self.leader is not None else 0.0
        horizon = self.deadline if end_by is None else end_by
        # its imports (torch) may take what leaves its load the leader's time before horizon
        ready = max(MIN_LIMIT_S, horizon - time.monotonic() - expected)
        with own_peak_watch() as own_peak:
            peer = run_peer(
                candidate.peer,
                files,
                "cold",
                time_limit_s=limit,
                ready_timeout_s=ready,
                stop=self.cancel,
                end_by=end_by,
            )
            parent_peak = own_peak()
        state = peer.state
        if state is not None:
            state = dataclasses.replace(state, resident_after=peer.resident_after)
        else:
            from modelmon.core.system.cache import not_measured

            state = not_measured("cold")
        result = LoadResult(
            status=peer.status,
            strategy=candidate.strategy,
            options={"env": dict(candidate.peer.env)},
            model=self.model.path,
            format=self.model.format,
            files=tuple(files),
            bytes=peer.bytes,
            seconds=peer.seconds,
            cache=state,
            error=peer.error,
            # The peer's one process is the worker of its load.
            workers=(WorkerTiming(0, 0, peer.bytes, peer.seconds, 0, peer.peak_rss),)
            if peer.status == "ok"
            else (),
            notes=host_memory.reported_notes(peer.host_reported)
            + ((f"{OVERLAP_NOTE}{'; '.join(peer.overlapped)}",) if peer.overlapped else ()),
            host_reported=peer.host_reported,
            parent_peak_rss=parent_peak,
        )
        return result, 0, None
