"""The recommendation as its answer tells it: one record for the answer, the why, the ranking
and the config file."""

from __future__ import annotations

from pathlib import Path

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import Duel, decide
from modelmon.core.measuring.recommend import Recommendation
from modelmon.core.model.formats import open_model
from modelmon.core.output import as_told, recommendation_answer, recommendation_document
from modelmon.core.output import explain_recommendation as explain
from modelmon.gui.state.recommendation_view import ranking_rows

from ..measuring.records import candidate
from .test_explain import in_bucket, record


def test_a_kept_baseline_is_the_pick_of_every_part(sharded_model: Path) -> None:
    """Walk 21: the CLI answered "Load with a plain download: nothing measured here is
    clearly faster" while its why said "so the simpler one is recommended: ranged threads=2
    chunk=64MiB", and [recommendation] and [recommended] held that one: `load --config`
    ran something else than the answer said. Here the search's pick (1269 MB/s, 4 runs) is
    within a file read's noise of the library's one run (1058 MB/s), and maps the file with
    more readers: the answer keeps the library's read, and so do the why, the ranking and
    every section of the file."""
    model = open_model(sharded_model)
    searched = candidate("mmap", 1269, 1250, 1280, 1290, workers=2)
    four = candidate("mmap", 1240, 1230, workers=4)
    library = candidate("library", 1058, role="baseline")
    best, other, verdict, tie = decide(searched, four, [0.98, 0.97])
    assert best is searched and tie  # the simpler of two within noise
    rec = record(
        model,
        winner=best,
        ranked=(best, other, library),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=2),
    )
    said = recommendation_answer(rec, "m.toml")
    assert said.action == (
        "Keep the library's own read (safetensors get_tensor): nothing measured here is "
        "clearly faster."
    )
    told = as_told(rec)
    assert told.used is told.winner and told.winner.spec == library.spec
    # The same answer, and no surer than the one run of what it keeps.
    assert recommendation_answer(told, "m.toml").action == (
        f"{said.action} Not certain: only 1 cold run of it fitted the budget; give it a "
        "longer budget."
    )
    why = " ".join(explain(told))
    assert f"The search's pick, {searched.spec}, was weighed against what you run now" in why
    assert "so what you run now is kept" in why
    assert f"simpler one is recommended: {searched.spec}" not in why
    # Walk 22: what is kept is not called the best of a search that found it no faster.
    assert "Best:" not in why and "is the best here" not in why, why
    assert f"Kept: {library.spec}, what you run now, at 1058 MB/s (1 cold run)" in why, why
    document = recommendation_document(rec, "m.toml")
    assert document["recommendation"]["pick"] == library.spec
    assert document["recommended"]["strategy"] == "library"
    assert document["evidence"]["runs"] == 1
    rows = ranking_rows(told)
    assert [r.cells[1] for r in rows if r.picked] == [library.spec]
    # No row says it was paired with "the pick" when its pairs were with the search's pick.
    assert not [r for r in rows if "by the median pair" in " ".join(r.cells)], rows
    assert as_told(told) == told  # told once is told


def test_a_kept_plain_download_is_kept_not_best_nor_raced(sharded_model: Path) -> None:
    """Walk 22's bucket: the answer kept a plain download (593 MB/s, 1 run) over the search's
    pick (737 MB/s, 4 runs), within twice a bucket's noise. The why then said "Best: ranged
    threads=1 chunk=1024MiB ... at 593 MB/s (1 run)" beside loads at 593-773 MB/s, and the
    answer named the pick "the concurrent setting it was raced against" where the why said
    "on their runs, not in pairs". Both now say what happened: kept, and weighed."""
    bucket = in_bucket(open_model(sharded_model))
    searched = candidate("ranged", 737, 642, 918, 700, threads=16, chunk=64 << 20)
    second = candidate("ranged", 500, 490, 510, threads=8, chunk=64 << 20)
    plain = candidate("ranged", 593, threads=1, chunk=1 << 30, role="baseline")
    best, other, verdict, tie = decide(searched, second, [0.7, 0.68])
    assert best is searched
    rec = record(
        bucket,
        winner=best,
        ranked=(best, other, plain),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=2),
    )
    told = as_told(rec)
    assert told.duel is not None and told.duel.kept and told.used.spec == plain.spec
    said = recommendation_answer(told, "m.toml")
    assert said.action.startswith("Load with a plain download"), said.action
    assert said.gain.startswith(f"The search's pick, {searched.spec}"), said.gain
    assert "raced" not in said.gain, said.gain
    why = " ".join(explain(told))
    assert "Best:" not in why, why
    assert f"Kept: {plain.spec}" in why and ", what you run now, at 593 MB/s (1 " in why, why


