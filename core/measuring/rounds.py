"""The rounds of the recommendation search, each against the budget: screening (every
candidate once, the failure mode ruled out by the storage facts), the readahead round, the
semifinal, a second screening where the first found no rival, and the finals (the two
leaders in alternating pairs, decided like an A/B).

``recommend`` (``measuring.recommend``) runs them in that order on one ``Race``.
"""

from __future__ import annotations

import dataclasses

from modelmon.core.errors import ReadaheadError
from modelmon.core.measuring.ab import Verdict, judge
from modelmon.core.measuring.candidate import EVIDENCE_RUNS, MIN_PAIRS, WORTH_IT, Candidate
from modelmon.core.measuring.race import Race
from modelmon.core.system import readahead
from modelmon.core.system.storage import StorageFacts

PAIRS = 3  # paired runs of the finalists the budget is planned for: the winner runs ≥ 5 times
SEMIFINALISTS = 4  # leaders of the screening that run once more before the finals are chosen
SCREEN_FIRST = 2  # candidates screened whatever the reserve for the finals (a race needs two)
OWN_PER_PEER = 2  # after the first, modelmon's candidates screened for each peer's one
LATER_SHARE = 0.5  # of the budget left when screening starts, at most this is kept for later
# Device readahead tried for the leading strategy, where modelmon may set it: the kernel's
# default, the common "raise it" advice, and two steps past it.
READAHEAD_KIB = (128, 1024, 4096, 16384)


def ruled_out_by(facts: StorageFacts, candidate: Candidate) -> str | None:
    """Why the storage rules ``candidate`` out, or None."""
    if candidate.strategy != "mmap-shared-fd" or not (facts.is_fuse or facts.is_network):
        return None
    kind = "FUSE" if facts.is_fuse else "network"
    workers, threads = candidate.options.workers, candidate.options.threads
    who = f"{workers} workers" + (f" × {threads} threads" if threads > 1 else "")
    return (
        f"ruled out by storage: {who} sharing one descriptor on a {kind} mount "
        f"({facts.fs_type}) serialise on it: measured once, as the failure mode"
    )


def finals_reserve(race: Race, pool: list[Candidate]) -> float:
    """Budget kept for ``PAIRS`` pairs of the two leaders so far, at their own paces."""
    own, rival = finalists(pool)
    paces = [race.pace(c) for c in (own, rival) if c is not None]
    paces += [race.leader_pace_s] * (2 - len(paces))
    return PAIRS * sum(paces)


def runs_short(race: Race, candidate: Candidate, after: int = 0) -> float:
    """Seconds of the runs ``candidate`` lacks of ``EVIDENCE_RUNS`` (``after`` more given)."""
    return max(0, EVIDENCE_RUNS - len(candidate.results) - after) * race.pace(candidate)


def evidence_reserve(race: Race, pool: list[Candidate]) -> float:
    """Budget for the runs a pick must rest on: either of the two leaders so far may win, so
    each is brought to ``EVIDENCE_RUNS`` runs (one more at least: a pair), at its own pace;
    a finalist not found yet is a candidate after its screening run, at the leader's. Not
    capped like the later rounds' reserve: screening may never spend it (a screening that
    did left the pick on one run)."""
    total = 0.0
    for candidate in finalists(pool):
        if candidate is None:
            total += (EVIDENCE_RUNS - 1) * race.leader_pace_s
        else:
            total += max(race.pace(candidate), runs_short(race, candidate))
    return total


def leaders(pool: list[Candidate], count: int) -> list[Candidate]:
    eligible = [c for c in pool if c.results and c.ended == "finished" and c.role != "failure mode"]
    return sorted(eligible, key=lambda c: c.median_mbps, reverse=True)[:count]


def semis_reserve(race: Race, pool: list[Candidate]) -> float:
    """Budget kept for one more run of each of the ``SEMIFINALISTS`` leaders so far."""
    runs = leaders(pool, SEMIFINALISTS)
    return sum(race.pace(c) for c in runs) + race.leader_pace_s * (SEMIFINALISTS - len(runs))


def semifinal(race: Race, pool: list[Candidate]) -> None:
    """One more run of each leader: finalists chosen on one run each are chosen by the noise
    (on a shared machine a lucky run is 2× the next one), on two they are not as easily."""
    for candidate in leaders(pool, SEMIFINALISTS):
        keep = finals_reserve(race, pool)
        if race.left() - keep < race.pace(candidate):
            break
        race.run(candidate, keep_s=keep)


