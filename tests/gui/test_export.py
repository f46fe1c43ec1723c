"""File ▸ Export: configs (A/B winner, recommendation), results, plots; failures keep old files."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from xml.dom import minidom

import pytest

from modelmon.core import read_config
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.export_format import CSV_FIELDS

from ..core.output.test_config_story import one_story
from .conftest import open_model, wait_idle

OLD = b"the previous export\n"
NAMES = ("ab.toml", "results.json", "results.csv", "plot.png")


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder holding an old copy of each export, that cannot be written to.

    As root (the test machines), file modes don't stop writes: a tmpfs remounted read-only
    does. Otherwise the folder is made read-only.
    """
    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "modelmon-test", str(folder)],
            capture_output=True,
        ).returncode
        == 0
    )
    for name in NAMES:
        (folder / name).write_bytes(OLD)
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        if os.geteuid() == 0:
            pytest.skip("root without mount: cannot make a read-only folder")
        folder.chmod(0o555)
    try:
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=True)
        else:
            folder.chmod(0o755)


def export(qtbot, window: MainWindow, action, path: Path) -> tuple[bool, str]:
    with qtbot.waitSignal(window.workspace.exporter.finished, timeout=20_000) as done:
        action(str(path))
    return done.args[0], done.args[1]


def test_ab_winner_results_and_plots_export(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path, read_only: Path
):
    open_model(qtbot, window, small_model)
    workspace, exporter = window.workspace, window.workspace.exporter
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window)
    ab = workspace.bench.ab.history.result
    assert ab is not None, window.messages.message()

    ok, text = export(qtbot, window, exporter.export_ab_config, tmp_path / "ab.toml")
    assert ok, text
    config = read_config(tmp_path / "ab.toml")  # the validating reader accepts it
    winner = ab.b if ab.b.median_mbps > ab.a.median_mbps else ab.a
    assert config.strategy == winner.spec.split()[0]
    assert config.document["evidence"]["cache"] == "cold"
    assert config.document["evidence"]["runs"] == 1
    assert any("A/B × 1" in line for line in config.document["explanation"])

    ok, text = export(qtbot, window, exporter.export_results, tmp_path / "results.json")
    assert ok, text
    document = json.loads((tmp_path / "results.json").read_text())
    session = workspace.bench.ab.history.session
    assert session is not None and session.startswith("A/B 1 at ")
    assert [run["run"] for run in document["runs"]] == [
        f"A · pair 1 · {session}",
        f"B · pair 1 · {session}",
    ]
    assert [run["ab_session"] for run in document["runs"]] == [session, session]
    assert document["ab"]["verdict"]["text"] == ab.verdict.text
    assert document["ab"]["session"] == session
    assert "mem_available" in document["runs"][0]["samples"]["series"]

    ok, text = export(qtbot, window, exporter.export_results, tmp_path / "results.csv")
    assert ok, text
    rows = list(csv.DictReader(io.StringIO((tmp_path / "results.csv").read_text())))
    assert len(rows) == 2 and tuple(rows[0]) == CSV_FIELDS
    assert float(rows[1]["mbps"]) == pytest.approx(workspace.bench.records[1].result.mbps, rel=1e-3)
    first_block = workspace.bench.records[1].result.first_block_s
    assert float(rows[1]["first_block_seconds"]) == pytest.approx(first_block, rel=1e-3)
    assert document["runs"][1]["result"]["first_block_seconds"] == pytest.approx(first_block)

    ok, text = export(
        qtbot, window, lambda p: exporter.export_plot("Throughput", p), tmp_path / "throughput.png"
    )
    assert ok, text
    assert (tmp_path / "throughput.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    ok, text = export(
        qtbot, window, lambda p: exporter.export_plot("Memory", p), tmp_path / "memory.svg"
    )
    assert ok, text
    assert minidom.parse(str(tmp_path / "memory.svg")).documentElement.tagName == "svg"

    # The same exports into a read-only folder: one line each, the old files untouched.
    for name, action in (
        ("ab.toml", exporter.export_ab_config),
        ("results.json", exporter.export_results),
        ("results.csv", exporter.export_results),
        ("plot.png", lambda p: exporter.export_plot("Throughput", p)),
    ):
        ok, text = export(qtbot, window, action, read_only / name)
        assert not ok
        assert window.messages.level == "error" and "\n" not in window.messages.message()
        assert name in text and ("Read-only" in text or "ermission" in text), text
        assert (read_only / name).read_bytes() == OLD
    assert sorted(p.name for p in read_only.iterdir()) == sorted(NAMES)  # no temp files left


