"""The search's stopping rule, on a race without a clock: every run costs one unit of budget
and its rate is scripted, so the noise of the runs is known. A duel stops when the gap
exceeds BEYOND_NOISE × the pairs' noise (or the two are equal within it), goes on otherwise,
and never plans past the budget."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

from modelmon.core.limits import EVIDENCE_RUNS
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ab import BEYOND_NOISE
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_PAIRS, settled
from modelmon.core.measuring.search import Search
from modelmon.core.options import LoadOptions
from modelmon.core.system.storage import StorageFacts, storage_facts

from .records import run as load_result

Rate = Callable[[Candidate, int], float]  # (candidate, the race's run number) -> MB/s


class UnitRace:
    """What the search asks of a race, without time: ``budget`` runs, one unit each."""

    def __init__(self, budget: int, rate: Rate, overrun: int = 0) -> None:
        self.budget, self.rate, self.spent = budget, rate, 0
        self.evidence_overrun_s = float(overrun)
        self.log: list[Candidate] = []

    def left(self) -> float:
        return float(self.budget - self.spent)

    def pace(self, candidate: Candidate) -> float:
        return 1.0

    def check_cancel(self) -> None:
        pass

    def run(self, candidate: Candidate, *, over_s: float = 0.0, **_: object) -> LoadResult:
        self.spent += 1
        self.log.append(candidate)
        done = load_result(self.rate(candidate, self.spent))
        candidate.results.append(done)
        candidate.wall_seconds.append(1.0)
        return done


def own(workers: int) -> Candidate:
    return Candidate.of("sequential", LoadOptions(workers=workers, threads=1))


def noisy(base: dict[int, float], noise: float) -> Rate:
    """Each candidate (by its workers) at its base rate, every run off it by ``noise``, down
    and up in turn: the two runs of a pair are off in opposite ways, so the pairs' ratios
    spread by about twice ``noise`` around the ratio of the bases."""

    def rate(candidate: Candidate, number: int) -> float:
        return base[candidate.options.workers] * (1 + noise if number % 2 else 1 - noise)

    return rate


@pytest.fixture
def facts(tmp_path: Path) -> StorageFacts:
    return storage_facts(tmp_path)


def pairs_of(race: UnitRace, a: Candidate, b: Candidate) -> int:
    """Pairs the race ran of ``a`` and ``b``: adjacent runs of the two after both entered."""
    log = race.log[2:]
    return sum(
        1 for x, y in zip(log[::2], log[1::2], strict=False) if {id(x), id(y)} == {id(a), id(b)}
    )


def test_the_rule_needs_two_pairs_and_a_gap_beyond_twice_their_spread() -> None:
    gap, noise = math.log(1.2), 0.02
    assert BEYOND_NOISE * noise < gap
    apart = [math.exp(gap + noise), math.exp(gap - noise)]
    assert not settled(apart[:1])  # one pair has no spread
    assert settled(apart)
    # The same gap inside twice the spread, or pairs that disagree: not settled.
    wide = [math.exp(gap + gap / 1.5), math.exp(gap - gap / 1.5)]
    assert not settled(wide)
    assert not settled([1.25, 0.98, 1.3])
    # Equal within noise so tight that no gap worth MIN_GAIN hides in it: settled too.
    assert settled([1.004, 0.996])
    assert not settled([1.03, 0.97])  # 3 % of noise could hide a gain of MIN_GAIN


def test_a_duel_stops_when_the_gap_exceeds_the_noise(facts: StorageFacts) -> None:
    slow, fast = own(1), own(2)
    race = UnitRace(20, noisy({1: 1000.0, 2: 1300.0}, noise=0.02))
    best, duel = Search(race, [slow, fast], facts).run()  # type: ignore[arg-type]
    assert best is fast and duel is not None and duel.other is slow
    assert duel.pairs == MIN_PAIRS and not duel.tie and duel.verdict is not None
    assert duel.verdict.text == "A faster"  # the pick is A of the verdict: other / pick
    # Settled after two pairs: the rest of the budget went to the pick, not to more pairs.
    assert pairs_of(race, slow, fast) == MIN_PAIRS
    assert len(slow.results) == 1 + MIN_PAIRS and race.spent == race.budget


def test_a_duel_within_the_noise_goes_on_to_the_end_of_the_budget(facts: StorageFacts) -> None:
    a, b = own(1), own(2)
    race = UnitRace(14, noisy({1: 1000.0, 2: 1030.0}, noise=0.05))
    best, duel = Search(race, [a, b], facts).run()  # type: ignore[arg-type]
    assert duel is not None and duel.tie  # 3 % apart under 5 % of noise: not told apart
    assert duel.pairs == (14 - 2) // 2  # every unit after the entries went to pairs
    assert best is a  # one worker: the more robust of two that cannot be told apart
    assert race.spent == race.budget


def test_equals_within_tight_noise_stop_early_and_keep_the_more_robust(
    facts: StorageFacts,
) -> None:
    a, b = own(1), own(2)
    race = UnitRace(20, noisy({1: 1000.0, 2: 1000.0}, noise=0.002))
    best, duel = Search(race, [b, a], facts).run()  # type: ignore[arg-type]
    assert duel is not None and duel.tie and duel.pairs == MIN_PAIRS
    assert best is a and len(a.results) == race.budget - 1 - MIN_PAIRS  # the spare runs


def test_after_a_settled_duel_the_next_challenger_steps_up(facts: StorageFacts) -> None:
    """Three candidates, a budget for more than one duel: the champion beats the closest
    challenger, then the next; the pick is settled by the last duel."""
    one, two, four = own(1), own(2), own(4)
    race = UnitRace(30, noisy({1: 1000.0, 2: 1250.0, 4: 1600.0}, noise=0.01))
    best, duel = Search(race, [two, one, four], facts).run()  # type: ignore[arg-type]
    assert best is four and duel is not None and duel.other is one
    assert two.verdict is not None and two.verdict.text == "A faster"  # it lost its duel
    assert race.log[:3] == [two, one, four]  # the entries, then the duels
    duels = race.log[3 : 3 + 4 * MIN_PAIRS]
    assert {id(c) for c in duels[: 2 * MIN_PAIRS]} == {id(four), id(two)}
    assert {id(c) for c in duels[2 * MIN_PAIRS :]} == {id(four), id(one)}


def test_no_run_is_planned_past_the_budget_and_the_pick_has_its_evidence(
    facts: StorageFacts,
) -> None:
    for budget in range(2, 16):
        grid = [own(w) for w in (1, 2, 3, 4, 5, 6)]
        race = UnitRace(budget, noisy({w: 1000.0 + 40 * w for w in range(1, 7)}, 0.05))
        best, duel = Search(race, grid, facts).run()  # type: ignore[arg-type]
        assert race.spent <= budget, budget
        assert best is not None
        if budget >= 2 + 2 * MIN_PAIRS:  # two entries and a duel fit
            assert duel is not None and duel.pairs >= 1, budget
            assert len(best.results) >= EVIDENCE_RUNS, budget
        entered = [c for c in grid if c.results]
        assert all(c.ended == "not measured" for c in grid if not c.results)
        # The second entry must leave a pair and the runs the pick then lacks (3 units).
        assert len(entered) >= 2 or budget < 5


def test_the_pick_may_overrun_the_budget_for_its_evidence_only(facts: StorageFacts) -> None:
    """With an overrun of one run, a budget of five still gives the pick three runs: two
    entries, a pair, and its third run past the budget."""
    a, b = own(1), own(2)
    race = UnitRace(4, noisy({1: 1000.0, 2: 1100.0}, noise=0.01), overrun=1)
    best, duel = Search(race, [a, b], facts).run()  # type: ignore[arg-type]
    assert duel is not None and duel.pairs == 1
    assert best is not None and len(best.results) == EVIDENCE_RUNS
    assert race.spent == race.budget + 1


def test_readahead_values_join_the_peers_rhythm_after_the_first_ways_of_loading(
    facts: StorageFacts,
) -> None:
    grid = [own(w) for w in range(1, 9)]
    made: list[list[Candidate]] = []

    def variants(contenders: list[Candidate]) -> list[Candidate]:
        best = contenders[0]
        made.append(contenders)
        return [
            Candidate.of(best.strategy, best.options.with_(readahead=kb)) for kb in (1024, 4096)
        ]

    race = UnitRace(60, noisy({w: 1000.0 + 10 * w for w in range(1, 9)}, 0.05))
    Search(race, grid, facts, variants).run()  # type: ignore[arg-type]
    entries = [c for i, c in enumerate(race.log) if c not in race.log[:i]]
    shapes = [(c.options.workers, c.options.readahead) for c in entries]
    assert shapes[:4] == [(1, None), (2, None), (3, None), (4, None)]  # the first ways of loading
    assert len(made) == 1 and len(made[0]) == 4  # made once, of the four that had run
    best = made[0][0].options.workers
    assert shapes[4:] == [(5, None), (6, None), (best, 1024), (7, None), (8, None), (best, 4096)]


def test_a_mapping_under_min_gain_ahead_does_not_stand_for_modelmon(facts: StorageFacts) -> None:
    """On a disk that sets every way's pace, the library's mapping (peak memory twice the
    model's) entering 2 % ahead of planned reads is not modelmon's champion: the planned reads
    are, and they keep the pick against a peer within noise."""
    from modelmon.core.configuration import parse_engine

    mapping = Candidate.of("library", LoadOptions(threads=1))
    planned = own(4)
    peer = Candidate(parse_engine("runai"), role="peer")
    base = {id(mapping): 160.0, id(planned): 157.0, id(peer): 158.0}

    def rate(candidate: Candidate, number: int) -> float:
        return base[id(candidate)] * (1.002 if number % 2 else 0.998)

    race = UnitRace(3 + 2 * MIN_PAIRS, rate)  # the three entries and one duel
    best, duel = Search(race, [mapping, planned, peer], facts).run()  # type: ignore[arg-type]
    assert best is planned and duel is not None and duel.tie and duel.other is mapping


def test_a_decision_on_runs_not_in_pairs_is_judged_again_on_the_evidence(
    facts: StorageFacts,
) -> None:
    """Walk 13: the answer weighed the pick against the other finalist on all their runs
    (±15 %) and its why the noise the search weighed before the pick's evidence runs
    (±13 %). The search now judges the duel again once the pick has its evidence, by the
    same rule: here two workers led one by 1.29× on their entry runs and one pair, apart
    beyond twice a file read's usual noise; their evidence run of 900 MB/s widens their
    spread to ±14 %, and 1.24× is within twice that, so the more robust one worker is
    picked, and the duel records the noise and tie every sentence says."""
    from modelmon.core.measuring.noise import THEIRS

    one, two = own(1), own(2)
    # The race's runs in order: both entries, one pair (two first), two's evidence run.
    script = {1: 900.0, 2: 1400.0, 3: 1300.0, 4: 1200.0, 5: 900.0}
    race = UnitRace(5, lambda _, number: script[number])
    best, duel = Search(race, [one, two], facts).run()  # type: ignore[arg-type]
    assert race.log == [one, two, two, one, two]
    assert [r.mbps for r in two.results] == pytest.approx([1400.0, 1300.0, 900.0], rel=1e-3)
    assert duel is not None and duel.pairs == 1 and duel.noise is not None
    assert duel.noise.of == THEIRS and round(math.expm1(duel.noise.log), 2) == 0.14
    assert duel.tie and best is one and duel.other is two
    assert duel.verdict is not None and duel.verdict.text == "within noise"
    assert duel.ratios == pytest.approx((1300.0 / 1200.0,), rel=1e-3)  # other / pick
    assert two.verdict is duel.verdict and one.verdict is None
