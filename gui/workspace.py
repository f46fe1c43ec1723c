"""The page for an open model: its facts, configurations A and B, A/B × n, live plots, results.

The widgets, their layout, and their binding to the state: what they show is the state's
(``Workbench``, Qt-free), and what the user does goes back to it as calls. The page owns the
frame tick: a timer that, while a run is live, asks the state for its frame.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import (
    QApplication,
    QFrame,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStyle,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from modelmon.gui.exporter import Exporter
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.plots.blocks import BlockTimelinePlot
from modelmon.gui.plots.cold_start import ColdStartPlot
from modelmon.gui.plots.metrics import cpu_plot, device_plot, iowait_plot, memory_plot
from modelmon.gui.plots.residency import ResidencyPlot
from modelmon.gui.plots.style import ThemedPlot
from modelmon.gui.plots.throughput import ThroughputPlot
from modelmon.gui.state.configs import LABELS
from modelmon.gui.state.events import Post
from modelmon.gui.state.live_run import TICK_S
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.programs import is_program
from modelmon.gui.state.row_heights import RowNeeds, row_heights
from modelmon.gui.state.workbench import Workbench
from modelmon.gui.widgets.compare_bar import CompareBar
from modelmon.gui.widgets.model_panel import ModelPanel
from modelmon.gui.widgets.progress_strip import ProgressStrip
from modelmon.gui.widgets.ready_row import ReadyRow
from modelmon.gui.widgets.recommendation_view import RecommendationView
from modelmon.gui.widgets.results_table import ResultsTable
from modelmon.gui.widgets.strategy_panel import StrategyPanel
from modelmon.gui.widgets.top_row import TopRow
from modelmon.gui.workspace_drawing import bind_live, bind_results

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
RECOMMEND_TIP = (
    "Search for the best configuration of this model within a budget (Run ▸ Recommend…, "
    "Ctrl+E): the answer first, what to change, its measured gain, the line to paste."
)
# Narrower, its facts wrap onto more lines (and it scrolls). Beside a bucket's
# configurations ("Connections:" is wider than "Threads:") it still fits a 1000 px window.
MODEL_PANEL_MIN_WIDTH = 170


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
    def __init__(self, bench: Workbench, post: Post, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bench = bench
        self.model_panel = ModelPanel()
        self.panels = {label: StrategyPanel(label) for label in LABELS}
        self.progress = ProgressStrip()
        self.compare = CompareBar()
        self.ready_row = ReadyRow()  # shown while a side runs a command
        self.throughput = ThroughputPlot()
        self.access = AccessPatternPlot()
        self.blocks = BlockTimelinePlot()
        self.iowait, self.cpu, self.memory = iowait_plot(), cpu_plot(), memory_plot()
        self.device = device_plot()
        self.metric_plots = (self.iowait, self.cpu, self.memory, self.device)
        self.residency = ResidencyPlot()
        self.cold_start = ColdStartPlot()
        self.results = ResultsTable()
        self.recommendation = RecommendationView()
        self.exporter = Exporter(bench, lambda: self.plots, post, self, self.bring_up)
        # The frame tick: while a run is live, its reads and series reach the plots here.
        self.timer = QTimer(self)
        self.timer.setInterval(round(TICK_S * 1000))
        self.timer.timeout.connect(bench.live.tick)
        self._layout()
        self.compare.set_enabled(False)
        # What each widget shows is the state's: each part tells the widgets that draw it
        # when it changes, and each widget's request goes back to the state as a call. All
        # in the GUI thread (what other threads produce comes in through the GuiPoster); no
        # widget talks to another, none runs engine work.
        self._bind_inputs()
        self._bind_model()
        bind_live(self)
        bind_results(self)

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
            (
                "Cold start",
                (self.cold_start,),
                "A watched server's cold start: each rank's reading, the phases before, during "
                "and after the weights, and when it was ready.",
            ),
        ):
            splitter = QSplitter(Qt.Orientation.Horizontal)
            splitter.setChildrenCollapsible(False)
            for plot in plots:
                splitter.addWidget(plot)
                plot.min_height_changed.connect(self._refit_rows)
            # Blocks: one labelled row per block, so the plot is as tall as the model needs
            # and the tab scrolls (up and down only; the time axis is on top); the cold
            # start's lanes likewise, one per rank.
            page = splitter
            if plots in ((self.blocks,), (self.cold_start,)):
                page = scrolling(splitter)
                page.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            index = self.tabs.addTab(page, title)
            self.tabs.setTabToolTip(index, tip)
        # Recommend, in sight beside its tab (the Run menu and Ctrl+E have it too).
        self.recommend_button = QPushButton("Recommend…")
        self.recommend_button.setToolTip(RECOMMEND_TIP)
        self.recommend_button.setEnabled(False)
        self.tabs.setCornerWidget(self.recommend_button, Qt.Corner.TopRightCorner)
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
        middle_layout.addWidget(self.ready_row)
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
        # A run came or went (the results may grow): share the height again.
        self.bench.exports_changed.connect(self._refit_rows)
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

    def showEvent(self, event: QShowEvent) -> None:
        """Shown (a model opened from the start page): its facts may have changed unseen."""
        super().showEvent(event)
        if not self.rows_user_sized:
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
        # The frame, and the room of a horizontal scroll bar when the columns need one (a
        # narrow window): never a row's.
        frame = 2 * self.results.frameWidth()
        if self.results.horizontalHeader().length() > self.results.viewport().width():
            frame += self.results.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent)
        bars = (
            self.progress.sizeHint().height()
            + self.compare.sizeHint().height()
            + (self.ready_row.sizeHint().height() if self.ready_row.isVisibleTo(self) else 0)
            + self._tab_chrome()
            + 2 * MIDDLE_SPACING
        )
        # The tallest a plot needs (its caption's lines included), but the Blocks plot's: its
        # tab scrolls.
        plots = max(p.minimumHeight() for p in self.plots.values() if p is not self.blocks)
        runs = min(RESULT_MAX_ROWS, max(RESULT_ROWS, len(self.bench.runs)))
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

    def bring_up(self, plot: ThemedPlot) -> None:
        """Lay ``plot`` out and let it draw what came while its tab was not shown (a plot
        on a hidden tab keeps a run's series for when it is shown): its tab is shown and the
        one on screen back again, with no painting between, so nothing on screen changes.
        An export then paints, or takes the size and ranges of, the plot as it is."""
        current = self.tabs.currentIndex()
        for index in range(self.tabs.count()):
            if self.tabs.widget(index).isAncestorOf(plot) and index != current:
                self.tabs.setCurrentIndex(index)
                # Its layouts at the size the tab shows them (the Blocks tab's scroll bar
                # included): Qt lays a widget just shown out on the next turn of the loop.
                QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
                self.tabs.setCurrentIndex(current)
                break
        # The range its data set, as its next painting takes it (the Blocks plot's times
        # follow its bars): a plot never painted still has the range it was made with.
        plot.item.vb.prepareForPaint()

    def clear_run_plots(self) -> None:
        """Empty every plot of runs, keys included (the model's axes and ceilings stay)."""
        self.throughput.clear()
        self.access.start_run("")
        self.residency.start_run("", "")
        for plot in self.metric_plots:
            plot.clear()
        info = self.bench.info
        self.blocks.set_block_order(info.model.blocks() if info else [])
        self.cold_start.clear()

    def set_running(self, running: bool) -> None:
        for panel in self.panels.values():
            panel.set_running(running)
        self.compare.set_enabled(not running and self.bench.info is not None)
        self.recommend_button.setEnabled(not running and self.bench.info is not None)
        self.progress.cancel_button.setEnabled(running)

    def shutdown(self) -> bool:
        """Stop any job and wait for its workers to be gone (closing the window)."""
        self.timer.stop()
        stopped = self.bench.shutdown()
        self.exporter.shutdown()
        self.set_running(False)
        return stopped

    # --- the state, drawn ------------------------------------------------------------------------

    def _bind_inputs(self) -> None:
        bench = self.bench
        """The user's requests, to the state."""
        configs = bench.configs
        for label, panel in self.panels.items():
            panel.set_config(*configs.configs[label])
            panel.edited.connect(
                lambda strategy, options, label=label: configs.set(label, strategy, options)
            )
            panel.run_requested.connect(lambda label=label: bench.run(label))
        configs.changed.connect(
            lambda label: self.panels[label].set_config(*configs.configs[label])
        )

        def limits() -> None:
            for panel in self.panels.values():
                panel.set_strategies(configs.strategies())
                panel.set_format(configs.model_format)
                panel.require_discard(configs.discard_forced)
                panel.set_readahead_unavailable(configs.readahead_unavailable)

        configs.limits_changed.connect(limits)

        def ready_shown(*_: object) -> None:
            shown = any(is_program(configs.strategy(label)) for label in LABELS)
            if shown != self.ready_row.isVisibleTo(self):
                self.ready_row.setVisible(shown)
                self._refit_rows()

        configs.changed.connect(ready_shown)
        self.ready_row.edited.connect(
            lambda kind, value, timeout: bench.ready.set(kind, value, timeout)
        )
        bench.ready.changed.connect(
            lambda rule: self.ready_row.show_rule(rule, bench.ready.problem())
        )
        self.ready_row.show_rule(bench.ready.rule, bench.ready.problem())
        self.ready_row.setVisible(False)
        ready_shown()
        self.compare.set_pairs(bench.ab.pairs)
        self.compare.pairs_changed.connect(bench.ab.set_pairs)
        bench.ab.pairs_changed.connect(self.compare.set_pairs)
        self.compare.ab_requested.connect(lambda: bench.run_ab())
        self.compare.ceilings_requested.connect(bench.measure_ceilings)
        self.progress.cancel_requested.connect(bench.cancel)
        bench.running_changed.connect(self.set_running)

    def _bind_model(self) -> None:
        bench = self.bench

        def opened(info: ModelInfo) -> None:
            self.model_panel.show_model(info)
            self.clear_run_plots()
            self.access.set_model(info.model)
            self.residency.set_model(info.model)
            self.blocks.set_block_order(info.model.blocks())
            self.compare.set_enabled(not bench.running)
            self.recommend_button.setEnabled(not bench.running)
            self._refit_rows()  # the facts of another model: the top's height changes

        bench.model_opened.connect(opened)
        bench.plots_cleared.connect(self.clear_run_plots)
