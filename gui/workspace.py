"""The page for an open model: its facts, configurations A and B, A/B × n, live plots, results.

It owns the LoadController and starts its jobs (a load, an A/B, the ceilings, a
recommendation); ``RunRouter`` routes what they report to the widgets. One job runs at a
time: two loads at once would measure each other.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import (
    QFrame,
    QScrollArea,
    QSplitter,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from modelmon.core import Ceilings, Config, LoadOptions, OptionsError
from modelmon.gui.bridge import LoadController
from modelmon.gui.exporter import Exporter
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.plots.blocks import BlockTimelinePlot
from modelmon.gui.plots.metrics import cpu_plot, device_plot, iowait_plot, memory_plot
from modelmon.gui.plots.residency import ResidencyPlot
from modelmon.gui.plots.style import ThemedPlot
from modelmon.gui.plots.throughput import ThroughputPlot
from modelmon.gui.run_router import RunRouter
from modelmon.gui.state.ab_session import ABHistory, ab_cache
from modelmon.gui.state.jobs import (
    SAMPLE_INTERVAL_S,
    ABJob,
    CeilingsJob,
    Job,
    RecommendJob,
    SingleRun,
)
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.model_sessions import ModelResults, ModelSessions
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.row_heights import RowNeeds, row_heights
from modelmon.gui.widgets.compare_bar import CompareBar
from modelmon.gui.widgets.model_panel import ModelPanel
from modelmon.gui.widgets.progress_strip import ProgressStrip
from modelmon.gui.widgets.recommendation_view import RecommendationView
from modelmon.gui.widgets.results_table import ResultsTable
from modelmon.gui.widgets.strategy_panel import StrategyPanel
from modelmon.gui.widgets.top_row import TopRow

# The first comparison worth making, four readers each, from a verified cold cache: modelmon's
# default (planned sequential reads, four threads, each its own descriptor) against the
# anti-pattern of the seed story (four processes mapping one shared descriptor).
DEFAULT_CONFIGS = {
    "A": ("sequential", LoadOptions(cache="cold")),
    "B": ("mmap-shared-fd", LoadOptions(workers=4, threads=1, cache="cold")),
}
CEILING_REPEATS = 3
# The window's rows: the top (facts, configurations) may shrink to TOP_MIN_HEIGHT px and
# scroll; the results table shows RESULT_ROWS runs when there is room, RESULT_MIN_ROWS at least.
# At TOP_MIN_HEIGHT a configuration shows its title and the row with its strategy and its Run
# button. In a tall window the results grow to RESULT_MAX_ROWS runs once the plots have
# PLOT_COMFORT_HEIGHT px.
TOP_MIN_HEIGHT = 84
RESULT_ROWS = 4
RESULT_MIN_ROWS = 1
RESULT_MAX_ROWS = 12
PLOT_COMFORT_HEIGHT = 320
MIDDLE_SPACING = 4  # px between the progress strip, the A/B bar and the tabs
TOP_SLACK = 4  # px: a scroll area exactly as tall as its content may still show a scroll bar
MODEL_PANEL_MIN_WIDTH = 200  # narrower, its facts wrap onto more lines (and it scrolls)


def scrolling(widget: QWidget, min_width: int | None = None) -> QScrollArea:
    """``widget`` at its natural size when there is room, scrolling when there is not."""
    area = QScrollArea()
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
    if min_width is not None:
        area.setMinimumWidth(min_width)
    return area


class Workspace(QWidget):
    message = Signal(str, str)  # text, level ("info" | "warning" | "error")
    running_changed = Signal(bool)
    state_changed = Signal()  # results, an A/B verdict or ceilings came or went: exports

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info: ModelInfo | None = None
        self.ab_history = ABHistory()  # this model's A/Bs: their sessions and verdicts
        self.ceilings: Ceilings | None = None
        self.ceiling_repeats = CEILING_REPEATS
        self.sample_interval_s = SAMPLE_INTERVAL_S  # the metrics' period for the next runs
        self.recommend_budget_s = 0.0  # of the recommendation running, for its progress bar
        self.sessions = ModelSessions()  # the results of the other models opened
        self.plots_show_ab = False  # the run plots show an A/B's runs (a single run clears them)
        self.model_panel = ModelPanel()
        self.panels = {label: StrategyPanel(label) for label in DEFAULT_CONFIGS}
        for label, (strategy, options) in DEFAULT_CONFIGS.items():
            panel = self.panels[label]
            panel.set_config(strategy, options)
            panel.run_requested.connect(lambda label=label: self.run(label))
        self.progress = ProgressStrip()
        self.compare = CompareBar()
        self.compare.ab_requested.connect(self.run_ab)
        self.compare.ceilings_requested.connect(self.measure_ceilings)
        self.throughput = ThroughputPlot()
        self.access = AccessPatternPlot()
        self.blocks = BlockTimelinePlot()
        self.iowait, self.cpu, self.memory = iowait_plot(), cpu_plot(), memory_plot()
        self.device = device_plot()
        self.metric_plots = (self.iowait, self.cpu, self.memory, self.device)
        self.residency = ResidencyPlot()
        self.results = ResultsTable()
        self.recommendation = RecommendationView()
        self.controller = LoadController(self)
        self.router = RunRouter(self, self)
        self.exporter = Exporter(self, self)
        self.progress.cancel_requested.connect(self.cancel)
        self._layout()
        self.compare.set_enabled(False)

    @property
    def plots(self) -> dict[str, ThemedPlot]:
        """Every plot by the name the Export menu shows."""
        return {
            "Throughput": self.throughput,
            "Access pattern": self.access,
            "IO wait": self.iowait,
            "Worker CPU": self.cpu,
            "Memory": self.memory,
            "Device reads": self.device,
            "Page cache": self.residency,
            "Blocks": self.blocks,
        }

    def _layout(self) -> None:
        # The model facts and the two configurations keep their natural size and scroll
        # when the window is smaller: squeezed, their rows would be drawn over each other.
        self.model_scroll = scrolling(self.model_panel, MODEL_PANEL_MIN_WIDTH)
        top_row = TopRow(self.model_scroll, (self.panels["A"], self.panels["B"]))
        self.top_scroll = scrolling(top_row)
        top_row.watch(self.top_scroll.viewport())
        self.top_scroll.setMinimumHeight(TOP_MIN_HEIGHT)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        for title, plots, tip in (
            (
                "Throughput",
                (self.throughput, self.access),
                "MB/s of the last run of A and of B, and where each read of the current run went.",
            ),
            (
                "CPU && memory",
                (self.iowait, self.cpu, self.memory),
                "IO wait, the workers' CPU and memory, sampled every 100 ms unless View ▸ Sample "
                "metrics every says otherwise.",
            ),
            (
                "Disk && page cache",
                (self.device, self.residency),
                "What the block device read, and the model's pages filling the page cache.",
            ),
            ("Blocks", (self.blocks,), "When each block (layer) was loaded, A against B."),
        ):
            splitter = QSplitter(Qt.Orientation.Horizontal)
            splitter.setChildrenCollapsible(False)
            for plot in plots:
                splitter.addWidget(plot)
                plot.min_height_changed.connect(self._refit_rows)
            # Blocks: one labelled row per block, so the plot is as tall as the model needs
            # and the tab scrolls (up and down only; the time axis is on top).
            page = splitter
            if plots == (self.blocks,):
                page = scrolling(splitter)
                page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            index = self.tabs.addTab(page, title)
            self.tabs.setTabToolTip(index, tip)
        index = self.tabs.addTab(self.recommendation, "Recommendation")
        self.tabs.setTabToolTip(
            index, "The last recommendation: its search, explanation, ranking and apply snippets."
        )
        middle = QWidget()
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.setSpacing(MIDDLE_SPACING)
        middle_layout.addWidget(self.progress)
        middle_layout.addWidget(self.compare)
        middle_layout.addWidget(self.tabs, 1)
        # One vertical splitter: the user moves the room between the facts, the plots and
        # the results; on resize the plots give and take first.
        self.rows = QSplitter(Qt.Orientation.Vertical)
        self.rows.addWidget(self.top_scroll)
        self.rows.addWidget(middle)
        self.rows.addWidget(self.results)
        self.rows.setChildrenCollapsible(False)
        for index, stretch in enumerate((0, 1, 0)):
            self.rows.setStretchFactor(index, stretch)
        self.rows.setSizes([top_row.sizeHint().height(), 400, 120])
        self.rows_user_sized = False  # the user dragged a handle: their sizes stay
        self.rows.splitterMoved.connect(self._rows_moved)
        self.state_changed.connect(self._refit_rows)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.rows, 1)

    def _rows_moved(self, _position: int, _index: int) -> None:
        self.rows_user_sized = True

    def _refit_rows(self) -> None:
        """A plot's caption wrapped onto more (or fewer) lines, or a run came: share the
        height again (unless the user has)."""
        if not self.rows_user_sized and self.isVisible():
            self.fit_rows()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if not self.rows_user_sized:
            self.fit_rows()

    def fit_rows(self) -> None:
        """Share the height: plots readable, a few result rows, the top up to its size."""
        # The facts and configurations as tall as they want at this width (wrapped lines
        # included); the model facts scroll on their own when taller than the configurations.
        top_row = self.top_scroll.widget()
        width = self.top_scroll.viewport().width()
        top_natural = top_row.heightForWidth(width) if top_row.hasHeightForWidth() else -1
        if top_natural <= 0:
            top_natural = top_row.sizeHint().height()
        header = self.results.horizontalHeader().sizeHint().height()
        row = self.results.verticalHeader().defaultSectionSize()
        # The frame, and the room of a horizontal scroll bar (narrow windows): never a row's.
        frame = 2 * self.results.frameWidth() + self.results.style().pixelMetric(
            QStyle.PixelMetric.PM_ScrollBarExtent
        )
        bars = (
            self.progress.sizeHint().height()
            + self.compare.sizeHint().height()
            + self._tab_chrome()
            + 2 * MIDDLE_SPACING
        )
        # The tallest a plot needs (its caption's lines included), but the Blocks plot's: its
        # tab scrolls.
        plots = max(p.minimumHeight() for p in self.plots.values() if p is not self.blocks)
        runs = min(RESULT_MAX_ROWS, max(RESULT_ROWS, len(self.records)))
        needs = RowNeeds(
            top_natural=top_natural + TOP_SLACK,
            top_min=TOP_MIN_HEIGHT,
            middle_min=bars + plots,
            results_natural=header + RESULT_ROWS * row + frame,
            results_min=header + RESULT_MIN_ROWS * row + frame,
            results_full=header + runs * row + frame,
            middle_comfort=bars + PLOT_COMFORT_HEIGHT,
        )
        # From this widget's own height: the splitter may not have been resized yet.
        margins = self.layout().contentsMargins()
        total = self.height() - margins.top() - margins.bottom() - 2 * self.rows.handleWidth()
        self.results.setMinimumHeight(needs.results_min)
        self.rows.setSizes(list(row_heights(total, needs)))

    def _tab_chrome(self) -> int:
        """What the tabs take above and around a page: the tab bar and the frame."""
        page = self.tabs.currentWidget()
        if page is not None and page.height() > 0 and self.tabs.height() > page.height():
            return self.tabs.height() - page.height()
        return self.tabs.tabBar().sizeHint().height()

    @property
    def running(self) -> bool:
        return self.controller.running

    @property
    def records(self) -> list[RunRecord]:
        return self.results.results.records

    def set_model(self, info: ModelInfo) -> None:
        """Show a newly opened model. The previous model's runs, A/B and ceilings are kept
        for when it is opened again; this model's own (if it was open before) come back."""
        if self.running:
            raise RuntimeError("cancel the running job before opening another model")
        if self.info is not None:
            self.sessions.stash(
                self.info.path,
                ModelResults(list(self.records), self.ab_history.result, self.ceilings),
            )
        kept = self.sessions.take(info.path)
        self.info = info
        self.model_panel.show_model(info)
        for panel in self.panels.values():
            panel.require_discard(not info.fits_in_ram)
            panel.set_readahead_unavailable(info.readahead_unavailable)
        self.clear_run_plots()
        self.access.set_model(info.model)
        self.residency.set_model(info.model)
        self.blocks.set_block_order(info.model.blocks())
        self.results.results.clear()
        for record in kept.records:
            self.results.add(record)
        self.ab_history.restore(kept.ab_result)
        self.router.set_ceilings(kept.ceilings)
        self.compare.clear_verdict()
        if kept.ab_result is not None:
            self.compare.show_verdict(kept.ab_result)
        self.compare.set_enabled(True)
        self.recommendation.clear()
        self.progress.stopped("idle")
        if not info.fits_in_ram:
            self.message.emit(
                "This model does not fit in the RAM available: runs use discard "
                "mode (stream through bounded buffers, keep nothing).",
                "warning",
            )

    def clear_run_plots(self) -> None:
        """Empty every plot of runs, keys included (the model's axes and ceilings stay)."""
        self.throughput.clear()
        self.access.start_run("")
        self.residency.start_run("", "")
        for plot in self.metric_plots:
            plot.clear()
        self.blocks.set_block_order(self.info.model.blocks() if self.info else [])
        self.plots_show_ab = False

    # --- starting jobs ------------------------------------------------------------------------

    def run(self, label: str) -> None:
        """Load once with configuration ``label``; ignored while a job runs."""
        if self.running or self.info is None:
            return
        if self.plots_show_ab:  # a single run is compared with single runs, never an A/B's
            self.clear_run_plots()
        panel = self.panels[label]
        self._start(SingleRun(self.info.model, label, panel.strategy(), panel.options()))

    def run_ab(self, pairs: int, cache: str | None = None) -> None:
        """A B A B … ``pairs`` pairs from the same verified cache state, then the verdict.

        The state is ``cache`` when given, else A's and B's Cache setting (they must agree).
        """
        if self.running or self.info is None:
            return
        a, b = (
            Config(self.panels[side].strategy(), self.panels[side].options()) for side in ("A", "B")
        )
        if cache is None:
            try:
                cache = ab_cache(a.options, b.options)
            except OptionsError as exc:
                self.message.emit(str(exc), "warning")
                return
        # The plots show this A/B's runs only: never a run of an earlier one beside them.
        self.clear_run_plots()
        self.plots_show_ab = True
        session = self.ab_history.start(time.strftime("%H:%M:%S"))  # no last verdict until it ends
        self.state_changed.emit()
        self._start(ABJob(self.info.model, a, b, pairs, cache, session))
        self.router.ab_pairs = pairs
        self.compare.show_running(pairs)

    def measure_ceilings(self) -> None:
        if self.running or self.info is None:
            return
        self._start(CeilingsJob(self.info.model, self.ceiling_repeats))
        self.progress.show_job("Measuring ceilings…", 0.0)

    def recommend(self, budget_s: float, path: str) -> None:
        """Search for the best configuration within ``budget_s``, write it to ``path``."""
        if self.running or self.info is None:
            return
        self.recommend_budget_s = budget_s
        self._start(RecommendJob(self.info.model, budget_s, path, ceilings=self.ceilings))
        self.progress.show_job(f"Recommending (budget {budget_s:.0f} s)…", 0.0)
        self.recommendation.started(budget_s)
        self.tabs.setCurrentWidget(self.recommendation)

    def _start(self, job: Job) -> None:
        """Start ``job``: what the last one left (its verdict or banner, a full bar) goes."""
        self.compare.clear_verdict()
        self.progress.reset()
        job.sample_interval_s = self.sample_interval_s
        self.router.job_started = time.monotonic()
        self.router.pairs_done = 0
        self.controller.start(job)
        self.set_running(True)

    def cancel(self) -> None:
        self.controller.cancel()

    def shutdown(self) -> bool:
        """Stop any job and wait for its workers to be gone (closing the window)."""
        stopped = self.controller.shutdown()
        self.router.stop_ticking()
        self.exporter.shutdown()
        self.set_running(False)
        return stopped

    def set_running(self, running: bool) -> None:
        for panel in self.panels.values():
            panel.set_running(running)
        self.compare.set_enabled(not running and self.info is not None)
        self.progress.cancel_button.setEnabled(running)
        self.running_changed.emit(running)
