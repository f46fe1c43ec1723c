"""The sampler's series in the window: IO wait, CPU, memory, device reads, page-cache maps."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from modelmon.core.runs import MetricSpec, SessionResult
from modelmon.gui.main_window import MainWindow
from modelmon.gui.plots.metrics import device_plot, memory_plot
from modelmon.gui.state.colours import RUN_COLOURS
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.results_rows import PEAK_RSS

from ...core.measuring.records import run
from ..conftest import MEDIUM_OPTIONS, open_model, wait_idle


def test_runs_of_a_and_b_fill_the_metric_plots(qtbot, window: MainWindow, slow_model: Path):
    open_model(qtbot, window, slow_model)
    workspace = window.workspace
    for label, strategy in (("A", "sequential"), ("B", "pread")):
        workspace.panels[label].set_config(strategy, MEDIUM_OPTIONS)
        workspace.bench.run(label)
        wait_idle(qtbot, window)
    assert [r.status for r in workspace.bench.records] == ["ok", "ok"]
    # Plots on a hidden tab draw when shown: show each tab, as a user would.
    workspace.tabs.setCurrentIndex(1)
    for plot in (workspace.iowait, workspace.cpu, workspace.memory):
        assert plot.point_count("A") > 0 and plot.point_count("B") > 0, plot.base_title
        assert {label for label, _ in plot.curves} == {"A", "B"}
    # Both runs keyed in their colours ("run A", or "A" where the plot is narrow).
    title = workspace.memory.item.titleLabel.text
    assert all(RUN_COLOURS[label] in title for label in "AB"), title
    assert workspace.memory.right_box is not None and workspace.memory.right_top
    assert workspace.cpu.plot.toolTip()  # the sampler's own description of each series
    workspace.tabs.setCurrentIndex(2)
    assert workspace.device.point_count("B") > 0  # the load's own MB/s at least
    residency = workspace.residency
    assert residency.label == "B" and residency.images
    image = next(iter(residency.images.values())).image
    assert image.shape[0] >= 2 and np.nanmax(image) <= 1.0
    assert "resident" in residency.item.titleLabel.text
    # Peak RSS comes from the sampled workers_rss.
    rss = workspace.results.results.cell_text(workspace.bench.records[0], PEAK_RSS)
    assert rss.endswith(("MiB", "GiB")), rss  # memory, in the units of RAM


def test_no_block_device_is_a_note_not_a_zero_line(qtbot):
    plot = device_plot()
    qtbot.addWidget(plot)
    plot.show()
    reason = "no block device: fuse.rclone on /mnt/model (a FUSE daemon serves the file)"
    times = np.array([0.1, 0.2, 0.3])
    snapshot = MetricSnapshot(
        "A",
        {"load_mbps": (times, np.array([100.0, 120.0, 90.0]))},
        {"load_mbps": MetricSpec("load_mbps", "MB/s", "Bytes the load completed per second.")},
        {"device": reason},
    )
    plot.show_snapshot(snapshot)
    assert plot.note.isVisible() and reason in plot.note.text()
    assert ("A", "device_read_mbps") not in plot.curves  # no curve at all, not zeros
    assert plot.point_count("A") == 3  # the load's own rate is still shown


def test_a_run_over_before_the_second_sample_says_why_its_plot_is_empty(qtbot):
    plot = device_plot()
    qtbot.addWidget(plot)
    plot.show()
    spec = {"load_mbps": MetricSpec("load_mbps", "MB/s", "Bytes the load completed per second.")}
    one_look = {"load_mbps": (np.array([0.1]), np.array([900.0]))}
    short = MetricSnapshot("B", one_look, spec, {}, final=True, interval_s=0.1, seconds=0.025)
    plot.show_snapshot(short)
    assert plot.note.isVisible(), "a lone sample draws no line: the note says why"
    assert plot.note.text() == (
        "run B took 25 ms: over before the sampler's second look (one every 100 ms; "
        "View ▸ Sample metrics every)"
    )
    live = MetricSnapshot("B", one_look, spec, {}, interval_s=0.1, seconds=0.025)
    plot.start_run("B")
    plot.show_snapshot(live)  # a live run may yet get its second sample
    assert not plot.note.isVisible()
    times = np.array([0.1, 0.2])
    two = {"load_mbps": (times, np.array([900.0, 950.0]))}
    plot.show_snapshot(MetricSnapshot("B", two, spec, {}, final=True, interval_s=0.1, seconds=0.2))
    assert not plot.note.isVisible() and plot.point_count("B") == 2


def test_a_run_cancelled_or_failed_before_the_second_sample_says_so(qtbot):
    # A stopped load's result has no time of its own until a worker ends: 0 s here. Its plots
    # say how it ended, as the throughput key ("run B (cancelled)") and the results row do.
    spec = {
        "load_mbps": MetricSpec("load_mbps", "MB/s", "Bytes the load completed per second."),
        "workers_rss": MetricSpec("workers_rss", "bytes", "The workers' RSS together."),
    }
    one_look = {name: (np.array([0.1]), np.array([900.0])) for name in spec}
    for plot in (device_plot(), memory_plot()):  # of the Disk and the CPU & memory tabs
        qtbot.addWidget(plot)
        plot.show()
        for status, said in (("cancelled", "was cancelled"), ("failed", "failed")):
            result = dataclasses.replace(run(500.0), status=status, seconds=0.0)
            outcome = SessionResult(result, 0.1, spec, one_look, {}, {})
            plot.start_run("B")
            plot.show_snapshot(MetricSnapshot.of_result("B", outcome))
            assert plot.note.isVisible(), "a lone sample draws no line: the note says why"
            assert plot.note.text() == (
                f"run B {said} before the sampler's second look (one every 100 ms)"
            ), plot.note.text()
