"""A configuration ranked above the pick says why it is not the pick, from what the search
recorded of it (its runs, its pairs, the finals, the rule for runs not in pairs), in the
config file's [[alternatives]] and the app's ranking alike."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

from modelmon.core.configuration import parse_engine
from modelmon.core.measuring import judge
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import Duel, decide
from modelmon.core.measuring.noise import BUCKET_NOISE, unpaired_noise
from modelmon.core.model.formats import open_model
from modelmon.core.output.config import recommendation_document
from modelmon.core.output.not_picked import why_not_picked
from modelmon.core.output.told import as_told
from modelmon.core.system.cache import NO_LOCAL_CACHE
from modelmon.gui.state.recommendation_view import ranking_rows

from ...object_store import BUCKET
from ..measuring.records import candidate
from .test_explain import record

# With the gain twice that noise allows (1.22² = 1.49), said as the note says its own gain
# ("8% above"): a new user's walk read "twice ±30%" as ±60%.
NOISE = "within twice a bucket's usual ±22% run-to-run noise (up to 49%)"


def streamed(strategy: str, *rates: float, **options: Any) -> Candidate:
    """A bucket's candidate: its runs had no page cache to be cold in."""
    made = candidate(strategy, *rates, **options)
    made.results[:] = [
        dataclasses.replace(r, cache=dataclasses.replace(r.cache, method=NO_LOCAL_CACHE))
        for r in made.results
    ]
    return made


def alternatives(rec: Any) -> dict[str, dict[str, Any]]:
    document = recommendation_document(rec, "m.toml")
    return {row["spec"]: row for row in document["alternatives"]}


def test_a_setting_screened_once_above_the_kept_download_says_it_was_not_raced(
    moto_s3: SimpleNamespace,
) -> None:
    """A new user's walk on a loopback bucket, run 1: the answer kept the plain download
    (1,298 MB/s), raced in pairs with 8 connections of 64 MiB (1,288 MB/s); [[alternatives]]
    ranked 8 connections of 256 MiB at 1,401.5 MB/s on 1 run above it, with no note."""
    model = open_model(f"s3://{BUCKET}/llama/")
    plain = streamed("ranged", 1290, 1298.4, 1310, 1285, 1302, threads=1, chunk=1 << 30)
    plain.role = "baseline"
    raced = streamed("ranged", 1280, 1288, 1295, 1270, threads=8, chunk=64 << 20)
    best, other, verdict, tie = decide(raced, plain, [0.99, 1.0, 0.985])
    assert best is plain and other is raced and tie
    raced.verdict = verdict
    once = streamed("ranged", 1401.5, threads=8, chunk=256 << 20)
    rec = record(
        model,
        winner=plain,
        ranked=(once, plain, raced),
        duel=Duel(other=raced, verdict=verdict, tie=tie, pairs=3),
    )
    rows = alternatives(rec)
    assert rows[once.spec]["note"] == (
        f"1 run, 8% above the pick's median, {NOISE}; screened once, the budget ended "
        "before it was raced"
    ), rows
    assert "note" not in rows[raced.spec]  # below the pick: nothing to explain
    # The app's ranking says the same of the row.
    [row] = [r for r in ranking_rows(rec) if r.cells[1] == once.spec]
    assert row.cells[-1].startswith(f"not picked: {rows[once.spec]['note']}; finished"), row
    # The pick's row speaks of the duel only where its other finalist is among those above.
    (first,) = [r for r in ranking_rows(rec) if r.cells[1] == plain.spec]
    assert first.cells[-1].startswith(
        "the pick: each row with a higher median says why it is not the pick;"
    ), first


def test_settings_screened_once_above_the_searchs_pick_say_so(moto_s3: SimpleNamespace) -> None:
    """The same walk, run 2: 8 connections streamed (1,360.1 MB/s) and 4 connections
    (1,353.8 MB/s), 1 run each, above the search's pick at 1,274 MB/s on 5 runs."""
    model = open_model(f"s3://{BUCKET}/llama/")
    pick = streamed("ranged", 1250, 1274, 1290, 1262, 1301, threads=8, chunk=64 << 20)
    plain = streamed("ranged", 1180, 1201, 1190, threads=1, chunk=1 << 30)
    plain.role = "baseline"
    plain.verdict = judge([0.94, 0.95, 0.93])
    stream = streamed("ranged-stream", 1360.1, threads=8, chunk=64 << 20)
    four = streamed("ranged", 1353.8, threads=4, chunk=64 << 20)
    rec = record(
        model,
        winner=pick,
        ranked=(stream, four, pick, plain),
        duel=Duel(other=plain, verdict=plain.verdict, pairs=3),
    )
    rows = alternatives(rec)
    assert rows[stream.spec]["note"].startswith(f"1 run, 7% above the pick's median, {NOISE};")
    assert rows[four.spec]["note"].startswith(f"1 run, 6% above the pick's median, {NOISE};")
    assert rows[plain.spec]["note"] == "baseline"


@pytest.fixture
def bucket(moto_s3: SimpleNamespace) -> Any:
    return open_model(f"s3://{BUCKET}/llama/")


