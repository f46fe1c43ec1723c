"""The page for an open model: its facts, configurations A and B, live plots and results.

It owns the LoadController and routes its signals: each tick to the progress strip and the
plots, the end of a run to the results table, the block timeline and the message bar.
One load runs at a time: two at once would measure each other.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QSplitter, QVBoxLayout, QWidget

from modelmon.core.options import LoadOptions, format_spec
from modelmon.core.result import LoadResult
from modelmon.gui.bridge import LoadController
from modelmon.gui.formatting import cache_state_text, duration_text, rate_text
from modelmon.gui.live import LiveUpdate
from modelmon.gui.model_info import ModelInfo
from modelmon.gui.plots.access_pattern import AccessPatternPlot
from modelmon.gui.plots.blocks import BlockTimelinePlot
from modelmon.gui.plots.throughput import ThroughputPlot
from modelmon.gui.widgets.model_panel import ModelPanel
from modelmon.gui.widgets.progress_strip import ProgressStrip
from modelmon.gui.widgets.results_table import ResultsTable, RunRecord
from modelmon.gui.widgets.strategy_panel import StrategyPanel

# The first comparison worth making: the planned sequential reads against the shared-fd
# mmap anti-pattern, both from a verified cold cache.
DEFAULT_CONFIGS = {
    "A": ("sequential", LoadOptions(workers=4, cache="cold")),
    "B": ("mmap-shared-fd", LoadOptions(workers=4, cache="cold")),
}


class Workspace(QWidget):
    message = Signal(str, str)  # text, level ("info" | "warning" | "error")
    running_changed = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.info: ModelInfo | None = None
        self.current_label = ""
        self.current_spec = ""
        self.model_panel = ModelPanel()
        self.panels = {label: StrategyPanel(label) for label in DEFAULT_CONFIGS}
        for label, (strategy, options) in DEFAULT_CONFIGS.items():
            panel = self.panels[label]
            panel.set_config(strategy, options)
            panel.run_requested.connect(lambda label=label: self.run(label))
        self.progress = ProgressStrip()
        self.throughput = ThroughputPlot()
        self.access = AccessPatternPlot()
        self.blocks = BlockTimelinePlot()
        self.results = ResultsTable()
        self.controller = LoadController(self)
        self.controller.tick.connect(self._on_tick)
        self.controller.finished.connect(self._on_finished)
        self.controller.failed.connect(self._on_failed)
        self.progress.cancel_requested.connect(self.cancel)
        self._layout()

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.model_panel, 5)
        top.addWidget(self.panels["A"], 4)
        top.addWidget(self.panels["B"], 4)
        plots = QSplitter(Qt.Orientation.Horizontal)
        plots.addWidget(self.throughput)
        plots.addWidget(self.access)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self.blocks)
        bottom.addWidget(self.results)
        bottom.setSizes([500, 800])
        rows = QSplitter(Qt.Orientation.Vertical)
        rows.addWidget(plots)
        rows.addWidget(bottom)
        rows.setSizes([340, 300])
        for splitter in (plots, bottom, rows):
            splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(top)
        layout.addWidget(self.progress)
        layout.addWidget(rows, 1)

    @property
    def running(self) -> bool:
        return self.controller.running

    def set_model(self, info: ModelInfo) -> None:
        """Show a newly opened model; results and plots of the previous one are cleared."""
        if self.running:
            raise RuntimeError("cancel the running load before opening another model")
        self.info = info
        self.model_panel.show_model(info)
        for panel in self.panels.values():
            panel.require_discard(not info.fits_in_ram)
        self.throughput.clear()
        self.access.set_model(info.model)
        self.blocks.set_block_order(info.model.blocks())
        self.results.results.clear()
        self.progress.stopped("idle")
        if not info.fits_in_ram:
            self.message.emit("This model does not fit in the RAM available: runs use discard "
                              "mode (stream through bounded buffers, keep nothing).", "warning")

    def run(self, label: str) -> None:
        """Start a load with configuration ``label``; ignored while one runs."""
        if self.running or self.info is None:
            return
        panel = self.panels[label]
        strategy, options = panel.strategy(), panel.options()
        self.current_label, self.current_spec = label, format_spec(strategy, options)
        self.progress.started(label, self.current_spec)
        self.throughput.start_run(label)
        self.access.start_run(f"run {label}: {self.current_spec}")
        if self.controller.start(self.info.model, strategy, options):
            self._set_running(True)

    def cancel(self) -> None:
        self.controller.cancel()

    def shutdown(self) -> bool:
        """Stop any load and wait for its workers to be gone (closing the window)."""
        stopped = self.controller.shutdown()
        self._set_running(False)
        return stopped

    def _set_running(self, running: bool) -> None:
        for panel in self.panels.values():
            panel.set_running(running)
        self.running_changed.emit(running)

    def _on_tick(self, update: LiveUpdate) -> None:
        self.progress.show_update(update)
        self.throughput.show_update(self.current_label, update)
        self.access.add_reads(update.new_reads)

    def _on_finished(self, result: LoadResult) -> None:
        label = self.current_label
        self.results.add(RunRecord(label, self.current_spec, result))
        self.blocks.show_result(label, result)
        self._set_running(False)
        if result.status == "ok":
            self.progress.stopped(f"Run {label}: {rate_text(result.mbps)} in "
                                  f"{duration_text(result.seconds)}")
            self._report_cache(label, result)
        elif result.status == "cancelled":
            self.progress.stopped(f"Run {label}: cancelled")
            self.message.emit(f"Run {label} cancelled; its workers were stopped.", "info")
        else:
            self.progress.stopped(f"Run {label}: failed")
            self.message.emit(f"Run {label} failed: {result.error}", "error")
        live = self.controller.live
        if live is not None and not all(ready.qt_free for ready in live.ready):
            self.message.emit("A worker process imported Qt: its timings may be off "
                              "(report this as a bug).", "warning")

    def _report_cache(self, label: str, result: LoadResult) -> None:
        cache = result.cache
        unmet = (cache.requested == "cold" and not cache.cold) or (
            cache.requested == "warm" and not cache.warm)
        if unmet:
            self.message.emit(f"Run {label} asked for a {cache.requested} cache but started "
                              f"{cache_state_text(cache)}: {cache.note}", "warning")
        elif result.notes:
            self.message.emit(f"Run {label}: {result.notes[0]}", "info")

    def _on_failed(self, error: str) -> None:
        label = self.current_label
        self.results.add(RunRecord(label, self.current_spec, None, error))
        self._set_running(False)
        self.progress.stopped(f"Run {label}: failed")
        self.message.emit(f"Run {label} could not run: {error}", "error")