def screening_order(own: list[Candidate], rivals: list[Candidate]) -> list[Candidate]:
    """modelmon's first candidates, then ``OWN_PER_PEER`` of its others for each peer: a
    peer's run costs a process start and its imports, and four peers in a row once used all
    of the screening a short budget left, so that none of modelmon's other candidates ran.
    One for one, a 120 s search on FUSE screened the failure mode and then Run:ai at half the
    leader's speed, and had no budget left for mmap-view, the fastest way there."""
    rest, order = own[SCREEN_FIRST:], list(own[:SCREEN_FIRST])
    for index in range(max(-(-len(rest) // OWN_PER_PEER), len(rivals))):
        start = index * OWN_PER_PEER
        order += rest[start : start + OWN_PER_PEER] + rivals[index : index + 1]
    return order


def screen(race: Race, order: list[Candidate], facts: StorageFacts, later_runs: int = 0) -> None:
    """Each candidate once, while the budget keeps room for the semifinal, the finals and
    ``later_runs`` more runs at the leader's pace (the readahead round)."""
    screened = 0
    # The later rounds may keep at most this share of what screening starts with: planned
    # at full size (14 runs with the readahead round) they once took the whole of a 45 s
    # budget on a fast disk, and 15 of 17 candidates were never run. They adapt to what is
    # left (fewer pairs, fewer readahead values), a candidate never run cannot.
    cap = LATER_SHARE * race.left()
    for candidate in order:
        reserve = finals_reserve(race, order) + semis_reserve(race, order)
        reserve += later_runs * race.leader_pace_s
        floor = evidence_reserve(race, order)
        keep = max(floor, min(reserve, cap)) if screened >= SCREEN_FIRST else 0.0
        first = race.leader is None and not any(c.wall_seconds for c in order)
        if race.left() - keep < race.pace(candidate) and not first:
            candidate.ended, candidate.reason = "not measured", "not measured: no budget left"
            continue
        screen_one(race, candidate, facts, keep, first=first)  # a slow one stops short of keep
        screened += 1


def screen_one(
    race: Race, candidate: Candidate, facts: StorageFacts, keep_s: float, *, first: bool = False
) -> None:
    """One screening run of ``candidate``, leaving ``keep_s``; ruled out after it where the
    storage facts rule it out (measured once, as the failure mode)."""
    race.run(candidate, first=first, keep_s=keep_s)
    why = ruled_out_by(facts, candidate)
    if why is not None:
        candidate.ended, candidate.reason = "ruled out", why


def rescreen(race: Race, order: list[Candidate], facts: StorageFacts) -> None:
    """After the semifinal, when screening found no rival to the leader: the candidates it
    left unmeasured, in order, with the budget it kept for that rival's runs. Each keeps what
    the leader lacks of ``EVIDENCE_RUNS`` runs or, if it may become the rival (a failure mode
    never does), a pair of the two and the pick's third run, which may overrun the budget by
    ``evidence_overrun_s``. Without it, a search on slow storage (14 s a run on FUSE) that
    screens only the leader and a candidate cut early would spend what it kept for a rival on
    more runs of the lone leader, and answer "only one candidate completed"."""
    leader, rival = finalists(order)
    if leader is None or rival is not None:
        return
    for candidate in order:
        if finalists(order)[1] is not None:
            return  # a rival: the finals decide with what is left
        if candidate.ended != "not measured":
            continue
        keep = runs_short(race, leader)
        if candidate.role != "failure mode":
            pace = race.pace(candidate)
            pair = race.pace(leader) + pace + max(runs_short(race, leader, after=1), pace)
            keep = max(keep, pair - race.evidence_overrun_s)
        if race.left() - keep >= race.pace(candidate):
            screen_one(race, candidate, facts, keep)


def readahead_round(race: Race, pool: list[Candidate], paths: list[str]) -> None:
    """The leading strategy again with each of ``READAHEAD_KIB`` set on the device (not the
    value it has now: the leader ran with that), once each while the budget keeps the
    semifinal's and finals' reserve; they join ``pool`` and go on like any candidate. Only
    where readahead can be set (the caller checks)."""
    own, _ = finalists(pool)
    if own is None or own.strategy == "direct" or own.options.readahead is not None:
        return  # O_DIRECT bypasses readahead
    current = {knob.read_kb() for knob in readahead.knobs_of(paths)}
    for kb in READAHEAD_KIB:
        if current == {kb}:
            continue
        candidate = Candidate(own.strategy, own.options.with_(readahead=kb))
        pool.append(candidate)
        keep = finals_reserve(race, pool) + semis_reserve(race, pool)
        if race.left() - keep < race.pace(candidate):
            candidate.ended, candidate.reason = "not measured", "not measured: no budget left"
            continue
        try:
            race.run(candidate, keep_s=keep)
        except ReadaheadError as exc:  # e.g. another modelmon run started on the device
            candidate.ended, candidate.reason = "failed", f"failed: {exc}"


def finalists(pool: list[Candidate]) -> tuple[Candidate | None, Candidate | None]:
    """The best modelmon candidate and its strongest rival (modelmon or peer)."""
    eligible = [c for c in pool if c.results and c.ended == "finished" and c.role != "failure mode"]
    eligible.sort(key=lambda c: c.median_mbps, reverse=True)
    own = next((c for c in eligible if c.peer is None), None)
    rival = next((c for c in eligible if c is not own), None)
    if own is not None and own.options.readahead is not None:
        # A changed readahead is a change of the machine: it must beat the same configuration
        # with the device as it is, in pairs, or the device is left alone (within noise, the
        # more robust one wins). Screening medians alone once recommended 16 MiB at 1282 MB/s
        # against 1287 with the device's own value.
        base = own.options.with_(readahead=None)
        rival = next(
            (
                c
                for c in eligible
                if c.peer is None and c.strategy == own.strategy and c.options == base
            ),
            rival,
        )
    return own, rival


def finals(race: Race, a: Candidate, b: Candidate) -> list[float]:
    """A and B alternately, cold, until another pair would overrun the budget or leave too
    little to bring the pick (either) to ``EVIDENCE_RUNS`` runs after it; B/A ratios."""
    ratios: list[float] = []
    while race.left() >= race.pace(a) + race.pace(b) + (top_up(race, a, b) if ratios else 0):
        first, second = (a, b) if len(ratios) % 2 == 0 else (b, a)  # alternate who starts
        one = race.run(first, race=False)
        if one is None or race.left() < race.pace(second):
            break
        two = race.run(second, race=False)
        if two is None:
            break
        ra, rb = (one, two) if first is a else (two, one)
        ratios.append(rb.mbps / ra.mbps)
    return ratios


def top_up(race: Race, a: Candidate, b: Candidate) -> float:
    """Seconds that bring whichever of ``a`` and ``b`` wins to ``EVIDENCE_RUNS`` runs after
    one more pair."""
    return max(runs_short(race, a, after=1), runs_short(race, b, after=1))


def decide(
    own: Candidate, rival: Candidate, ratios: list[float]
) -> tuple[Candidate, Candidate, Verdict, bool]:
    """From the finals' rival/own ratios: (pick, the other, its verdict vs the pick, tie).

    Judged as an A/B (``ab.judge``: every pair agrees and the gain is beyond the noise);
    within noise the more robust one (``Candidate.robustness``) is picked. With fewer than
    ``MIN_PAIRS`` pairs, all runs of both decide when they are far apart
    (``Candidate.clearly_beats``), else it is a tie. A gain under ``WORTH_IT`` is a tie too.
    """
    verdict = judge(ratios)
    if len(ratios) >= MIN_PAIRS:
        small = 1 / WORTH_IT < verdict.median_ratio < WORTH_IT
        tie = verdict.text == "within noise" or small
        rival_wins = rival.robustness() < own.robustness() if tie else verdict.text == "B faster"
    else:  # one pair estimates no noise: every run of both decides, if they are far apart
        tie = not (rival.clearly_beats(own) or own.clearly_beats(rival))
        rival_wins = rival.robustness() < own.robustness() if tie else rival.clearly_beats(own)
    if rival_wins:
        best, other, ratios = rival, own, [1 / r for r in ratios]
    else:
        best, other = own, rival
    verdict = judge(ratios)  # other / best: "A faster" = the pick is faster
    if tie:  # one pair "faster" by its own ratio is not beyond a noise it cannot estimate
        verdict = dataclasses.replace(verdict, text="within noise")
    return best, other, verdict, tie


def settle(
    race: Race, own: Candidate, rival: Candidate | None
) -> tuple[Candidate, Candidate | None, Verdict | None, bool, int]:
    """The finals: (pick, the other finalist, its paired verdict vs the pick, within noise,
    pairs run). The pick may be a peer; ``own`` stays the config's."""
    if rival is None:
        fill(race, own)
        return own, None, None, False, 0
    ratios = finals(race, own, rival)  # rival / own
    if not ratios:  # no pair fitted the budget: the screening medians decide, undecided
        best, other = sorted((own, rival), key=lambda c: c.median_mbps, reverse=True)
        fill(race, best)
        return best, other, None, False, 0
    best, other, verdict, tie = decide(own, rival, ratios)
    other.verdict = verdict
    fill(race, best)
    return best, other, verdict, tie, len(ratios)


def fill(race: Race, best: Candidate) -> None:
    """Bring the pick to ``EVIDENCE_RUNS`` runs, past the deadline by ``evidence_overrun_s``
    at most (a leader that changed in the last pairs may lack them, and a pick on two runs
    is not a verdict), then spend what is left of the budget, too little for a pair, on
    more runs of it."""
    over = race.evidence_overrun_s
    while len(best.results) < EVIDENCE_RUNS and race.left() + over >= race.pace(best):
        if race.run(best, race=False, over_s=over) is None:
            break
    while race.left() >= race.pace(best) and race.run(best, race=False) is not None:
        pass
