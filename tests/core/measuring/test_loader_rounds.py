"""How many rounds the user's loader gets: three runs of each finalist while the budget's
overrun holds them (fewer, said, where it does not), and on, to nine at most, while a
finalist's median is not known finely enough and the budget holds another round, so that the
figure recommend reports holds when the user runs the loader again. The runs here are
scripted (the round logic is what is tested; real engine runs are
tests/modelmon/cli/test_recommend_loader.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import cast

import pytest

from modelmon.core.limits import EVIDENCE_RUNS, LOADER_MAX_ROUNDS, LOADER_MEDIAN_ERROR
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.advice import clearly_gains, recommendable
from modelmon.core.measuring.candidate import Candidate, median_error
from modelmon.core.measuring.loader_rounds import Entry, LoaderRounds, median_known
from modelmon.core.model.records import Model

from .records import candidate, run


class ScriptedRounds(LoaderRounds):
    """Rounds whose runs return the next rate scripted for each entry and take a second of
    the budget each (its deadline comes a second nearer: no clock is waited on)."""

    def __init__(
        self, rates: dict[str, list[float]], budget_left_s: float = -1.0, overrun_s: float = 60.0
    ) -> None:
        # Default: the budget is spent and its overrun holds the evidence, so only the
        # evidence rules run.
        deadline = time.monotonic() + budget_left_s
        self.said: list[str] = []
        super().__init__(
            cast(Model, None), "model", deadline, self.said.append, None, overrun_s=overrun_s
        )
        self.left_rates: dict[str, Iterator[float]] = {k: iter(v) for k, v in rates.items()}

    def run(self, entry: Entry, leader_s: float | None = None) -> LoadResult:
        result = run(next(self.left_rates[entry.candidate.strategy]))
        entry.candidate.results.append(result)
        entry.by_round[self.round] = result
        entry.candidate.ended = "finished"
        self.walls.setdefault(entry.spec, []).append(1.0)
        self.deadline -= 1.0
        return result


def entry(name: str) -> Entry:
    return Entry(Candidate.of(name, candidate(name).options))


def screened(
    rates: dict[str, list[float]], budget_left_s: float = -1.0, overrun_s: float = 60.0
) -> tuple[ScriptedRounds, list[Entry]]:
    rounds = ScriptedRounds(rates, budget_left_s, overrun_s)
    entries = [entry(name) for name in rates]
    for each in entries:
        rounds.run(each)
    return rounds, entries


def test_runs_that_agree_stop_at_the_evidence_when_the_budget_is_spent() -> None:
    rounds, entries = screened(
        {"as_is": [163, 165, 160, 150, 150], "modelmon": [176, 170, 172, 150, 150]}
    )
    assert rounds.settle(entries) == EVIDENCE_RUNS
    assert [len(e.candidate.results) for e in entries] == [EVIDENCE_RUNS] * 2


@pytest.mark.parametrize(
    ("left_s", "held", "room", "more"),
    [(-2.5, 1, "0", "4"), (0.5, 2, "0", "2"), (1.5, 2, "1", "1"), (2.5, 3, "", "")],
)
def test_the_evidence_ends_within_the_budgets_overrun_and_says_what_it_held(
    left_s: float, held: int, room: str, more: str
) -> None:
    """Two finalists, a second a run: a round of them takes 2 s, and the overrun is 2 s
    (``left_s``: what round 1 left of the budget). A round that would end past the overrun
    is not run, and the rounds say how many runs of each the budget held and how much more
    would hold the evidence."""
    rates = {"as_is": [163.0] * 9, "modelmon": [176.0] * 9}
    rounds, entries = screened(rates, budget_left_s=left_s + 2.0, overrun_s=2.0)
    assert rounds.settle(entries) == held
    assert [len(e.candidate.results) for e in entries] == [held] * 2
    if not more:
        assert rounds.unsettled == ""
        return
    assert rounds.unsettled == (
        f"the budget held {held} cold run{'s' if held != 1 else ''} of each finalist, not "
        f"{EVIDENCE_RUNS}: a round of them takes about 2 s, and {room} s were left with the "
        f"2 s a round may end past it; about {more} s more of budget would hold them"
    )


def test_one_slow_run_of_three_is_outvoted_by_the_rounds_the_budget_holds() -> None:
    # One slow run of three (a VM's disk): while the budget holds another round the rounds
    # go on, each saying why while the median is known less finely than LOADER_MEDIAN_ERROR.
    as_is = [163, 136, 170, 168, 166, 165, 167, 164, 166]
    rates = {"as_is": as_is, "modelmon": [176, 170, 172] + [174] * 6}
    rounds, entries = screened(rates, budget_left_s=600.0)
    assert rounds.settle(entries) == LOADER_MAX_ROUNDS
    assert entries[0].candidate.median_mbps == pytest.approx(166)  # the slow run outvoted
    assert median_error(as_is) <= LOADER_MEDIAN_ERROR and not rounds.unsettled
    assert rounds.said[0].startswith("as_is threads=1: its median is known to ±")
    assert rounds.said[0].endswith(f"more rounds until ±3% ({LOADER_MAX_ROUNDS} at most)")


def test_a_median_the_budget_leaves_unsettled_stops_at_the_evidence_and_says_so() -> None:
    """The budget bounds the rounds past the evidence: none runs once it is spent, and the
    advice says which median is known less finely than wanted."""
    as_is = [163, 136, 170, 168, 166, 165, 167, 164, 166]
    rounds, entries = screened({"as_is": as_is, "modelmon": [176, 170, 172] + [174] * 6})
    assert rounds.settle(entries) == EVIDENCE_RUNS
    assert rounds.unsettled.startswith("as_is threads=1: its median is known to ±")
    assert rounds.unsettled.endswith("not ±3%: a longer budget would settle it")


def test_runs_that_never_agree_stop_at_the_most_rounds() -> None:
    """A mapped load on a FUSE mount varies ±10 %: past LOADER_MAX_ROUNDS more runs are
    not worth their time."""
    wild = [650.0, 900.0, 700.0, 880.0] * 3
    rounds, entries = screened({"as_is": wild, "modelmon": [760.0] * 12}, budget_left_s=600.0)
    assert rounds.settle(entries) == LOADER_MAX_ROUNDS
    assert len(entries[0].candidate.results) == LOADER_MAX_ROUNDS
    assert entries[0].candidate.median_error > LOADER_MEDIAN_ERROR


@pytest.mark.parametrize(
    ("rates", "known"),
    [
        ([], True),  # nothing ran: nothing more to learn
        ([163.0], False),  # one run tells no noise
        ([163.0, 163.0, 163.0], True),
        ([160.0, 165.0, 170.0], True),  # standard error 1.9 %
        ([163.0, 136.0, 174.0], False),  # 7.4 %
    ],
)
def test_a_median_is_known_within_a_share_of_itself(rates: list[float], known: bool) -> None:
    assert median_known(candidate("x", *rates)) is known


def test_median_error_is_the_standard_error_of_a_median() -> None:
    # 1.2533 × stdev / √n over the median: runs of 90 and 110 (stdev 14.1) over 100.
    assert median_error([90.0, 110.0]) == pytest.approx(1.2533 * 14.142 / 2**0.5 / 100, rel=1e-3)
    assert median_error([100.0]) == float("inf")


def ran(target: Entry, number: int, result: LoadResult) -> None:
    """``result`` as round ``number``'s run of ``target``, recorded as the rounds record it."""
    target.candidate.results.append(result)
    target.by_round[number] = result


