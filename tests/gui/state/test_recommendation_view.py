"""The recommendation as the window shows it, and one set of results per model (Qt-free)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import CacheState, Ceiling, Ceilings, Recommendation, open_model
from modelmon.core.measuring import BudgetUse, judge
from modelmon.core.output import recommendation_document
from modelmon.gui.state.model_sessions import (
    ModelResults,
    ModelSessions,
    ceiling_lines,
    measured_when,
    with_ceiling,
)
from modelmon.gui.state.recommendation_view import (
    RANKING_COLUMNS,
    left_out_text,
    loader_rows,
    paired_text,
    percent_change,
    ranking_rows,
    recommendation_stopped,
    snippet_rows,
    summary_text,
    versus_pick,
)
from modelmon.gui.state.recommending import RecommendationState

from ...core.measuring.records import advice, candidate, engine_run
from ...object_store import BUCKET

CEILINGS = Ceilings("m", (Ceiling("parallel_read", 1400.0, (1400.0,), "four readers", True),))


def _recommendation(sharded_model: Path) -> Recommendation:
    best = candidate("sequential", 1000.0, 1010.0, 990.0, workers=4)
    second = candidate("pread", 700.0, 720.0, workers=4)
    second.verdict = judge([0.7, 0.71, 0.69])
    cut = candidate("mmap-shared-fd", workers=4, role="failure mode")
    cut.stopped_below_mbps, cut.ended, cut.reason = 120.0, "cut early", "cut early: far behind"
    late = candidate("direct", workers=4)
    late.ended, late.reason = "not measured", "no budget left"
    return Recommendation(
        model=open_model(sharded_model),
        winner=best,
        ranked=(best, second, cut),
        ceilings=CEILINGS,
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
        unranked=(late,),
    )


def test_ranking_rows_say_runs_spread_regret_and_how_each_ended(sharded_model: Path):
    rec = _recommendation(sharded_model)
    rows = ranking_rows(rec)
    assert [len(r.cells) for r in rows] == [len(RANKING_COLUMNS)] * 4
    pick, second, cut, late = rows
    assert (
        pick.picked
        and pick.in_config
        and pick.cells[:4] == ("1", rec.winner.spec, "3", "1000 MB/s")
    )
    assert pick.cells[4] == "990 MB/s–1010 MB/s" and pick.cells[5] == "the pick"
    # One comparison, one figure: against the pick it was paired with, the pairs' median
    # (1 / 0.70), in "vs the pick" as in "paired with the pick" and the explanation, said
    # to be of pairs beside a rate column whose medians give another (walk 20: "+48 %"
    # beside medians 5 % apart).
    assert second.cells[5] == "−30 % by the median pair (the pick is 1.43× faster)"
    assert second.cells[6].startswith("the pick faster: the pick 1.43× by the median pair")
    # Of three pairs, as the explanation counts them (walk 14 read "both pairs" in the why
    # beside "half the pairs" here, of two).
    assert "(pairs 1.41–1.45×, 2 of the 3 pairs within ±2 % of their median)" in second.cells[6]
    assert cut.cells[3] == "under 120 MB/s" and cut.cells[5].startswith("under −88 %")
    # Its bound, not its rate: the pick is "at least" that much faster (walk 15).
    assert cut.cells[5].endswith("(the pick is at least 8.33× faster)"), cut.cells[5]
    assert cut.cells[7] == "cut early: far behind; failure mode"
    assert late.cells[0] == "" and late.cells[2] == "0" and late.cells[7].startswith("not measured")


def test_a_spread_of_one_run_is_no_range(sharded_model: Path):
    rec = _recommendation(sharded_model)
    rows = ranking_rows(rec)
    column = RANKING_COLUMNS.index("spread (min–max)")
    assert rows[0].cells[column] == "990 MB/s–1010 MB/s"  # three runs: their range
    once = dataclasses.replace(rec.ranked[1], results=rec.ranked[1].results[:1])
    row = ranking_rows(dataclasses.replace(rec, ranked=(rec.winner, once)))[1]
    assert row.cells[2] == "1" and row.cells[column] == "–"  # one run: its figure alone


def test_a_candidate_stopped_before_any_byte_shows_no_rate(sharded_model: Path):
    rec = _recommendation(sharded_model)
    cut = rec.ranked[2]
    cut.stopped_below_mbps = 0.0  # FUSE: stopped before one piece of the shared mapping landed
    row = ranking_rows(rec)[2]
    assert row.cells[3] == "nothing loaded" and "0 MB/s" not in " ".join(row.cells)


def test_snippets_are_marked_measured_or_not_and_the_summary_names_the_file(sharded_model: Path):
    rec = _recommendation(sharded_model)
    rows = snippet_rows(rec, "m.toml")
    assert rows and all(len(row) == 3 for row in rows)
    said = [row[2].split("; ")[-1] for row in rows]
    assert all(s.startswith(("measured here as ", "not measured here")) for s in said)
    assert any(s.startswith("measured here as ") for s in said)
    text = summary_text(dataclasses.replace(rec), "/tmp/m.toml")
    # The answer leads: what to do, then what it gains (no library run here to compare).
    assert text.startswith(f"Load with modelmon, {rec.winner.spec} (the config file holds it).")
    assert "It loads at 1000 MB/s, the median of 3 cold runs;" in text
    assert "the budget was 60 s. Peak RSS " in text
    # No parent peaks here; the file was exported, and says where.
    assert text.endswith(" in the recommended load's own processes. Exported to /tmp/m.toml.")
    # Recommending measures, exporting writes: before an export the headline says how.
    assert summary_text(rec).endswith("writes it as a config file.")


@pytest.mark.parametrize(
    ("named", "served"),
    [("llama/", True), ("single/", False), ("llama/model.safetensors", False)],
)
def test_a_bucket_models_config_and_window_give_the_same_lines(
    moto_s3: SimpleNamespace, named: str, served: bool
) -> None:
    """The config's [apply] and the Recommendation tab's rows are one record's: the servers'
    lines for a prefix holding a config.json that names an architecture, else neither has
    them and both say why in the same sentence."""
    best = candidate("ranged", 900.0, 910.0, 905.0, threads=8, chunk=16 << 20)
    rec = Recommendation(
        model=open_model(f"s3://{BUCKET}/{named}"),
        winner=best,
        ranked=(best,),
        ceilings=CEILINGS,
        usable_ram=10**10,
        budget=BudgetUse(given_s=60.0, elapsed_s=58.0),
    )
    document = recommendation_document(rec, "m.toml")
    rows = snippet_rows(rec, "m.toml")
    assert [row[:2] for row in rows] == list(document["apply"].items())
    assert ("vllm-runai_streamer" in document["apply"]) is ("sglang" in document["apply"]) is served
    why = left_out_text(rec, rows)
    assert document.get("apply_left_out", {}).get("servers", "") == why
    assert bool(why) is not served
    assert why.startswith("No vLLM or SGLang line") or served


def test_the_headline_calls_runs_cold_only_when_they_were(sharded_model: Path):
    rec = _recommendation(sharded_model)
    in_ram = CacheState("cold", 1.0, 1.0, False, True, "cachestat", "the file lives in RAM")
    rec.winner.results[:] = [dataclasses.replace(r, cache=in_ram) for r in rec.winner.results]
    text = summary_text(rec, "/tmp/m.toml")
    assert "It loads at 1000 MB/s, the median of 3 runs (none verified cold);" in text
    assert "cold run" not in text


def test_each_model_keeps_its_results_and_its_one_set_of_ceilings():
    sessions = ModelSessions()
    ceilings = with_ceiling(None, "/a", Ceiling("sequential_read", 500.0, (500.0,), "x", True))
    newer = Ceiling("sequential_read", 520.0, (520.0,), "y", True, measured_at=time.time())
    ceilings = with_ceiling(ceilings, "/a", newer)
    assert ceilings.items == (newer,)  # replaced by name, never two of one kind
    sessions.stash("/a", ModelResults(ceilings=ceilings))
    sessions.stash("/b", ModelResults())  # nothing measured: nothing kept
    assert sessions.paths() == ["/a"]
    assert sessions.take("/a").ceilings is ceilings
    assert sessions.take("/a").empty  # taken: the window holds it now
    assert measured_when(ceilings).startswith("measured ")
    assert measured_when(Ceilings("m", ())) == "measured at an unknown time"
    # Kept across sessions: another day's ceilings say how old they are.
    three_days_later = newer.measured_at + 3 * 86_400
    assert measured_when(ceilings, three_days_later).startswith("measured 3 days ago, ")
    assert measured_when(ceilings, newer.measured_at + 86_400).startswith("measured yesterday, ")
    (line,) = ceiling_lines(ceilings)
    assert line.startswith("sequential: 520 MB/s — y; 1 run, at ")


def test_a_cancelled_recommendation_says_cancelled_once():
    """Not "Recommendation: cancelled: recommendation cancelled"."""
    words = recommendation_stopped(True, "recommendation cancelled")
    assert words == (
        "Recommendation cancelled",
        "Recommendation cancelled: nothing to export.",
        "No recommendation: cancelled",
    )
    assert all(text.lower().count("cancelled") == 1 for text in words)
    failed = recommendation_stopped(False, "no candidate load completed: nothing to recommend")
    assert failed[1] == "Recommendation failed: no candidate load completed: nothing to recommend"
    over = recommendation_stopped(True, "recommendation cancelled", previous=True)
    assert over[1].startswith("The new recommendation was cancelled: the answer below is the ")
    assert all(text.lower().count("cancelled") == 1 for text in over)


def test_a_search_that_gives_no_answer_leaves_the_previous_one_shown(sharded_model: Path):
    state = RecommendationState()
    rec = _recommendation(sharded_model)
    state.start(1.0)
    state.done(rec, ("why",))
    state.exported("/tmp/out.toml")
    for cancelled in (True, False):
        state.start(60.0)
        assert state.recommendation is None and state.previous is not None  # a search runs
        _, tab, _ = recommendation_stopped(cancelled, "it broke", state.previous is not None)
        state.stopped(tab)
        assert state.shown.phase == "done" and state.recommendation is rec and state.exportable
        assert state.shown.note == tab and state.shown.exported_to == "/tmp/out.toml"
    state.start(60.0)
    state.done(rec, ("why",))
    assert state.shown.note == ""  # a new answer: no word of a cancelled search
    state.clear()
    state.start(60.0)
    state.stopped("Recommendation cancelled: nothing to export.")
    assert state.shown.phase == "stopped" and not state.exportable


BEST = candidate("sequential", 900, 910, 905, workers=4, chunk=16 << 20)


def test_with_your_loader_the_answer_leads_the_ranking_with_the_answers_gain() -> None:
    slow = engine_run("safetensors", 860, 871, 880)
    # Medians 1262 against 871 (1.45x); the pairs' median 1.55x: the answer's figure.
    ahead = dataclasses.replace(
        candidate("sequential", 1204, 1262, 1484, workers=4, chunk=16 << 20),
        verdict=judge([1.55, 1.50, 1.60]),
    )
    rows = loader_rows(advice(slow, "safetensors", (), None, ahead))
    assert rows[0].cells[0] == "modelmon" and rows[0].picked  # the answer first
    assert rows[0].cells[5] == "1.55× your loader as it is: the answer"
    assert rows[1].cells[0] == "yours"


def test_a_change_not_measured_says_why_where_its_figure_would_be() -> None:
    unmeasured = dataclasses.replace(
        engine_run("safetensors readahead=4096"),
        ended="not measured",
        reason="not measured: no budget left for it",
    )
    slower = dataclasses.replace(
        engine_run("safetensors backend=read", 600, 611, 620), verdict=judge([0.7] * 3)
    )
    as_is = engine_run("safetensors", 870, 880, 890)
    rows = loader_rows(advice(as_is, "safetensors", (unmeasured, slower), None, BEST))
    assert [r.cells[1] for r in rows] == [
        as_is.spec,  # the answer: keep it
        slower.spec,
        f"{BEST.spec} (in your loader's rounds)",
        unmeasured.spec,  # the measured first
    ]
    assert rows[0].cells[5] == "your loader as it is: the answer, keep it"
    assert rows[3].cells[2:6] == ("0", "–", "–", "not measured: no budget left for it")


def test_one_pair_with_the_pick_is_said_as_one_and_the_gain_is_of_all_runs() -> None:
    """One pair (401 against 792 MB/s) and more runs beside it: "vs the pick" gives the
    ratio of the medians the search decided on (1.71×, as the answer and the explanation),
    and the pairs' column says the one pair decided nothing alone. The fourteenth walk read
    "one pair: the pick 1.15×" beside a why that said the other finalist 1.12× faster by
    their medians: two figures, two directions, for one comparison."""
    pick = candidate("sequential", 770, 792, 942, workers=4)
    library = candidate("library", 526, 401, role="baseline")
    library.verdict = judge([401 / 792])  # its one pair with the pick: library / pick
    assert versus_pick(library, pick) == "−41 % (the pick is 1.71× faster)"
    said = paired_text(library)
    assert said == "one pair: too few to estimate the pairs' noise, so all their runs decided"
    assert "×" not in said


def test_a_tie_on_single_runs_is_not_said_as_paired_runs(sharded_model: Path) -> None:
    """No pair fitted the budget: the ranking says the single runs were within noise, as the
    explanation does, never that paired runs did not separate them."""
    from ...core.measuring.records import tie_without_pairs

    rec = _recommendation(sharded_model)
    faster = candidate("pread", 1040.0, workers=8)
    rec = dataclasses.replace(rec, ranked=(*rec.ranked, faster), duel=tie_without_pairs(faster))
    rows = ranking_rows(rec)
    cells = [row.cells[7] for row in rows]
    assert not [cell for cell in cells if "paired runs" in cell], cells
    # Its "vs the pick" says within noise, as the answer does, never a gain of the pick.
    (tied,) = [row.cells[5] for row in rows if row.cells[1] == faster.spec]
    assert tied.endswith("(within noise of the pick)") and "faster" not in tied, tied
    # Their ratio beside the ratio the noise allows, as the answer and the why say it.
    assert cells[0].startswith(
        "the pick: their runs are 1.04× apart, within twice a bucket's usual ±22% run-to-run "
        "noise (up to 1.49×): no configuration here ran twice, and the pick is the simpler"
    ), cells[0]


def test_a_change_under_half_a_percent_is_not_a_signed_zero() -> None:
    """The ranking read "−0 %" for a setting 0.3 % slower than the pick: a figure with a
    sign and no size. Under half a percent it keeps a decimal; none at all is "0 %"."""
    assert percent_change(-0.3) == "−0.3 %"
    assert percent_change(0.2) == "+0.2 %"
    assert percent_change(0.01) == "0 %"
    assert percent_change(-41.2) == "−41 %"
    assert percent_change(2.4) == "+2 %"
