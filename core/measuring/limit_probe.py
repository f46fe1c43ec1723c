"""The smallest memory limit a pick holds at, measured.

A search under a memory limit says whether its pick runs there; a user sizing a container
needs more: how much less would do, and what happens below that. After the search, the pick
runs again, cold, in memory cgroups smaller than the limit given, and each run is judged by
the search's own rules (``Race``): it holds where it completes without an OOM kill, without
thrashing (``THRASH_SHARE`` of its model read again after reclaim) and without falling to
``CUT_FACTOR`` × its own load time.

The first limit tried is the pick's own need: its anonymous peak under the limit given (its
arrays and interpreters: what reclaim cannot take) with ``HEADROOM`` and ``SLACK``. Where it
holds, the next tries ``BELOW`` of that need, to show what happens under it; where it does
not, the next lies halfway (geometrically) toward the limit given. At most ``MAX_PROBES``
runs, each only where the budget holds one at the pick's pace.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core.errors import LoadError
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import (
    CUT_FACTOR,
    MIN_LIMIT_S,
    RaceStop,
    clock_limit,
)
from modelmon.core.measuring.race import Race, thrashing
from modelmon.core.options import MiB
from modelmon.core.runs.start import run_for
from modelmon.core.system.memory_limit import ram_text, size_text
from modelmon.core.units import rate_figure, rate_text

# Above its anonymous need: an interpreter's memory differs a little from run to run, and the
# reads in flight need page cache before they are copied out of it.
HEADROOM, SLACK = 1.1, 32 * MiB
BELOW = 0.8  # under its need: what a limit too small does to it
MAX_PROBES = 3
STEP = 16 * MiB  # limits tried are multiples of this, as a container's are written
CLOSE = 1.15  # a failing and a holding limit this close apart: nothing more to learn


@dataclass(frozen=True, slots=True)
class LimitProbe:
    """One run of the pick under a smaller memory limit."""

    limit_bytes: int
    held: bool
    mbps: float | None  # its rate where it completed
    peak_bytes: int | None  # the cgroup's peak, page cache included
    reread_bytes: int  # read again after reclaim
    why: str  # where it did not hold: "was OOM-killed", "re-read 31% of the model", ...

    def text(self) -> str:
        """'at 1.1 GiB it was OOM-killed' / '1.4 GiB (812 MB/s, peak 1.3 GiB)'."""
        size = size_text(self.limit_bytes)
        if not self.held:
            return f"at {size} it {self.why}"
        reread = f", re-read {ram_text(self.reread_bytes)}" if self.reread_bytes >= MiB else ""
        peak = f", peak {ram_text(self.peak_bytes)}" if self.peak_bytes else ""
        return f"{size} ({rate_text(self.mbps or 0)}{peak}{reread})"


@dataclass(frozen=True, slots=True)
class LimitProbes:
    """What the probes found under the limit given (``limit_bytes``)."""

    limit_bytes: int
    need_bytes: int  # the pick's anonymous peak under the limit given
    probes: tuple[LimitProbe, ...]
    skipped: str = ""  # why no (further) limit was tried

    @property
    def smallest_held(self) -> int:
        """The smallest limit the pick held at: a probe's, else the limit given."""
        return min((p.limit_bytes for p in self.probes if p.held), default=self.limit_bytes)

    def sentence(self) -> str:
        """The probes in one sentence for the explanation ('' when none was made or
        skipped): the smallest limit it held at, then what the smaller ones did."""
        if not self.probes:
            return f"No smaller memory limit was tried: {self.skipped}." if self.skipped else ""
        held = sorted((p for p in self.probes if p.held), key=lambda p: p.limit_bytes)
        failed = sorted((p for p in self.probes if not p.held), key=lambda p: -p.limit_bytes)
        if held:
            words = [f"It holds at a memory limit of {held[0].text()}, the smallest tried"]
        else:
            given = size_text(self.limit_bytes)
            words = [f"It held under none of the smaller memory limits tried ({given} given)"]
        words += [p.text() for p in failed]
        more = f"; no more were tried: {self.skipped}" if self.skipped else ""
        how = "each a cold run in a memory cgroup of that size, after the search"
        return "; ".join(words) + f" ({how}){more}."

    def to_dict(self) -> dict[str, object]:
        return {
            "limit_bytes": self.limit_bytes,
            "need_bytes": self.need_bytes,
            "smallest_held_bytes": self.smallest_held,
            "probes": [
                {
                    "limit_bytes": p.limit_bytes,
                    "held": p.held,
                    **({} if p.mbps is None else {"mbps": rate_figure(p.mbps)}),
                    **({} if p.peak_bytes is None else {"peak_bytes": p.peak_bytes}),
                    "reread_bytes": p.reread_bytes,
                    **({"why": p.why} if p.why else {}),
                }
                for p in self.probes
            ],
            **({"skipped": self.skipped} if self.skipped else {}),
        }


