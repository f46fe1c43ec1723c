"""A model's runs come back whole when it is opened again: the plots draw the runs they showed
before another model was opened (the last of A and of B), an export of a tab not viewed
draws the runs its heading names, and a row picked in the results draws its run."""

from __future__ import annotations

from pathlib import Path

from modelmon.core import write_safetensors_model
from modelmon.gui.main_window import MainWindow

from .conftest import MEDIUM_OPTIONS, open_model, wait_idle
from .test_export import export
from .test_plot_export_agreement import (
    EACH,
    PLOTS,
    check_png_export,
    check_svg_export,
    figure_words,
    named,
)


def check_exports(qtbot, window: MainWindow, tmp_path: Path, stage: str, last: str) -> None:
    """Every plot, as SVG and PNG, draws the runs its heading names: the last of A and of
    B where the plot overlays runs (and in Blocks), ``last``'s where it pictures one."""
    shown = window.workspace.tabs.currentIndex()
    exporter = window.workspace.exporter
    for name in PLOTS:
        expected = {"A", "B"} if name in (*EACH, "Blocks") else {last}
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
    assert workspace.blocks.run_labels == ["A", "B"]
    # No tab but the first is shown: each export brings its plot up and draws its runs.
    assert workspace.tabs.currentIndex() == 0
    check_exports(qtbot, window, tmp_path, "back", "A")

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
