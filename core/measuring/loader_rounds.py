"""The user's loader measured beside its own settings and modelmon's best, cold, in rounds.

Round 1 screens: the loader as it is first (an engine's run reports the knob values its
installed version has, and a command's watch tells which engine it uses), then each change
once, then modelmon's best. Then the finalists (the loader as it is, the change that gained
most over its baseline, that baseline when it is not the loader itself, and modelmon's best)
run again in rounds, the order rotated each round, until each has ``EVIDENCE_RUNS`` cold runs
and while the budget keeps room for another round (``LOADER_MAX_ROUNDS`` at most). The runs of the
same round pair up: a change is judged against its baseline like an A/B (``ab.judge``).

The evidence rounds run while each ends within the budget's overrun (``overrun_s``,
``limits.EVIDENCE_OVERRUN`` of the budget, as the search's evidence may): a gain the user is
told to act on rests on three runs of each side, and a budget is a promise. Where the budget
holds fewer, the rounds stop and say so (``unsettled``), and the answer says it is not
certain. A figure the user is told ("163 MB/s") must hold when they run it again, so while a
finalist's median is known less finely than ``LOADER_MEDIAN_ERROR``
(``measuring.candidate.median_error``: a loader that maps the file on a FUSE mount varies
±10 % from run to run, and a median of five such runs moves by more than 10 % between two
sets), the rounds go on while the budget holds another, to ``LOADER_MAX_ROUNDS``; a loader
whose runs agree stops at three, and one the budget stops first is said to be so. And on
network storage each run waits for the mount to rest after the last
(``storage_rest.rest_storage``): a run right after modelmon's parallel best read up to 17 %
faster on a FUSE mount than the same run after the loader as it is, so the rotation credited
whatever followed it. Each program (an engine, whatever its settings, or a command) runs once
uncounted before its first counted run (``runs.warm.warm_each``): each counted run finds its
code in the page cache, as the user's second start does.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from modelmon.core.configuration import ProgramConfig
from modelmon.core.errors import LoadError
from modelmon.core.limits import EVIDENCE_RUNS, LOADER_MAX_ROUNDS, LOADER_MEDIAN_ERROR
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ab import Verdict, judge, timing_error
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import RaceStop, clock_limit
from modelmon.core.model.records import Model
from modelmon.core.runs.program import ProgramResult
from modelmon.core.runs.start import run_for
from modelmon.core.runs.warm import warm_code, warm_failure, warming_line
from modelmon.core.system.storage_rest import rest_storage
from modelmon.core.units import rate_text
from modelmon.core.watching.result import WatchResult

Say = Callable[[str], None]


@dataclass
class Entry:
    """One configuration of the rounds, and the one its gain is counted against."""

    candidate: Candidate
    baseline: Entry | None = None  # what its gain is counted against; None: the loader as is
    # Run once whatever the budget: the loader as it is and modelmon's best (the answer rests
    # on them) and the engine's own settings (what the user asked about); the device's
    # readahead only where the budget allows.
    essential: bool = False
    by_round: dict[int, LoadResult] = field(default_factory=dict)
    watch: WatchResult | None = None  # the last run's, for a program
    own: dict[str, Any] | None = None  # the last run's own report, for an engine

    @property
    def timed_every_s(self) -> float:
        """How finely its runs are timed (``LoadResult.timed_every_s``): a program's to the
        watch's samples; 0 for a strategy, which times itself."""
        return max((r.timed_every_s for r in self.by_round.values()), default=0.0)

    @property
    def spec(self) -> str:
        return self.candidate.spec

    def gain(self) -> float | None:
        """Median over rounds of this run's MB/s over its baseline's in the same round."""
        ratios = self.ratios()
        return statistics.median(ratios) if ratios else None

    def ratios(self) -> list[float]:
        if self.baseline is None:
            return []
        theirs = self.baseline.by_round
        return [
            result.mbps / theirs[number].mbps
            for number, result in sorted(self.by_round.items())
            if number in theirs and theirs[number].mbps > 0 and result.mbps > 0
        ]

    def timing_resolution(self) -> float:
        """How far a ratio of its run over its baseline's may be off by timing alone
        (``measuring.ab.timing_error``), median over the paired rounds."""
        if self.baseline is None:
            return 0.0
        theirs = self.baseline.by_round
        errors = [timing_error(theirs[n], run) for n, run in self.by_round.items() if n in theirs]
        return statistics.median(errors) if errors else 0.0

    def verdict(self) -> Verdict | None:
        """Its pairs against its baseline's judged like an A/B's, timing included."""
        ratios = self.ratios()
        return judge(ratios, self.timing_resolution()) if ratios else None