def _step(count: float, up: bool) -> int:
    rounded = math.ceil(count / STEP) if up else math.floor(count / STEP)
    return max(1, rounded) * STEP


def _why_not(result: LoadResult, stop: RaceStop, model_bytes: int) -> str:
    limited = result.memory_limit
    if limited is not None and limited.oom_killed:
        return "was OOM-killed"
    if result.status == "ok" and limited is not None:
        share = limited.reread_bytes / max(1, model_bytes)
        return f"thrashed: re-read {share:.0%} of the model after reclaim"
    if stop.reason is not None or result.status == "cancelled":
        return f"was on course for over {CUT_FACTOR:g}× its load time: stopped"
    return f"failed: {result.error}"


class LimitSearch:
    """The probes of one pick; ``run`` makes them within the race's budget."""

    def __init__(self, race: Race, pick: Candidate, limit: int) -> None:
        self.race, self.pick, self.limit = race, pick, limit
        held = [r.memory_limit for r in pick.results if r.memory_limit is not None]
        self.need = max((m.anon_peak_bytes for m in held), default=0)
        # modelmon refuses a load that keeps the model under a limit smaller than it, before
        # it runs (``preflight.check_memory``): no limit under the model's bytes is tried.
        own = pick.own
        self.floor = race.model.total_bytes if own is not None and not own.options.discard else 0
        seconds = [r.seconds for r in pick.results if r.status == "ok"]
        self.load_s = statistics.median(seconds) if seconds else None

    def run(self, say: Callable[[str], None], cancel: threading.Event | None) -> LimitProbes:
        probes: list[LimitProbe] = []
        held_at, failed_at = self.limit, 0
        wanted = max(self.need * HEADROOM + SLACK, self.floor)
        candidate = _step(wanted, up=True) if self.need else 0
        skipped = ""
        if not self.need or self.load_s is None:
            skipped = "its runs under the limit recorded no memory to start from"
            candidate = 0
        elif candidate * CLOSE > self.limit:
            skipped = f"it needs most of the limit ({ram_text(self.need)} anonymous at most)"
            candidate = 0
        while candidate and len(probes) < MAX_PROBES:
            if self.race.left() < self.race.pace(self.pick):
                skipped = "the budget left no run for a smaller limit"
                break
            probe = self._probe(candidate, say, cancel)
            probes.append(probe)
            if probe.held:
                held_at = candidate
            else:
                failed_at = candidate
            candidate = self._next(held_at, failed_at, probes)
        return LimitProbes(self.limit, self.need, tuple(probes), skipped)

    def _next(self, held_at: int, failed_at: int, probes: list[LimitProbe]) -> int:
        """The next limit worth a run, or 0."""
        tried = {p.limit_bytes for p in probes} | {self.limit}
        if not failed_at:  # every probe held: show what a limit under its need does
            below = max(_step(self.need * BELOW, up=False), _step(self.floor, up=True))
            return below if below < held_at and below not in tried else 0
        if held_at <= failed_at * CLOSE:
            return 0
        middle = _step(math.sqrt(held_at * failed_at), up=True)
        return middle if failed_at < middle < held_at and middle not in tried else 0

    def _probe(
        self, limit: int, say: Callable[[str], None], cancel: threading.Event | None
    ) -> LimitProbe:
        """One cold run of the pick in a memory cgroup of ``limit``, cut at
        ``CUT_FACTOR`` × its own load time under the limit given."""
        model, load_s = self.race.model, self.load_s or 0.0
        stop = RaceStop(cancel, load_s, model.total_bytes)
        program = self.pick.program
        # Another loader's process start and imports come before its load, as in the race.
        start_s = self.race.peer_overhead_s(program.code) if program is not None else 0.0
        time_limit = max(MIN_LIMIT_S, min(clock_limit(load_s, start_s), self.race.left()))
        run = run_for(
            model,
            self.pick.config,
            "cold",
            cancel=stop,
            time_limit_s=time_limit,
            memory_limit=limit,
        )
        stop.watch(run)
        try:
            result = run.run().result
        except LoadError as exc:  # refused before it ran (a check of its own)
            self.race.check_cancel()
            return LimitProbe(limit, False, None, None, 0, f"could not run: {exc}")
        self.race.check_cancel()
        if result.storage_error is not None:  # the storage failed, not the limit
            raise result.storage_error
        limited = result.memory_limit
        killed = limited is not None and limited.oom_killed
        held = result.status == "ok" and not killed and thrashing(result, model.total_bytes) is None
        probe = LimitProbe(
            limit,
            held,
            result.mbps if result.status == "ok" else None,
            None if limited is None else limited.peak_bytes,
            0 if limited is None else limited.reread_bytes,
            "" if held else _why_not(result, stop, model.total_bytes),
        )
        say(f"{self.pick.spec} under a memory limit of {probe.text()}")
        return probe
