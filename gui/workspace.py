"""The page for an open model: its facts, configurations A and B, A/B × n, live plots, results.

It owns the LoadController and starts its jobs (a load, an A/B, the ceilings, a
recommendation); ``RunRouter`` routes what they report to the widgets. One job runs at a
time: two loads at once would measure each other.
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QTabWidget, QVBoxLayout, QWidget

from modelmon.core.errors import OptionsError
from modelmon.core.measuring.ab import ABResult, Config
from modelmon.core.measuring.ceilings import Ceilings
from modelmon.core.options import LoadOptions
from modelmon.gui.bridge import LoadController
from modelmon.gui.exporter import Exporter
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.plots.blocks import BlockTimelinePlot
from modelmon.gui.plots.metrics import cpu_plot, device_plot, iowait_plot, memory_plot
from modelmon.gui.plots.residency import ResidencyPlot
from modelmon.gui.plots.style import ThemedPlot
from modelmon.gui.plots.throughput import ThroughputPlot
from modelmon.gui.run_router import RunRouter
from modelmon.gui.state.ab_session import ab_cache
from modelmon.gui.state.jobs import ABJob, CeilingsJob, Job, RecommendJob, SingleRun
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.records import RunRecord
from modelmon.gui.widgets.compare_bar import CompareBar
from modelmon.gui.widgets.model_panel import ModelPanel
from modelmon.gui.widgets.progress_strip import ProgressStrip
from modelmon.gui.widgets.results_table import ResultsTable
from modelmon.gui.widgets.strategy_panel import StrategyPanel

# The first comparison worth making: the planned sequential reads against the shared-fd
# mmap anti-pattern, both from a verified cold cache.
DEFAULT_CONFIGS = {
    "A": ("sequential", LoadOptions(workers=4, cache="cold")),
    "B": ("mmap-shared-fd", LoadOptions(workers=4, cache="cold")),
}
CEILING_REPEATS = 3


class Workspace(QWidget):
    message = Signal(str, str)  # text, level ("info" | "warning" | "error")
    running_changed = Signal(bool)
    state_changed = Signal()  # results, an A/B verdict or ceilings came or went: exports

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info: ModelInfo | None = None
        self.ab_result: ABResult | None = None
        self.ceilings: Ceilings | None = None
        self.ceiling_repeats = CEILING_REPEATS
        self.recommend_budget_s = 0.0  # of the recommendation running, for its progress bar
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
        self.controller = LoadController(self)
        self.router = RunRouter(self)
        self.exporter = Exporter(self)
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
        top = QHBoxLayout()
        top.addWidget(self.model_panel, 5)
        top.addWidget(self.panels["A"], 4)
        top.addWidget(self.panels["B"], 4)
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
                "IO wait, the workers' CPU and memory, sampled every 100 ms.",
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
            index = self.tabs.addTab(splitter, title)
            self.tabs.setTabToolTip(index, tip)
        rows = QSplitter(Qt.Orientation.Vertical)
        rows.addWidget(self.tabs)
        rows.addWidget(self.results)
        rows.setSizes([400, 200])
        rows.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.progress)
        layout.addWidget(self.compare)
        layout.addWidget(rows, 1)

    @property
    def running(self) -> bool:
        return self.controller.running

    @property
    def records(self) -> list[RunRecord]:
        return self.results.results.records

    def set_model(self, info: ModelInfo) -> None:
        """Show a newly opened model; results, plots and ceilings of the previous one go."""
        if self.running:
            raise RuntimeError("cancel the running job before opening another model")
        self.info = info
        self.model_panel.show_model(info)
        for panel in self.panels.values():
            panel.require_discard(not info.fits_in_ram)
        self.throughput.clear()
        self.access.set_model(info.model)
        self.residency.set_model(info.model)
        for plot in self.metric_plots:
            plot.clear()
        self.blocks.set_block_order(info.model.blocks())
        self.results.results.clear()
        self.ab_result = None
        self.router.set_ceilings(None)
        self.compare.clear_verdict()
        self.compare.set_enabled(True)
        self.progress.stopped("idle")
        if not info.fits_in_ram:
            self.message.emit(
                "This model does not fit in the RAM available: runs use discard "
                "mode (stream through bounded buffers, keep nothing).",
                "warning",
            )

    # --- starting jobs ------------------------------------------------------------------------

    def run(self, label: str) -> None:
        """Load once with configuration ``label``; ignored while a job runs."""
        if self.running or self.info is None:
            return
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
        self.compare.show_running(pairs)
        self.ab_result = None  # the export of "the last A/B's winner" must not pick an older one
        self.state_changed.emit()
        self._start(ABJob(self.info.model, a, b, pairs, cache))

    def measure_ceilings(self) -> None:
        if self.running or self.info is None:
            return
        self.progress.started("ceilings", "")
        self._start(CeilingsJob(self.info.model, self.ceiling_repeats))

    def recommend(self, budget_s: float, path: str) -> None:
        """Search for the best configuration within ``budget_s``, write it to ``path``."""
        if self.running or self.info is None:
            return
        self.recommend_budget_s = budget_s
        self.progress.show_job(f"Recommending (budget {budget_s:.0f} s)…", 0.0)
        self._start(RecommendJob(self.info.model, budget_s, path))

    def _start(self, job: Job) -> None:
        self.router.job_started = time.monotonic()
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
