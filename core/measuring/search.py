"""The recommendation search: candidates race on cold runs inside one budget, and the two
best meet in duels of alternating pairs that stop as soon as their own noise settles them.

- Entry: candidates enter one at a time, most promising first, each with one cold run that
  races the leader and is cut when on course for more than ``cutoff.CUT_FACTOR`` × the
  leader's load time. A candidate enters only while the budget left after its run holds the
  duel: its pairs (``MIN_PAIRS``; one while the entrant would be the first challenger) and
  the runs that bring either duellist to ``EVIDENCE_RUNS``, of which the budget's evidence
  overrun (``limits.EVIDENCE_OVERRUN``) may fall past the deadline.
- Duel: otherwise the champion (modelmon's best, ``modelmons_best``, then each duel's winner)
  and its challenger (the best other candidate still in the race) run in alternating pairs.
  From ``MIN_PAIRS`` pairs on, a duel stops when its pairs settle it (``settled``): the faster
  wins by more than ``ab.BEYOND_NOISE`` × the pairs' noise, every pair agreeing, and by
  ``MIN_GAIN`` at least; or even that much noise leaves the two under ``MIN_GAIN`` apart, and
  the more robust (``Candidate.robustness``) wins. The loser leaves the race, the next
  challenger steps up, and entry resumes as far as the budget allows.
- End: when nothing more fits, an open duel is judged as it stands (``decide``); the pick is
  brought to ``EVIDENCE_RUNS`` runs, then spare budget buys more runs of it. A duel decided
  on runs not in pairs is judged again on all those runs (``Search.judged_again``).
- The baseline (``role == "baseline"``: the format library's own read, a plain download of a
  bucket: what a user runs who changes nothing) is the one run the answer's gain rests on.
  With ``reserve``, it enters right after the first run, before the budget is spent on
  anything else, and its run is not cut by the leader's pace: only the end of the budget
  (with the evidence overrun) stops it, and never before the clock's cut
  (``cutoff.clock_limit``), where a racing run would have been stopped too.

``docs/how-it-measures.md`` states the same in a paragraph, with the reasons for each parameter.
"""

from __future__ import annotations

from collections.abc import Callable

from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.cutoff import clock_limit
from modelmon.core.measuring.judging import (
    MIN_GAIN,
    MIN_PAIRS,
    Duel,
    apart_unpaired,
    decided,
    settled,
)
from modelmon.core.measuring.noise import FILE_NOISE, Noise, unpaired_noise
from modelmon.core.measuring.race import Race
from modelmon.core.system.storage import StorageFacts

# Between two candidates that cost more than a run of modelmon's or change the machine (a
# peer's run is a process start and its imports; a readahead value), this many of
# modelmon's enter: in a row, those would spend a short budget before modelmon's other ways
# of loading ran.
OWN_PER_PEER = 2


def ruled_out_by(facts: StorageFacts | None, candidate: Candidate) -> str | None:
    """Why the storage (None: object storage) rules ``candidate`` out, or None."""
    if candidate.strategy != "mmap-shared-fd" or facts is None or not facts.remote:
        return None
    kind = "FUSE" if facts.is_fuse else "network"
    workers, threads = candidate.options.workers, candidate.options.threads
    who = f"{workers} workers" + (f" × {threads} threads" if threads > 1 else "")
    return (
        f"ruled out by storage: {who} sharing one descriptor on a {kind} mount "
        f"({facts.fs_type}) serialise on it: measured once, as the failure mode"
    )


def modelmons_best(contenders: list[Candidate]) -> Candidate | None:
    """The first champion: the most robust of modelmon's contenders (fastest first) that are
    under ``MIN_GAIN`` below its fastest. A gain under ``MIN_GAIN`` never takes a duel from a
    more robust configuration, so it does not crown one either: on a disk that sets every
    way's pace, a mapping's luckier entry run would otherwise stand against the peers alone
    (and cost twice the memory for no speed)."""
    own = [c for c in contenders if c.own is not None]
    if not own:
        return None
    near = [c for c in own if c.median_mbps * MIN_GAIN > own[0].median_mbps]
    return min(near, key=lambda c: c.robustness())


def screening_order(own: list[Candidate], others: list[Candidate]) -> list[Candidate]:
    """modelmon's first ``OWN_PER_PEER`` candidates (they set the leader), then ``interleaved``."""
    return own[:OWN_PER_PEER] + interleaved(own[OWN_PER_PEER:], others)


