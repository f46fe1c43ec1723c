"""What a run leaves behind: plot ranges and keys follow the model and the run shown; a new
job starts from a clean slate; a recommendation shares the window's ceilings and shows why."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from modelmon.core import open_model as parse_model
from modelmon.core import write_safetensors_model
from modelmon.core.output import recommendation_answer as answer
from modelmon.gui.main_window import MainWindow
from modelmon.gui.plots.style import START_S
from modelmon.gui.state.run_list import IDLE

from .conftest import (
    MEDIUM_OPTIONS,
    open_model,
    start_slow_ab,
    wait_idle,
)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~1 MB: far smaller than the others, so a range kept from it would cut theirs."""
    return write_safetensors_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=64, vocab=256)


def model_mb(path: Path) -> float:
    return parse_model(path).file_bytes / 1e6


def y_top(plot) -> float:
    return plot.item.vb.viewRange()[1][1]


def test_offset_plots_follow_the_model_larger_after_smaller_and_back(
    qtbot, window: MainWindow, tiny_model: Path, slow_model: Path
):
    workspace = window.workspace
    for path in (tiny_model, slow_model, tiny_model):
        open_model(qtbot, window, path)
        qtbot.waitUntil(lambda path=path: workspace.bench.info.path == str(path), timeout=10_000)
        total = model_mb(path)
        for plot in (workspace.access, workspace.residency):
            # The whole model shows (every worker's reads, the last shard), and no more
            # than a margin above it (a smaller model is not squashed into a corner).
            assert total <= y_top(plot) <= 1.1 * total, (path.name, plot.title, y_top(plot))


def test_keys_go_with_the_runs_when_the_model_changes(
    qtbot, window: MainWindow, small_model: Path, tiny_model: Path
):
    workspace = window.workspace
    open_model(qtbot, window, small_model)
    workspace.compare.pairs.setValue(1)
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window)
    assert workspace.throughput.run_labels == ["A", "B"]
    assert [name for name, _ in workspace.throughput.keys] == ["run A", "run B"]
    assert set(workspace.blocks.bars) == {"A", "B"}
    open_model(qtbot, window, tiny_model)
    qtbot.waitUntil(lambda: workspace.bench.info.path == str(tiny_model), timeout=10_000)
    assert workspace.throughput.run_labels == [] and workspace.throughput.keys == []
    for plot in (*workspace.metric_plots, workspace.blocks, workspace.residency):
        assert plot.keys == [], plot.title
    assert workspace.access.keys == [] and workspace.blocks.bars == {}


def test_nothing_of_the_last_models_run_stays_when_another_opens(
    qtbot, window: MainWindow, slow_model: Path, tiny_model: Path
):
    """Neither the time axis of a run of the model before (the plots start from a run's
    first tenth of a second) nor its spec beside the progress bar ("ranged" after a
    bucket)."""
    workspace = window.workspace
    open_model(qtbot, window, slow_model)
    workspace.bench.configs.set("A", "sequential", MEDIUM_OPTIONS)
    workspace.bench.run("A")
    wait_idle(qtbot, window)
    assert workspace.bench.records[-1].status == "ok", window.messages.message()
    timed = (workspace.throughput, workspace.access, *workspace.metric_plots, workspace.residency)
    longest = max(plot.item.vb.viewRange()[0][1] for plot in timed)
    assert longest > START_S  # the run drew past the start: the check below can fail
    assert workspace.progress.detail.text().startswith("sequential")
    open_model(qtbot, window, tiny_model)
    for plot in timed:
        assert plot.item.vb.viewRange()[0] == [0.0, START_S], plot.title
    assert workspace.progress.detail.text() == ""
    assert workspace.progress.bar.format() == IDLE


def test_a_cancelled_ab_is_never_drawn_beside_an_earlier_ab(
    qtbot, window: MainWindow, slow_model: Path
):
    workspace = window.workspace
    open_model(qtbot, window, slow_model)
    for label in ("A", "B"):
        workspace.panels[label].set_config("sequential", MEDIUM_OPTIONS)
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window)
    assert workspace.bench.ab.history.result is not None and workspace.throughput.run_labels == [
        "A",
        "B",
    ]
    start_slow_ab(qtbot, workspace, 2)
    workspace.bench.cancel()
    wait_idle(qtbot, window)
    assert workspace.throughput.run_labels == ["A"]  # the cancelled run alone
    # Its key says how it ended: a cancelled run is never shown as a plain one.
    assert [name for name, _ in workspace.throughput.keys] == ["run A (cancelled)"]
    assert workspace.compare.verdict.text() == (
        "A/B cancelled after 0 of 2 pairs: no verdict · its 1 run stays in the results"
    )
    assert workspace.progress.bar.value() == 0
    # A single run of B afterwards is drawn beside the last run of A, the cancelled one,
    # still named so: the plots show the last run of each configuration.
    workspace.panels["B"].set_config("sequential", MEDIUM_OPTIONS)
    workspace.bench.run("B")
    assert workspace.compare.verdict.text() == ""  # the banner went as the run started
    assert not window.messages.isVisible()
    wait_idle(qtbot, window)
    assert workspace.throughput.run_labels == ["A", "B"]
    assert [name for name, _ in workspace.throughput.keys] == ["run A (cancelled)", "run B"]


