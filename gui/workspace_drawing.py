"""How the open model's page draws the state's events: a live run (its start, each frame
tick's reads and totals, its series, its end) and what is kept of runs (the results table,
the ceilings, the A/B's banner, the status line, the recommendation). The page calls these
once, when it is made; the state emits, these draw (``workspace.py`` lays the widgets out)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QTabWidget

from modelmon.core import Ceilings
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.plots.blocks import BlockTimelinePlot
from modelmon.gui.plots.cold_start import ColdStartPlot
from modelmon.gui.plots.metrics import MetricPlot
from modelmon.gui.plots.residency import ResidencyPlot
from modelmon.gui.plots.throughput import ThroughputPlot
from modelmon.gui.state.cold_start_view import ab_cold_starts, cold_start_shown
from modelmon.gui.state.live_run import Frame, Shown
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.recommending import RecommendationShown
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.run_replay import Replay
from modelmon.gui.state.workbench import Workbench
from modelmon.gui.widgets.compare_bar import CompareBar
from modelmon.gui.widgets.progress_strip import ProgressStrip
from modelmon.gui.widgets.recommendation_view import RecommendationView
from modelmon.gui.widgets.results_table import ResultsTable


class Page(Protocol):
    """What of the page (``workspace.Workspace``) the state's events are drawn on."""

    bench: Workbench
    tabs: QTabWidget
    progress: ProgressStrip
    compare: CompareBar
    throughput: ThroughputPlot
    access: AccessPatternPlot
    blocks: BlockTimelinePlot
    metric_plots: tuple[MetricPlot, ...]
    residency: ResidencyPlot
    cold_start: ColdStartPlot
    results: ResultsTable
    recommendation: RecommendationView
    timer: QTimer


def start_plots(page: Page, shown: Shown) -> None:
    """A run's curves, reads and pictures start again (its label's replace the last)."""
    page.throughput.start_run(shown.label)
    reader = "process" if shown.watched else "worker"
    page.access.start_run(shown.name, shown.spec, shown.label, reader)
    for plot in page.metric_plots:
        plot.start_run(shown.label)
    page.residency.start_run(shown.label, shown.spec)


def show_series(page: Page, snapshot: MetricSnapshot) -> None:
    for plot in page.metric_plots:
        plot.show_snapshot(snapshot)
    page.residency.show_snapshot(snapshot)


def end_plots(page: Page, record: RunRecord) -> None:
    """What a run's end adds: its blocks, its cold start, how it ended in its key."""
    if record.outcome is not None:
        page.blocks.show_record(record)
    # An A/B's run of a server: both sides' last cold starts, side by side, once both are.
    both = ab_cold_starts([*page.bench.records, record]) if record.session is not None else None
    shown = both or cold_start_shown(record)
    if shown is not None and (shown.lanes or shown.ready_s is not None):
        page.cold_start.show(shown)
    if record.status != "ok":  # its curve says how it ended, not just "run A"
        page.throughput.mark_run(record.label, record.status)


def bind_live(page: Page) -> None:
    """The live run: its start, each frame tick's reads and totals, its series; and
    finished runs drawn again, as their ends left the plots."""
    bench = page.bench
    live = bench.live

    def started(shown: Shown) -> None:
        # A run or a watch started from the Recommendation tab is seen where it is drawn.
        if page.tabs.currentWidget() is page.recommendation:
            page.tabs.setCurrentIndex(0)
        start_plots(page, shown)
        page.progress.started(shown)
        page.timer.start()

    def frame(frame: Frame) -> None:
        if frame.redraw:
            page.throughput.show_update(frame.label, frame.update)
            page.access.add_reads(frame.reads)
        # Last: QProgressBar.setValue repaints at once (not at the next event loop turn), and
        # that paints every widget marked dirty so far. After the plots' updates, that is one
        # paint of everything; before them, the plots would be painted twice.
        page.progress.show_update(frame.update)

    live.started.connect(started)
    live.frame.connect(frame)
    live.metrics.connect(lambda snapshot: show_series(page, snapshot))
    live.ended.connect(page.timer.stop)
    bench.run_ended.connect(lambda record: end_plots(page, record))

    def replayed(replays: list[Replay]) -> None:
        for again in replays:
            start_plots(page, again.shown)
            page.throughput.show_update(again.shown.label, again.update)
            page.access.add_reads(again.reads)
            show_series(page, again.snapshot)
            end_plots(page, again.record)

    bench.runs_replayed.connect(replayed)


def bind_results(page: Page) -> None:
    """The finished runs, the ceilings, the A/B's banner, the status line, the answer."""
    bench = page.bench

    def reset(records: list[RunRecord]) -> None:
        page.results.results.clear()
        for record in records:
            page.results.add(record)

    bench.runs.added.connect(page.results.add)
    page.results.run_picked.connect(bench.show_run)
    bench.runs.reset.connect(reset)

    def ceilings(value: Ceilings | None) -> None:
        page.throughput.set_ceilings(value)
        page.results.set_ceilings(value)
        page.compare.show_ceilings(value)

    bench.ceilings.changed.connect(ceilings)
    bench.ab.changed.connect(page.compare.show_banner)
    bench.status.changed.connect(page.progress.show_line)

    def recommendation(shown: RecommendationShown) -> None:
        page.recommendation.draw(shown)
        if shown.phase == "running" and not shown.lines:
            page.tabs.setCurrentWidget(page.recommendation)  # the search, as it runs

    bench.recommendation.changed.connect(recommendation)