def test_a_finalist_above_the_pick_says_its_pairs_did_not_separate_them(bucket: Any) -> None:
    simple = streamed("ranged", 1000, 990, 1010, 1005, threads=4, chunk=64 << 20)
    wide = streamed("ranged", 1030, 1040, 1020, 1035, threads=16, chunk=64 << 20)
    best, other, verdict, tie = decide(wide, simple, [0.97, 0.99, 0.96])
    assert best is simple and other is wide and tie
    wide.verdict = verdict
    rec = record(
        bucket,
        winner=simple,
        ranked=(wide, simple),
        duel=Duel(other=wide, verdict=verdict, tie=tie, pairs=3),
    )
    assert why_not_picked(rec, wide) == (
        "4 runs, 3% above the pick's median, raced in 3 alternating pairs: 1.03× by the "
        "median pair, under 5% apart, so the pick, the simpler, stands"
    )


def test_a_finalist_weighed_on_its_runs_says_the_noise_it_was_weighed_against(bucket: Any) -> None:
    few = streamed("ranged", 806, threads=4, chunk=16 << 20)
    fast = streamed("ranged", 981, threads=16, chunk=16 << 20)
    rec = record(
        bucket,
        winner=few,
        ranked=(fast, few),
        duel=Duel(other=fast, tie=True, noise=BUCKET_NOISE),
    )
    assert why_not_picked(rec, fast) == (
        "1 run, 22% above the pick's median, weighed on their runs (not in pairs) within "
        "twice a bucket's usual ±22% run-to-run noise (up to 49%): no configuration here ran "
        "twice, so the pick, the simpler, stands"
    )


def test_the_searchs_pick_the_answer_kept_out_says_why(bucket: Any) -> None:
    """The answer keeps the plain download over the search's pick within a bucket's noise:
    the search's pick, ranked above it, says so."""
    searched = streamed("ranged", 737, 642, 918, 700, threads=16, chunk=64 << 20)
    plain = streamed("ranged", 650, threads=1, chunk=1 << 30)
    plain.role = "baseline"
    rec = as_told(
        record(
            bucket,
            winner=searched,
            ranked=(searched, plain),
            duel=Duel(
                other=plain, tie=True, noise=unpaired_noise(searched, plain, [], BUCKET_NOISE)
            ),
        )
    )
    assert rec.duel is not None and rec.duel.kept and rec.winner.spec == plain.spec
    [told] = [c for c in rec.ranked if c.spec == searched.spec]
    assert why_not_picked(rec, told) == (
        f"4 runs, 11% above the pick's median, the search's pick, weighed against what you "
        f"run now: {NOISE}, so what you run now is kept"
    )
    assert alternatives(rec)[searched.spec]["note"] == why_not_picked(rec, told)


def test_a_duel_lost_before_the_finals_says_so(bucket: Any) -> None:
    pick = streamed("ranged", 1000, 990, 1010, threads=4, chunk=64 << 20)
    lost = streamed("ranged", 1020, 1030, 1010, threads=32, chunk=64 << 20)
    lost.verdict = judge([1.01, 1.02, 0.99])
    lost.verdict = dataclasses.replace(lost.verdict, text="within noise")
    last = streamed("ranged", 900, 910, 905, threads=8, chunk=64 << 20)
    rec = record(bucket, winner=pick, ranked=(lost, pick, last), duel=Duel(other=last, pairs=3))
    assert why_not_picked(rec, lost) == (
        "3 runs, 2% above the pick's median, it lost a duel of 3 alternating pairs: 1.01× by "
        "the median pair, within noise of a simpler one"
    )
    assert why_not_picked(rec, last) == ""  # below the pick


def test_the_failure_mode_above_the_pick_says_it_never_contends(bucket: Any) -> None:
    pick = streamed("ranged", 1000, 990, 1010, threads=4, chunk=64 << 20)
    shared = candidate("mmap-shared-fd", 1200, workers=4, role="failure mode")
    rec = record(bucket, winner=pick, ranked=(shared, pick))
    assert why_not_picked(rec, shared) == (
        "1 cold run, 20% above the pick's median, measured as the failure mode, never a contender"
    )


def test_a_file_whose_pick_is_another_loader_names_modelmons_best(bucket: Any) -> None:
    """Another loader picked: the file's rank 1 is modelmon's best, and a row above it says
    so, not "the pick"."""
    best = streamed("ranged", 1000, 990, 1010, threads=4, chunk=64 << 20)
    shared = candidate("mmap-shared-fd", 1200, workers=4, role="failure mode")
    peer = Candidate(parse_engine("runai RUNAI_STREAMER_CONCURRENCY=16"), "peer")
    peer.results[:] = streamed("ranged", 1300, 1310, 1290).results
    rec = record(bucket, winner=best, ranked=(shared, best), peers=(peer,), pick=peer)
    assert alternatives(rec)[shared.spec]["note"] == (
        "failure mode; 1 cold run, 20% above the median of modelmon's best, measured as the "
        "failure mode, never a contender"
    )