def test_a_kept_plain_download_names_one_yardstick_in_answer_and_why(sharded_model: Path):
    """A new user's walk on a bucket: the answer kept the plain download "within twice a
    bucket's usual ±22% run-to-run noise" while its why said "under 5% apart, so what you
    run now is kept": two yardsticks for one comparison. Both now give the two medians'
    ratio and the one noise it was weighed against, with the ratio that noise allows."""
    bucket = in_bucket(open_model(sharded_model))
    searched = candidate("ranged", 610, 600, 620, 615, threads=16, chunk=64 << 20)
    second = candidate("ranged", 500, 490, 510, threads=8, chunk=64 << 20)
    plain = candidate("ranged", 593, threads=1, chunk=1 << 30, role="baseline")
    best, other, verdict, tie = decide(searched, second, [0.7, 0.68])
    assert best is searched
    rec = record(
        bucket,
        winner=best,
        ranked=(best, other, plain),
        duel=Duel(other=other, verdict=verdict, tie=tie, pairs=2),
    )
    told = as_told(rec)
    assert told.duel is not None and told.duel.kept
    weighed = "1.03× apart, within twice a bucket's usual ±22% run-to-run noise (up to 1.49×)"
    gain = recommendation_answer(told, "m.toml").gain
    assert gain.endswith(f"against 593 MB/s (1 cold run), {weighed}."), gain
    why = " ".join(explain(told))
    assert f"against 593 MB/s (1 cold run), {weighed}, so what you run now is kept" in why, why
    assert "under 5% apart" not in why, why


def test_no_plain_download_is_kept_beside_a_setting_clearly_faster_than_it(
    sharded_model: Path,
) -> None:
    """Walk 26's bucket: "Load with a plain download ...: nothing measured here is clearly
    faster" (983 MB/s, 1 run; the search's pick 1451 MB/s, 1.48x, within the 1.49x twice a
    bucket's noise allows) while the config file ranked 8 connections of 64 MiB at 1478 MB/s,
    "beyond twice a bucket's usual ±22% run-to-run noise": something measured was clearly
    faster. The download is kept only where nothing measured is; else the pick stands."""
    bucket = in_bucket(open_model(sharded_model))
    searched = candidate("ranged", 1451, 1400, 1460, 1500, threads=8, chunk=256 << 20)
    fast = candidate("ranged", 1477.7, 1477.7, threads=8, chunk=64 << 20)
    second = candidate("ranged", 1300, 1290, 1310, threads=4, chunk=64 << 20)
    plain = candidate("ranged", 983, threads=1, chunk=1 << 30, role="baseline")
    best, other, verdict, tie = decide(searched, second, [0.9, 0.89, 0.9])
    assert best is searched

    def told_of(*ranked: Candidate) -> Recommendation:
        duel = Duel(other=other, verdict=verdict, tie=tie, pairs=3)
        return as_told(record(bucket, winner=best, ranked=ranked, duel=duel))

    told = told_of(fast, best, other, plain)
    assert told.duel is not None and not told.duel.kept
    said = recommendation_answer(told, "m.toml")
    assert said.action.startswith(f"Load with modelmon, {searched.spec}"), said.action
    assert "nothing measured here is clearly faster" not in said.action, said.action
    assert said.gain.startswith("1.48× a plain download"), said.gain
    # Without the faster setting, nothing measured is clearly faster: the download is kept.
    kept = told_of(best, other, plain)
    assert kept.duel is not None and kept.duel.kept