def paired(gains: list[float], timed_every_s: float = 0.0, size: int = 10**9) -> Entry:
    """A change measured against its baseline in ``len(gains)`` rounds, its verdict judged;
    ``timed_every_s``: both are programs, timed to the watch's samples."""
    baseline, change = entry("as_is"), entry("change")
    change.baseline = baseline
    for number, gain in enumerate(gains):
        # timed as a watched program is: to its samples
        ran(baseline, number, replace(run(100.0, size), timed_every_s=timed_every_s))
        ran(change, number, replace(run(100.0 * gain, size), timed_every_s=timed_every_s))
    change.candidate.verdict = change.verdict()
    return change


def test_a_change_is_recommended_on_every_round_its_baseline_completed() -> None:
    notes: list[str] = []
    leader = paired([10.0] * EVIDENCE_RUNS)
    assert recommendable(leader, notes) is leader.candidate and notes == []
    # Its other runs failed (O_DIRECT that nothing could time): a gain in the one pair it
    # completed says nothing of the rounds it did not.
    failed = paired([107.0])
    assert failed.baseline is not None
    ran(failed.baseline, 1, run(100.0))
    ran(failed.baseline, 2, run(100.0))
    assert recommendable(failed, notes) is None
    assert len(notes) == 1 and "in 1 paired round and did not complete the others" in notes[0]
    # The budget held two rounds: the change is picked on them, as modelmon's best would be
    # (the answer says it is not certain).
    two = paired([10.0, 10.0])
    assert recommendable(two, notes) is two.candidate and len(notes) == 1
    # Slower, or not by enough: nothing to recommend, nothing to say.
    assert recommendable(paired([0.5] * EVIDENCE_RUNS), notes) is None
    assert recommendable(paired([1.01] * EVIDENCE_RUNS), notes) is None
    assert recommendable(None, notes) is None and len(notes) == 1


def test_one_rule_picks_a_change_and_modelmons_best() -> None:
    """The walk's short budget: one round held the loader, a change 2.56× it, and modelmon's
    best 1.18× it. The rule that picks modelmon's best on that one pair picks the change on
    its own; neither is held to more pairs than the other."""
    change, best = paired([2.56]), paired([1.18])
    assert best.baseline is not None
    assert clearly_gains(best.candidate, best.baseline.candidate)
    assert recommendable(change, []) is change.candidate
    # A pair under MIN_GAIN, or one the pairs' timing cannot tell apart, acts for neither.
    small = paired([1.02])
    assert small.baseline is not None and recommendable(small, []) is None
    assert not clearly_gains(small.candidate, small.baseline.candidate)


def test_a_change_is_recommended_only_past_what_its_runs_timing_tells_apart() -> None:
    """Two programs' 2-second loads, sampled every 0.1 s, are each known to a sample: a 6 %
    gain in every pair is one sample of twenty, and not a change to make."""
    notes: list[str] = []
    short = paired([1.06] * EVIDENCE_RUNS, timed_every_s=0.1, size=200 * 10**6)
    assert recommendable(short, notes) is None
    assert len(notes) == 1 and "within what the watch times on loads this short" in notes[0]
    assert "(1.9 s, sampled every 0.1 s: ±10% on a ratio)" in notes[0], notes[0]
    # Its verdict, as the ranking shows it, says the same: within noise.
    assert short.candidate.verdict is not None and short.candidate.verdict.text == "within noise"
    # The same gain on loads twenty times longer is past the samples' reach.
    long = paired([1.06] * EVIDENCE_RUNS, timed_every_s=0.1, size=4 * 10**9)
    assert recommendable(long, notes) is long.candidate and len(notes) == 1
    # A strategy times itself: no samples to round to.
    assert recommendable(paired([1.06] * EVIDENCE_RUNS, size=200 * 10**6), notes) is not None