class LoaderRounds:
    def __init__(
        self,
        model: Model,
        path: str,
        deadline: float,
        say: Say,
        cancel: threading.Event | None,
        *,
        overrun_s: float,
    ) -> None:
        self.model, self.path, self.deadline = model, path, deadline
        self.overrun_s = overrun_s  # how far past the deadline the evidence rounds may end
        self.say, self.cancel = say, cancel
        # spec -> what each run took of the budget (with its rest on network storage)
        self.walls: dict[str, list[float]] = {}
        self.round = 0
        self.warmed: set[str] = set()  # the programs' code read in (``ProgramConfig.code``)
        self.starts: list[float] = []  # seconds from a program's start to its first byte
        # The evidence the budget left short, or a median it left known less finely than
        # wanted: said in the advice's notes.
        self.unsettled = ""

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def pace(self, entry: Entry) -> float:
        walls = self.walls.get(entry.spec)
        return statistics.median(walls) if walls else 0.0

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("recommendation cancelled")

    def run(self, entry: Entry, leader_s: float | None = None) -> LoadResult:
        """One cold run of ``entry`` in the current round; ``leader_s``: the load time it
        races (the loader as it is), cut as every search cuts (``cutoff``)."""
        candidate = entry.candidate
        program = candidate.program
        if program is not None and program.code not in self.warmed:
            self.warm(entry, program)
        started = time.monotonic()
        # On network storage each run starts on a client the previous run no longer helps.
        rest_storage([f.path for f in self.model.files], self.cancel)
        self.check_cancel()
        stop = RaceStop(self.cancel, leader_s, self.model.total_bytes)
        start_s = max(self.starts, default=0.0) if program is not None else 0.0
        limit_s = None if leader_s is None else clock_limit(leader_s, start_s)
        running = run_for(
            self.model,
            candidate.config,
            "cold",
            cancel=stop,
            time_limit_s=limit_s,
            monitor=False,
            path=self.path,
        )
        stop.watch(running)
        outcome = running.run()
        result = outcome.result
        if result.storage_error is not None:  # no side's fault: the rounds end
            raise result.storage_error
        if isinstance(outcome, ProgramResult):
            entry.watch = outcome.watch or entry.watch
            entry.own = outcome.own or entry.own
            watched = outcome.watch
            if watched is not None and watched.first_byte_s is not None:
                self.starts.append(watched.first_byte_s)
        self.check_cancel()
        self.walls.setdefault(entry.spec, []).append(time.monotonic() - started)
        if result.status == "ok":
            candidate.results.append(result)
            entry.by_round[self.round] = result
            candidate.ended, candidate.reason = "finished", ""
            cold = "" if result.cache.cold else " (not verified cold)"
            self.say(f"{entry.spec}: {rate_text(result.mbps)}{cold}")
        elif not candidate.results:
            candidate.ended = "cut early" if result.status == "cancelled" else "failed"
            candidate.reason = stop.reason or f"{candidate.ended}: {result.error}"
            self.say(f"{entry.spec}: {candidate.reason}")
        else:
            self.say(f"{entry.spec}: run not counted ({result.error})")
        return result

    def warm(self, entry: Entry, program: ProgramConfig) -> None:
        """The program's code read in by a run that is not counted (``run.warm_code``)."""
        self.warmed.add(program.code)
        self.say(warming_line(entry.spec))
        warmed = warm_code(self.model, program, cancel=self.cancel, path=self.path)
        self.check_cancel()
        failure = warm_failure(warmed)
        if failure is not None:
            self.say(f"{entry.spec}: its uncounted run failed ({failure})")

    def leader_for(self, as_is: Entry) -> float | None:
        """The load time a change races: the loader's as it is (its slowest run): a change
        far slower than that tells nothing more by finishing."""
        return max((r.seconds for r in as_is.candidate.results), default=None)

    def screen(self, as_is: Entry, entries: list[Entry], keep_s: float) -> None:
        """Round 1 after the loader as it is: each entry once, while the budget keeps
        ``keep_s`` for the rounds that follow; an entry left out is "not measured"."""
        leader = self.leader_for(as_is)
        for entry in entries:
            if entry.by_round:
                continue
            pace = self.pace(entry) or self.pace(as_is)
            if not entry.essential and self.left() - keep_s < pace:
                entry.candidate.ended = "not measured"
                entry.candidate.reason = "not measured: no budget left for it"
                continue
            self.run(entry, None if entry.baseline is None else leader)

    def settle(self, finalists: list[Entry]) -> int:
        """More rounds of the finalists: to ``EVIDENCE_RUNS`` each while a round ends within
        the budget's overrun, and on while any one's median is not known finely enough
        (``median_known``) and another round fits the budget. The number of rounds run in
        all."""
        alive = [e for e in finalists if e.candidate.results]
        while self.round + 1 < LOADER_MAX_ROUNDS and alive:
            short = any(len(e.candidate.results) < EVIDENCE_RUNS for e in alive)
            wide = any(not median_known(e.candidate) for e in alive)
            needed = sum(self.pace(e) for e in alive)
            if short and self.left() + self.overrun_s < needed:
                self.unsettled = self.evidence_short(alive, needed)
                break
            if not short and self.left() < needed:
                if wide:  # the budget ends first: said, not run past it
                    self.unsettled = why_more(alive, settled=False)
                break
            if wide and not short:
                self.say(why_more(alive))
            self.round += 1
            shift = self.round % len(alive)
            for entry in alive[shift:] + alive[:shift]:
                self.run(entry)
            alive = [e for e in alive if e.candidate.ended == "finished"]
        return self.round + 1

    def evidence_short(self, finalists: list[Entry], round_s: float) -> str:
        """What the budget left of the evidence (``round_s``: a round of ``finalists``)."""
        fewest = min(len(e.candidate.results) for e in finalists)
        room = max(self.left() + self.overrun_s, 0.0)
        more = (EVIDENCE_RUNS - fewest) * round_s - room
        # The room is said: a search that ends seconds before its budget, saying a second more
        # would hold the rest, otherwise reads as a contradiction.
        return (
            f"the budget held {fewest} cold run{'s' if fewest != 1 else ''} of each finalist, not "
            f"{EVIDENCE_RUNS}: a round of them takes about {math.ceil(round_s)} s, and "
            f"{math.floor(room)} s were left with the {self.overrun_s:.0f} s a round may end "
            f"past it; about {math.ceil(more)} s more of budget would hold them"
        )


def median_known(candidate: Candidate) -> bool:
    """Whether the candidate's median is known to ``LOADER_MEDIAN_ERROR`` (no runs: nothing
    more to learn of it)."""
    return not candidate.results or candidate.median_error <= LOADER_MEDIAN_ERROR


def why_more(finalists: list[Entry], settled: bool = True) -> str:
    """Why another round runs past the evidence (``settled`` False: why one would have, had
    the budget allowed): the finalist whose median is least known."""
    widest = max(finalists, key=lambda e: e.candidate.median_error)
    known = (
        f"{widest.spec}: its median is known to ±{widest.candidate.median_error:.1%} over "
        f"{len(widest.candidate.results)} runs"
    )
    if not settled:
        return f"{known}, not ±{LOADER_MEDIAN_ERROR:.0%}: a longer budget would settle it"
    return f"{known}; more rounds until ±{LOADER_MEDIAN_ERROR:.0%} ({LOADER_MAX_ROUNDS} at most)"


def best_change(changes: list[Entry]) -> Entry | None:
    """The change that gained most over its baseline in the screening round."""
    measured = [e for e in changes if e.gain() is not None]
    return max(measured, key=lambda e: e.gain() or 0.0, default=None)
