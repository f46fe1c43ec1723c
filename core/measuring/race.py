"""One cold run of a candidate at a time, against the budget and against the leader.

Every candidate's run is what its configuration calls for (``runs.start.run_for``): modelmon's
strategy in worker processes, or another loader watched in its own process, judged alike by
the bytes that arrived. The race keeps what planning needs: the leader's load time (the
fastest completed load so far), each candidate's own wall time per run (process start,
eviction and load), and the overhead a run pays around its load. A racing run is stopped by
the cut (``cutoff``: on course for more than ``CUT_FACTOR`` × the leader's load time, and at
that time at the latest); every run is stopped where it would overrun what the budget leaves
it.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable

from modelmon.core.errors import LoadError, ReadaheadError
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import (
    CUT_FACTOR,
    MIN_LIMIT_S,
    START_SLACK,
    RaceStop,
    clock_limit,
)
from modelmon.core.model.records import Model
from modelmon.core.runs.start import run_for
from modelmon.core.system.memory_limit import size_text
from modelmon.core.units import rate_text

# What another loader's run costs beyond one of modelmon's until a run of it measured it: a
# fresh interpreter importing its library (torch takes 1-4 s). Planned at the leader's pace
# alone, such a run would overrun its plan by that much.
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
        memory_limit: int | None = None,
    ) -> None:
        self.model, self.deadline = model, deadline
        # Every run happens in a memory cgroup of this size, as in a container of it: a
        # candidate OOM-killed there, or thrashing (re-reading its model), is out.
        self.memory_limit = memory_limit
        # How far past the deadline the pick's own runs may go to reach EVIDENCE_RUNS (fill).
        self.evidence_overrun_s = evidence_overrun_s
        self.progress, self.cancel = progress, cancel
        self.first_pace_s = first_pace_s  # a run's wall time, before any candidate ran
        self.leader: float | None = None  # median load seconds of the fastest candidate
        self._medians: dict[int, float] = {}  # each candidate's median load seconds, by id
        self.overheads: list[float] = []  # wall time of a run minus its load time
        # The same for each other loader (by ``ProgramConfig.code``): its process start and
        # imports come on top.
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
        return self.leader + self.overhead_s

    def pace(self, candidate: Candidate) -> float:
        """Expected wall seconds of one more run of ``candidate``: its own median when it has
        run, else the leader's pace (a run slower than that is cut or stopped at the limit),
        plus, for a peer, the start of its process and imports (``peer_overhead_s``)."""
        if candidate.wall_seconds and candidate.results:
            own = statistics.median(candidate.wall_seconds)
            if len(candidate.wall_seconds) > 1:
                return own
            # One run: the search's first may have started without what every later run
            # waits for (the host's report pass after a free): the usual overhead stands.
            return max(own, candidate.results[-1].seconds + self.overhead_s)
        if candidate.program is None:
            return self.leader_pace_s
        load_s = self.first_pace_s if self.leader is None else self.leader
        return load_s + self.peer_overhead_s(candidate.program.code)

    def peer_overhead_s(self, code: str) -> float:
        """A run of another loader (``code``) minus its load: measured on an earlier run of
        it, else the overhead of modelmon's runs and ``PEER_START_GUESS_S``."""
        measured = self.peer_overheads.get(code)
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
        at_least_s: float = 0.0,
    ) -> LoadResult | None:
        """One cold run; the completed result (also appended to the candidate) or None.

        ``race`` False runs without the cut (a duel's pairs), but never past the budget.
        ``first``: the first run of the search, which runs to the end even past the budget
        (without one completed load there is no answer). ``keep_s``: budget this run must
        leave untouched (kept for the duel). ``over_s``: how far past the deadline this run
        may end (the pick's evidence runs). ``at_least_s``: the time its load is given
        whatever the budget left (the baseline's: the clock's cut, as any entry has).
        """
        self.check_cancel()
        budget_limit = math.inf if first else self.left() + over_s - keep_s - self.overhead_s
        limit = budget_limit
        clock_cut = race and self.leader is not None
        if clock_cut and self.leader is not None:
            limit = min(limit, clock_limit(self.leader))
        given = at_least_s > limit
        limit = max(MIN_LIMIT_S, at_least_s, limit)
        time_limit = None if math.isinf(limit) else limit
        started = time.monotonic()
        horizon = None if first else max(self.deadline + over_s - keep_s, started + limit)
        try:
            result, loaded, stop = self._run_once(candidate, time_limit, race, horizon)
        except ReadaheadError as exc:
            # Another modelmon run holds the device's readahead: this run of a readahead
            # candidate cannot be made, and the search goes on without it.
            candidate.ended, candidate.reason = "failed", f"failed: {exc}"
            self.progress(f"{candidate.spec}: {candidate.reason}")
            return None
        candidate.wall_seconds.append(time.monotonic() - started)
        self.check_cancel()
        limited = self.memory_limit is not None  # only a run under a limit thrashes there
        thrash = thrashing(result, self.model.total_bytes) if limited else None
        if thrash is not None:
            candidate.ended, candidate.reason = "failed", thrash
            self.progress(f"{candidate.spec}: {candidate.reason}")
            return None
        if result.status == "ok":
            overhead = candidate.wall_seconds[-1] - result.seconds
            if candidate.program is None:
                self.overheads.append(overhead)
            else:
                self.peer_overheads.setdefault(candidate.program.code, []).append(overhead)
            candidate.results.append(result)
            # A rescreened candidate keeps no stale "not measured" reason.
            candidate.ended, candidate.reason = "finished", ""
            # The fastest candidate's median load time: one outlier run (walk 22: 1547 MB/s
            # of a leader's 534-1547) would cut runs within the leader's own spread.
            self._medians[id(candidate)] = statistics.median(r.seconds for r in candidate.results)
            self.leader = min(self._medians.values())
            cold = "" if result.cache.cold else " (not verified cold)"
            self.progress(f"{candidate.spec}: {rate_text(result.mbps)}{cold}")
            return result
        if candidate.results:  # a finalist stopped by the budget: its earlier runs stand
            self.progress(f"{candidate.spec}: run stopped ({result.error}): not counted")
            return None
        if candidate.program is not None and result.status == "cancelled" and loaded == 0:
            # another loader still starting (importing its library) at its time limit
            candidate.ended = "not measured"
            candidate.reason = "not measured: it did not start loading within the budget"
        elif stop.reason is not None:
            elapsed, got = stop.cut_at or (limit, loaded)
            candidate.stopped_below_mbps = got / max(elapsed, 1e-9) / 1e6
            candidate.ended, candidate.reason = "cut early", stop.reason
        elif result.status == "cancelled":
            why = (
                f"the end of the budget; a baseline is given {CUT_FACTOR:g}× the leader's "
                "load time even so"
                if given
                else f"{CUT_FACTOR:g}× the leader's load time"
                if clock_cut and limit < budget_limit
                else "the budget kept for the duel"
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

    def _run_once(
        self, candidate: Candidate, limit: float | None, race: bool, horizon: float | None
    ) -> tuple[LoadResult, int, RaceStop]:
        """One cold run of ``candidate`` under its cut, ``limit`` seconds of load at most.
        Another loader's start and imports come before its load and count against the budget
        too: its run ends by ``horizon`` (``time.monotonic()``; the deadline less what is kept
        for the duel), so a slow import cannot spend the runs kept for the pick's evidence."""
        # A warm-up pass reports its reads apart from the load's (they are not loaded bytes),
        # so a warm-up run would look stalled until its load starts: only the clock cuts it.
        judged = race and candidate.strategy != "warmup"
        stop = RaceStop(self.cancel, self.leader if judged else None, self.model.total_bytes)
        program = candidate.program
        if program is not None:
            start_s = START_SLACK * self.peer_overhead_s(program.code)
            limit = None if limit is None else limit + start_s
            if horizon is not None:
                left = max(MIN_LIMIT_S, horizon - time.monotonic())
                limit = left if limit is None else min(limit, left)
        run = run_for(
            self.model,
            candidate.config,
            "cold",
            cancel=stop,
            time_limit_s=limit,
            memory_limit=self.memory_limit,
        )
        stop.watch(run)
        outcome = run.run()
        if outcome.result.storage_error is not None:  # no candidate's fault: the search ends
            raise outcome.result.storage_error
        return outcome.result, run.loaded_bytes, stop


def thrashing(result: LoadResult, model_bytes: int) -> str | None:
    """Why a run under a memory limit is out though it finished: it re-read
    ``THRASH_SHARE`` or more of its model after reclaim (its time is the limit's)."""
    limited = result.memory_limit
    if result.status != "ok" or limited is None or not limited.thrashed(model_bytes):
        return None
    share = limited.reread_bytes / model_bytes
    return (
        f"out: under the memory limit of {size_text(limited.limit_bytes)} it re-read "
        f"{share:.0%} of the model after reclaim (thrashing; {limited.held_text()})"
    )
