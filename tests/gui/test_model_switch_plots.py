"""A model's runs come back whole when it is opened again: the plots draw the runs they showed
before another model was opened (the last of A and of B), an export of a tab not viewed
draws the runs its heading names, and a row picked in the results draws its run."""

from __future__ import annotations

import sys
from pathlib import Path

from modelmon.core import write_safetensors_model
from modelmon.gui.main_window import MainWindow
from modelmon.gui.state.records import WATCH_LABEL
from modelmon.gui.state.watch_job import WatchInput, watch_request

from .conftest import MEDIUM_OPTIONS, open_model, wait_idle
from .figures.test_run_kinds import READER
from .test_export import export
from .test_plot_export_agreement import (
    EACH,
    PLOTS,
    check_png_export,
    check_svg_export,
    figure_words,
    named,
)


def check_exports(
    qtbot, window: MainWindow, tmp_path: Path, stage: str, last: str, each: set[str]
) -> None:
    """Every plot, as SVG and PNG, draws the runs its heading names: ``each`` where the plot
    overlays runs, ``last``'s where it pictures one."""
    shown = window.workspace.tabs.currentIndex()
    exporter = window.workspace.exporter
    for name in PLOTS:
        expected = each if name in EACH else {last}
        for fmt in ("svg", "png"):
            path = tmp_path / f"{stage}-{name.replace(' ', '-')}.{fmt}"
            ok, text = export(qtbot, window, lambda p, n=name: exporter.export_plot(n, p), path)
            assert ok, text
            check = check_svg_export if fmt == "svg" else check_png_export
            check(window, name, path.read_bytes(), expected)
    assert window.workspace.tabs.currentIndex() == shown  # the export changed no view


def test_kept_runs_are_drawn_again_when_their_model_is_opened_again(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=128)
    open_model(qtbot, window, small_model)
    bench, workspace = window.bench, window.workspace
    for label in ("A", "B"):
        bench.configs.set(label, "pread", MEDIUM_OPTIONS)
    for label in ("A", "B", "A"):
        if len(bench.records) == 2:  # the last A is told apart from the first by its spec
            bench.configs.set("A", "sequential", MEDIUM_OPTIONS)
        bench.run(label)
        wait_idle(qtbot, window)
        assert bench.records[-1].status == "ok", window.messages.message()
    before = {label: workspace.throughput.point_count(label) for label in ("A", "B")}
    assert all(before.values()), before
    sharing = workspace.access.sharing_text  # how its readers used descriptors
    assert "descriptor" in sharing, sharing

    open_model(qtbot, window, other)
    assert workspace.throughput.run_labels == []
    open_model(qtbot, window, small_model)
    assert len(bench.records) == 3

    first_a, run_b, last_a = bench.records
    assert bench.plot_runs("Throughput") == [run_b, last_a]
    assert bench.plot_runs("Access pattern") == [last_a]
    assert workspace.throughput.run_labels == ["A", "B"]
    after = {label: workspace.throughput.point_count(label) for label in ("A", "B")}
    assert after == before  # the same curves as the runs' ends left them
    assert workspace.access.run_labels == ["A"] and workspace.access.segment_count > 0
    assert workspace.access.sharing_text == sharing  # from the reads it kept
    assert workspace.blocks.run_labels == ["A", "B"]
    # No tab but the first is shown: each export brings its plot up and draws its runs.
    assert workspace.tabs.currentIndex() == 0
    check_exports(qtbot, window, tmp_path, "back", "A", {"A", "B"})

    # A row picked: its run is drawn in place of its configuration's last, and exported.
    workspace.results.selectRow(0)
    assert bench.plot_runs("Throughput") == [run_b, first_a]
    assert bench.plot_runs("Access pattern") == [first_a]
    assert workspace.access.run_spec == first_a.spec != last_a.spec
    for name in ("Memory", "Access pattern"):
        path = tmp_path / f"picked-{name.replace(' ', '-')}.svg"
        ok, text = export(
            qtbot, window, lambda p, n=name: window.workspace.exporter.export_plot(n, p), path
        )
        assert ok, text
        heading, _ = figure_words(path.read_bytes())
        assert named(heading, first_a) and not named(heading, last_a), heading
        assert named(heading, run_b) == (name == "Memory"), heading


def test_a_kept_watch_is_drawn_again_beside_a_load(qtbot, window: MainWindow, tmp_path: Path):
    one_file = write_safetensors_model(tmp_path / "one", layers=2, hidden=512, vocab=4096)
    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=128)
    reader = tmp_path / "read_the_model.py"
    reader.write_text(READER)
    open_model(qtbot, window, one_file)
    bench, workspace = window.bench, window.workspace
    line = f"{sys.executable} {reader} {{path}}"
    bench.watch(watch_request(WatchInput(line, None, "", "cold", None), bench.info.model))
    wait_idle(qtbot, window)
    bench.configs.set("B", "pread", MEDIUM_OPTIONS)
    bench.run("B")
    wait_idle(qtbot, window)
    assert [r.status for r in bench.records] == ["ok", "ok"], window.messages.message()
    before = workspace.throughput.point_count(WATCH_LABEL)
    assert before

    open_model(qtbot, window, other)
    open_model(qtbot, window, one_file)
    assert workspace.throughput.run_labels == ["B", WATCH_LABEL]
    assert workspace.throughput.point_count(WATCH_LABEL) == before
    assert [r.label for r in bench.plot_runs("Worker CPU")] == [WATCH_LABEL, "B"]
    check_exports(qtbot, window, tmp_path, "watch", "B", {"B", WATCH_LABEL})