def test_a_cancelled_ab_says_what_it_left_and_the_earlier_verdict_stays_exportable(
    qtbot, window: MainWindow, slow_model: Path, tmp_path: Path
):
    workspace, bench, menus = window.workspace, window.bench, window.menus
    open_model(qtbot, window, slow_model)
    for label in ("A", "B"):
        bench.configs.set(label, "sequential", MEDIUM_OPTIONS)
    bench.run_ab(1)
    wait_idle(qtbot, window)
    first = bench.ab.history.session
    assert bench.ab.result is not None and first is not None, window.messages.message()
    assert menus.ab_config_action.text() == "Export A/B &winner as configuration…"
    for cancel_when in ("at once", "loading"):
        start_slow_ab(qtbot, workspace, 2) if cancel_when == "loading" else bench.run_ab(2)
        bench.cancel()
        wait_idle(qtbot, window)
        session = bench.ab.history.session
        rows = [r for r in bench.records if r.session == session]
        banner = workspace.compare.verdict.text()
        if rows:  # every run it started, however it ended, and the banner counts them
            assert f"its {len(rows)} run" in banner and rows[-1].status == "cancelled", banner
        else:
            assert "no run had started" in banner, banner
        # The earlier verdict's winner is still exported, and the menu says whose it is.
        assert menus.ab_config_action.isEnabled(), cancel_when
        assert first in menus.ab_config_action.text()
    assert len(rows) == 1  # cancelled while loading: the run it cut short
    path = tmp_path / "winner.toml"
    with qtbot.waitSignal(workspace.exporter.finished, timeout=20_000) as done:
        workspace.exporter.export_ab_config(str(path))
    assert done.args[0] and f"of {first}" in done.args[1], done.args
    assert path.exists()


def test_every_kind_of_job_leaves_an_empty_bar_and_the_next_clears_its_words(
    qtbot, window: MainWindow, small_model: Path
):
    workspace = window.workspace
    bar = workspace.progress.bar
    open_model(qtbot, window, small_model)
    assert bar.value() == 0 and bar.format() == IDLE
    workspace.bench.run("A")
    wait_idle(qtbot, window)
    assert bar.value() == 0 and bar.format().startswith("Run A: ")  # its outcome, no fill
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window)
    verdict = workspace.compare.verdict.text()
    assert verdict and bar.value() == 0
    assert window.menus.ab_config_action.isEnabled()
    workspace.bench.ceiling_repeats = 1
    workspace.bench.measure_ceilings()
    # The ceilings don't touch the A/B: its verdict stays on screen exactly as long as
    # File ▸ Export A/B winner can export it.
    assert workspace.compare.verdict.text() == verdict
    assert window.menus.ab_config_action.isEnabled()
    wait_idle(qtbot, window)
    assert workspace.compare.verdict.text() == verdict
    assert window.menus.ab_config_action.isEnabled()
    assert workspace.bench.ceilings.current is not None and bar.value() == 0
    assert bar.format() == "Ceilings measured"
    assert "(measured " in workspace.compare.ceilings_label.text()
    window.messages.show_message("left from before", "error")
    workspace.bench.run("B")
    assert not window.messages.isVisible()
    wait_idle(qtbot, window)
    assert bar.value() == 0


def test_the_recommendation_shares_the_ceilings_and_shows_why(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    workspace = window.workspace
    open_model(qtbot, window, small_model)
    workspace.bench.ceiling_repeats = 1
    workspace.bench.measure_ceilings()
    wait_idle(qtbot, window)
    parallel = workspace.bench.ceilings.current.get("parallel_read")
    target = tmp_path / "rec.toml"
    workspace.bench.recommend(2.0)  # the ceilings are measured: a load and a few entries
    assert workspace.tabs.currentWidget() is workspace.recommendation
    view = workspace.recommendation
    qtbot.waitUntil(lambda: bool(view.progress_lines), timeout=10_000)  # the search, live
    assert view.progress_lines[0].startswith("using the ceilings already measured")
    wait_idle(qtbot, window, 120_000)
    assert workspace.progress.bar.value() == 0
    # Recommending wrote nothing; exporting it is a step of its own.
    assert not target.exists() and window.menus.export_recommendation_action.isEnabled()
    with qtbot.waitSignal(workspace.exporter.finished, timeout=20_000) as done:
        workspace.exporter.export_recommendation(str(target))
    assert done.args[0], done.args[1]
    # One set of ceilings: the recommendation used the window's, and the file says so.
    assert workspace.bench.ceilings.current.get("parallel_read") is parallel
    evidence = tomllib.loads(target.read_text())["evidence"]
    assert evidence["ceilings_mbps"]["parallel_read"] == round(parallel.mbps, 1)
    # The explanation, the ranking and the snippets are on screen.
    # The headline is the answer: on a small local file the library's own read may win.
    shown = window.bench.recommendation.shown
    found = answer(shown.recommendation, target.name, shown.advice)
    assert found.action.startswith(("Load with ", "Keep the library's own read"))
    assert view.summary.text().startswith(found.action) and str(target) in view.summary.text()
    # Why is folded under the answer, one click away.
    assert not view.explanation.isVisibleTo(view)
    assert view.paste.isVisibleTo(view) == (found.paste is not None)
    view.why.click()
    assert view.explanation.isVisibleTo(view) and "Best: " in view.explanation.text()
    # Ranked by median: within noise the pick may be the more robust of two, not the faster.
    versus = [view.ranking.item(r, 5).text() for r in range(view.ranking.rowCount())]
    assert versus.count("the pick") == 1
    assert view.snippets.rowCount() >= 1
    said = [view.snippets.item(r, 2).text() for r in range(view.snippets.rowCount())]
    # Each line's evidence ends with what measured it, or that nothing did.
    assert all(" measured here" in f" {s}" for s in said), said
    # The ranking leads with the pick.
    assert versus[0] == "the pick"