def test_a_recommendation_is_measured_then_exported_as_often_as_asked(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    open_model(qtbot, window, small_model)
    assert not window.menus.export_recommendation_action.isEnabled()  # nothing to export yet
    window.bench.recommend(1.0)
    assert window.bench.running and window.menus.cancel_action.isEnabled()
    assert not window.menus.export_recommendation_action.isEnabled()
    wait_idle(qtbot, window, 90_000)
    rec = window.bench.recommendation.recommendation
    assert rec is not None, window.messages.message()
    said = window.messages.message()  # the answer the tab leads with, and where to go next
    assert said.startswith(("Load with ", "Keep ")) and "Recommendation tab" in said, said
    assert window.menus.export_recommendation_action.isEnabled()
    # Its config file is kept at once, quietly: the line to paste names a file that exists
    # before any export (a relative modelmon.toml would name nothing).
    state = window.bench.recommendation
    qtbot.waitUntil(lambda: state.shown.kept_to is not None, timeout=10_000)
    kept = Path(state.shown.kept_to)
    assert kept.is_file() and kept.parent.name == "recommendations"
    tab = window.workspace.recommendation
    cells = [tab.snippets.item(r, 1).text() for r in range(tab.snippets.rowCount())]
    assert any(f"config={str(kept)!r}" in cell for cell in cells), cells  # modelmon's line
    assert str(kept) in tab.summary.text()
    one_story(read_config(kept).document)
    assert window.messages.message() == said  # the answer still leads the message bar
    exporter = window.workspace.exporter
    out = tmp_path / "out"
    out.mkdir()
    for name in ("first.toml", "second.toml"):  # no new measurement for another copy
        ok, text = export(qtbot, window, exporter.export_recommendation, out / name)
        assert ok, text
        config = read_config(out / name)
        assert config.document["evidence"]["runs"] >= 1
        one_story(config.document)  # the engine's one record, as the CLI's file tells it
        # Pasted anywhere, the line finds the file: its whole path.
        assert f"config={str(out / name)!r}" in config.document["apply"]["modelmon"]
        # The tab's modelmon line, the same whole path, whatever folder the app started in.
        lines = window.workspace.recommendation.snippets
        cells = [lines.item(r, 1).text() for r in range(lines.rowCount()) if lines.item(r, 1)]
        assert any(f"config={str(out / name)!r}" in cell for cell in cells), cells
        assert config.strategy == rec.winner.spec.split()[0]
    assert window.bench.recommendation.recommendation is rec
    assert str(out / "second.toml") in window.workspace.recommendation.summary.text()

    # Another search, cancelled: it says so over the earlier answer, which stays exportable.
    answer = tab.summary.text()
    window.bench.recommend(600.0)
    assert window.bench.running and not tab.note.isVisible()
    window.menus.cancel_action.trigger()
    wait_idle(qtbot, window, 30_000)
    assert window.bench.recommendation.recommendation is rec
    assert tab.note.isVisibleTo(tab) and tab.note.text().startswith(
        "The new recommendation was cancelled: the answer below is the previous one"
    )
    assert tab.summary.text() == answer and tab.ranking.isVisibleTo(tab)
    assert window.messages.message() == (
        "No new recommendation: cancelled; the previous answer stays"
    )
    assert window.menus.export_recommendation_action.isEnabled()
    ok, text = export(qtbot, window, exporter.export_recommendation, out / "third.toml")
    assert ok, text
    assert read_config(out / "third.toml").strategy == rec.winner.spec.split()[0]


def test_a_recommendation_stops_on_cancel_and_leaves_nothing_to_export(
    qtbot, window: MainWindow, slow_model: Path
):
    open_model(qtbot, window, slow_model)
    window.bench.recommend(600.0)
    # Measuring the first ceiling, in worker processes.
    progress = window.workspace.progress.bar
    qtbot.waitUntil(lambda: "measuring the ceilings" in progress.format(), timeout=10_000)
    window.menus.cancel_action.trigger()
    wait_idle(qtbot, window, 10_000)
    assert window.bench.recommendation.recommendation is None
    assert not window.menus.export_recommendation_action.isEnabled()
    assert window.messages.message() == "No recommendation: cancelled"
    assert window.messages.level == "info"


def test_an_ab_winner_on_one_shared_descriptor_carries_the_recommendations_caveat(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    from modelmon.core.output import shared_fd_caveat

    caveat = shared_fd_caveat("mmap-shared-fd").partition(": ")[2]  # after the spec's words
    open_model(qtbot, window, small_model)
    workspace = window.workspace
    for label in ("A", "B"):  # whichever side wins, it maps one shared descriptor
        workspace.panels[label].strategy_box.setCurrentText("mmap-shared-fd")
    workspace.bench.run_ab(1)
    wait_idle(qtbot, window)
    assert workspace.bench.ab.history.result is not None, window.messages.message()
    target = tmp_path / "ab.toml"
    ok, text = export(qtbot, window, workspace.exporter.export_ab_config, target)
    assert ok and "Caveat: mmap-shared-fd" in text and caveat in text
    assert window.messages.level == "warning"
    explanation = read_config(target).document["explanation"]
    assert any(line.startswith("Caveat: mmap-shared-fd") for line in explanation)