def interleaved(own: list[Candidate], others: list[Candidate]) -> list[Candidate]:
    """One of ``others`` after every ``OWN_PER_PEER`` of ``own`` (those left over at the end)."""
    order: list[Candidate] = []
    for index in range(max(-(-len(own) // OWN_PER_PEER), len(others))):
        start = index * OWN_PER_PEER
        order += own[start : start + OWN_PER_PEER] + others[index : index + 1]
    return order


def entered(candidate: Candidate) -> bool:
    """It has had its run (completed, cut, or failed)."""
    return bool(candidate.wall_seconds) or candidate.ended != "finished"


class Search:
    """One search on one ``Race``: ``queue`` in screening order; ``variants`` makes, of the
    candidates still in the race (fastest first), the readahead values of the best
    configuration: they join the peers in the queue's rhythm once ``2 × OWN_PER_PEER`` of
    modelmon's candidates (the grid's first ways of loading) have entered. ``reserve``: the
    baseline of the queue enters second, whatever the budget (the module's docstring)."""

    usual = FILE_NOISE  # the storage's usual noise: unpaired runs are weighed against no less

    def __init__(
        self,
        race: Race,
        queue: list[Candidate],
        facts: StorageFacts | None,
        variants: Callable[[list[Candidate]], list[Candidate]] | None = None,
        reserve: bool = False,
    ) -> None:
        self.race, self.queue, self.facts, self.variants = race, queue, facts, variants
        self.reserved = next((c for c in queue if c.role == "baseline"), None) if reserve else None
        self.out: list[Candidate] = []  # lost a duel
        self.champion: Candidate | None = None  # won the last settled duel
        self.duel: tuple[Candidate, Candidate] | None = None  # (champion, challenger) in pairs
        self.ratios: list[float] = []  # the open duel's pairs: challenger / champion
        self.last: Duel | None = None  # the last settled duel

    def run(self) -> tuple[Candidate | None, Duel | None]:
        """Race until nothing more fits; (the pick, how it was settled)."""
        while True:
            self.race.check_cancel()
            champion, challenger = self.duellists()
            entry = self.entrant(champion, challenger)
            if entry is not None:
                self.enter(*entry)
                continue
            if champion is None or challenger is None:
                break
            if self.race.left() < self.cost(champion, challenger, 1) or not self.pair(
                champion, challenger
            ):
                break
        return self.finish()

    def contenders(self) -> list[Candidate]:
        """Candidates still in the race, fastest first."""
        alive = [
            c
            for c in self.queue
            if c.results
            and c.ended == "finished"
            and c.role != "failure mode"
            and not any(c is o for o in self.out)
        ]
        return sorted(alive, key=lambda c: c.median_mbps, reverse=True)

    def duellists(self) -> tuple[Candidate | None, Candidate | None]:
        """The champion and its challenger. A changed readahead is a change of the machine:
        it must beat its configuration with the device as it is."""
        if self.duel is not None:
            return self.duel
        contenders = self.contenders()
        champion = next((c for c in contenders if c is self.champion), None) or modelmons_best(
            contenders
        )
        if champion is None:
            return None, None
        others = [c for c in contenders if c is not champion]
        challenger = others[0] if others else None
        own = champion.own
        if own is not None and own.options.readahead is not None:
            base = own.with_options(readahead=None)
            challenger = next((c for c in others if c.config == base), challenger)
        return champion, challenger

    def waiting(self, champion: Candidate | None) -> list[Candidate]:
        """Candidates yet to enter, in order, the variants among them once made."""
        waiting = [c for c in self.queue if not entered(c)]
        own_run = sum(1 for c in self.queue if c.own is not None and entered(c))
        if self.variants is None or champion is None:
            return waiting
        if waiting and own_run < 2 * OWN_PER_PEER:
            return waiting
        extra, self.variants = self.variants(self.contenders()), None
        own = [c for c in waiting if c.own is not None]
        others = [c for c in waiting if c.own is None] + extra
        self.queue[:] = [c for c in self.queue if entered(c)] + interleaved(own, others)
        return [c for c in self.queue if not entered(c)]

    def cost(
        self, a: Candidate, b: Candidate | None, pairs: int, entering: Candidate | None = None
    ) -> float:
        """Seconds for ``pairs`` pairs of ``a`` and ``b``, then the runs that bring either to
        ``EVIDENCE_RUNS`` (either may win), less the evidence overrun. ``entering`` is about
        to have its entry run."""
        both = [c for c in (a, b) if c is not None]
        pace = self.race.pace

        def short(c: Candidate) -> int:
            return max(0, EVIDENCE_RUNS - len(c.results) - (c is entering) - pairs)

        evidence = max(pace(c) * short(c) for c in both)
        overrun = self.race.evidence_overrun_s
        return pairs * sum(pace(c) for c in both) + max(0.0, evidence - overrun)

    def entrant(
        self, champion: Candidate | None, challenger: Candidate | None
    ) -> tuple[Candidate, float, bool] | None:
        """The first waiting candidate whose run fits, with what its run must leave, and
        whether it is the first run of all (which runs whatever it costs: without a completed
        load there is no answer)."""
        waiting = self.waiting(champion)
        if waiting and not any(c.wall_seconds for c in self.queue):
            return waiting[0], 0.0, True
        if self.reserved is not None and any(c is self.reserved for c in waiting):
            return self.reserved, 0.0, False
        for candidate in waiting:
            if champion is None:
                keep = 0.0
            elif challenger is not None:
                keep = self.cost(champion, challenger, MIN_PAIRS)
            elif candidate.role != "failure mode":  # it would be the first challenger
                keep = self.cost(champion, candidate, 1, entering=candidate)
            else:
                keep = self.cost(champion, None, 0)
            if self.race.left() - keep >= self.race.pace(candidate):
                return candidate, keep, False
        return None

    def enter(self, candidate: Candidate, keep_s: float, first: bool) -> None:
        """Its entry run, leaving ``keep_s``; ruled out after it where the storage rules it
        out (measured once, as the failure mode). The reserved baseline runs uncut by the
        leader's pace, to the end of the budget and its evidence overrun, and at least to the
        clock's cut."""
        if candidate is self.reserved and not first:
            leader = self.race.leader
            self.race.progress(
                f"{candidate.spec}: the baseline (what runs when nothing changes), measured in "
                "every search and not cut by the leader: the answer's gain is against it"
            )
            self.race.run(
                candidate,
                race=False,
                over_s=self.race.evidence_overrun_s,
                at_least_s=clock_limit(leader) if leader is not None else 0.0,
            )
        else:
            self.race.run(candidate, first=first, keep_s=keep_s)
        why = ruled_out_by(self.facts, candidate)
        if why is not None:
            candidate.ended, candidate.reason = "ruled out", why

    def pair(self, champion: Candidate, challenger: Candidate) -> bool:
        """One pair, alternating who goes first; False when a run did not complete."""
        self.duel = (champion, challenger)
        first, second = (champion, challenger)[:: 1 if len(self.ratios) % 2 == 0 else -1]
        one = self.race.run(first, race=False)
        if one is None or self.race.left() < self.race.pace(second):
            return False
        two = self.race.run(second, race=False)
        if two is None:
            return False
        own, rival = (one, two) if first is champion else (two, one)
        self.ratios.append(rival.mbps / own.mbps)
        if settled(self.ratios):
            self.settle()
        return True

    def settle(self) -> None:
        """The open duel decided: its loser leaves the race."""
        assert self.duel is not None
        noise = self.noise(*self.duel) if len(self.ratios) < MIN_PAIRS else None
        best, self.last = decided(*self.duel, self.ratios, noise)
        self.out.append(self.last.other)
        self.champion, self.duel, self.ratios = best, None, []

    def finish(self) -> tuple[Candidate | None, Duel | None]:
        if self.duel is not None and self.ratios:
            self.settle()
        champion, challenger = self.duellists()
        duel = self.last
        if duel is None and champion is not None and challenger is not None:
            champion, duel = self.undecided(champion, challenger)
        for candidate in self.queue:
            if not entered(candidate):
                candidate.ended, candidate.reason = "not measured", "not measured: no budget left"
        if champion is not None:
            fill(self.race, champion)
            champion, duel = self.judged_again(champion, duel)
        return champion, duel

    def judged_again(self, pick: Candidate, duel: Duel | None) -> tuple[Candidate, Duel | None]:
        """A duel decided on runs not in pairs, judged again by the same rule on all the runs
        the answer states: it was judged on entry runs (and a pair), and the pick's evidence
        runs came after. This is the one judgement the answer, its why and the ranking say;
        where it no longer holds, the rule's pick replaces the search's."""
        if duel is None or duel.noise is None or not duel.other.results:
            return pick, duel
        if duel.verdict is None:
            return self.undecided(pick, duel.other)
        return decided(pick, duel.other, list(duel.ratios), self.noise(pick, duel.other))

    def noise(self, a: Candidate, b: Candidate) -> Noise:
        """What ``a`` and ``b``'s unpaired runs are weighed against (``unpaired_noise``)."""
        return unpaired_noise(a, b, [c for c in self.queue if c.results], self.usual)

    def undecided(self, champion: Candidate, challenger: Candidate) -> tuple[Candidate, Duel]:
        """No pair fitted the budget: their entry runs pick only when they are apart beyond
        their noise and by ``MIN_GAIN`` (``apart_unpaired``, against ``noise``); otherwise
        the two are within noise, and the more robust is picked (``Candidate.robustness``)."""
        faster, slower = sorted((champion, challenger), key=lambda c: c.median_mbps, reverse=True)
        if slower.median_mbps <= 0:
            return faster, Duel(other=slower)
        noise = self.noise(faster, slower)
        if apart_unpaired(faster, slower, noise):
            return faster, Duel(other=slower, noise=noise)
        pick = min((faster, slower), key=lambda c: c.robustness())
        other = slower if pick is faster else faster
        return pick, Duel(other=other, tie=True, noise=noise)


def fill(race: Race, best: Candidate) -> None:
    """Bring the pick to ``EVIDENCE_RUNS`` runs, past the deadline by the evidence overrun at
    most (a pick on two runs is not a verdict), then spend what is left of the budget on more
    runs of it."""
    over = race.evidence_overrun_s
    while len(best.results) < EVIDENCE_RUNS and race.left() + over >= race.pace(best):
        if race.run(best, race=False, over_s=over) is None:
            break
    while race.left() >= race.pace(best) and race.run(best, race=False) is not None:
        pass
