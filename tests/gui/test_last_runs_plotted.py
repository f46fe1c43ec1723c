"""The plots draw the last run of A and the last run of B, whichever step came between
them: an A/B, a recommendation, a memory limit, a later run of one side, another model
opened and this one again. The exports name the same runs."""

from __future__ import annotations

from pathlib import Path

from modelmon.core import write_safetensors_model
from modelmon.gui.main_window import MainWindow

from .conftest import MEDIUM_OPTIONS, open_model, wait_idle
from .test_export import export
from .test_plot_export_agreement import figure_words, named


def last_of(window: MainWindow, label: str):
    return [record for record in window.bench.records if record.label == label][-1]


def check_last_of_each(qtbot, window: MainWindow, tmp_path: Path, stage: str) -> None:
    """Throughput and Memory show the last run of A and of B, in the order they ended,
    and their exports name those two runs and no other."""
    bench, workspace = window.bench, window.workspace
    last = sorted((last_of(window, label) for label in ("A", "B")), key=bench.records.index)
    for name in ("Throughput", "Memory"):
        assert bench.plot_runs(name) == last, name
    for plot in (workspace.throughput, workspace.memory):
        tabs = workspace.tabs
        shown = tabs.currentIndex()  # the plot's tab on screen, as a user looks at it
        tabs.setCurrentIndex(
            next(i for i in range(tabs.count()) if tabs.widget(i).isAncestorOf(plot))
        )
        assert sorted(plot.run_labels) == ["A", "B"], stage
        tabs.setCurrentIndex(shown)
    assert all(workspace.throughput.point_count(label) for label in ("A", "B"))
    # The runs the heading must not name (a run whose line is a last run's is told apart
    # from it by the checks of ``plot_runs`` above, not by the heading).
    lines = {(record.run_name, record.spec) for record in last}
    others = [r for r in bench.records if (r.run_name, r.spec) not in lines]
    for name in ("Throughput", "Memory"):
        path = tmp_path / f"{stage}-{name}.svg"
        ok, text = export(
            qtbot, window, lambda p, n=name: workspace.exporter.export_plot(n, p), path
        )
        assert ok, text
        heading, _ = figure_words(path.read_bytes())
        assert all(named(heading, record) for record in last), heading
        assert not any(named(heading, record) for record in others), heading


def test_a_run_of_a_after_an_ab_keeps_the_last_run_of_b_on_the_plots(
    qtbot, window: MainWindow, small_model: Path, tmp_path: Path
):
    other = write_safetensors_model(tmp_path / "other", layers=1, hidden=64, vocab=128)
    open_model(qtbot, window, small_model)
    bench = window.bench
    for label in ("A", "B"):
        bench.configs.set(label, "pread", MEDIUM_OPTIONS)
        bench.run(label)
        wait_idle(qtbot, window)
        assert bench.records[-1].status == "ok", window.messages.message()
    check_last_of_each(qtbot, window, tmp_path, "single")

    bench.run_ab(pairs=3)
    wait_idle(qtbot, window, 90_000)
    assert [r.label for r in bench.records[-6:]] == ["A", "B"] * 3, window.messages.message()
    check_last_of_each(qtbot, window, tmp_path, "ab")

    bench.recommend(1.0)
    wait_idle(qtbot, window, 90_000)
    assert bench.recommendation.recommendation is not None, window.messages.message()
    check_last_of_each(qtbot, window, tmp_path, "recommend")

    assert bench.set_memory_limit("256Mi") is None
    bench.run("A")
    wait_idle(qtbot, window)
    assert bench.records[-1].label == "A" and bench.records[-1].status == "ok"
    check_last_of_each(
        qtbot, window, tmp_path, "limited"
    )  # the A/B's last B stays beside the new A
    assert bench.plot_runs("Throughput")[0] is last_of(window, "B")

    open_model(qtbot, window, other)
    open_model(qtbot, window, small_model)
    check_last_of_each(qtbot, window, tmp_path, "again")
