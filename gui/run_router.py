"""Where the controller's reports go, and the running load's frame tick.

Each load's start sets up its ``LiveView`` (reads by cursor from the load's own ``ReadLog``)
and ``MetricFeed`` (the sampler's series); a QTimer then ticks every TICK_MS while it runs:
the progress strip follows every tick, the plots redraw at the pacer's rate. A run's end
takes the final update and puts the run in the results table; a job's end shows the
verdict, the ceilings or the recommendation in the message bar.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, QTimer, SignalInstance

from modelmon.core import ABResult, Ceiling, Ceilings, LoadResult, stopped_words
from modelmon.gui.state.formatting import cache_state_text, duration_text, rate_text, verdict_text
from modelmon.gui.state.jobs import JobEnd, JobProgress, Recommended, RunStart
from modelmon.gui.state.live import AccessPoints, LiveUpdate, LiveView
from modelmon.gui.state.metrics_live import MetricFeed, MetricSnapshot
from modelmon.gui.state.model_sessions import with_ceiling
from modelmon.gui.state.pacing import FramePacer
from modelmon.gui.state.recommendation_view import recommendation_stopped
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.results_rows import cache_unmet

if TYPE_CHECKING:
    from modelmon.gui.bridge import LoadController
    from modelmon.gui.plots.access_pattern import AccessPatternPlot
    from modelmon.gui.plots.blocks import BlockTimelinePlot
    from modelmon.gui.plots.metrics import MetricPlot
    from modelmon.gui.plots.residency import ResidencyPlot
    from modelmon.gui.plots.throughput import ThroughputPlot
    from modelmon.gui.state.ab_session import ABHistory
    from modelmon.gui.state.model_info import ModelInfo
    from modelmon.gui.widgets.compare_bar import CompareBar
    from modelmon.gui.widgets.progress_strip import ProgressStrip
    from modelmon.gui.widgets.recommendation_view import RecommendationView
    from modelmon.gui.widgets.results_table import ResultsTable

TICK_MS = 40


class RouterHost(Protocol):
    """What the router reads and updates of the window's workspace (``gui/workspace.py``),
    which owns it: named here so that the router does not import the workspace."""

    message: SignalInstance
    state_changed: SignalInstance
    controller: LoadController
    info: ModelInfo | None
    ceilings: Ceilings | None
    ab_history: ABHistory
    recommend_budget_s: float
    progress: ProgressStrip
    compare: CompareBar
    recommendation: RecommendationView
    results: ResultsTable
    throughput: ThroughputPlot
    access: AccessPatternPlot
    blocks: BlockTimelinePlot
    residency: ResidencyPlot
    metric_plots: Sequence[MetricPlot]

    def set_running(self, running: bool) -> None: ...


class RunRouter(QObject):
    def __init__(self, workspace: RouterHost, parent: QObject) -> None:
        super().__init__(parent)
        self.w = workspace
        self.label = ""  # of the load running now
        self.job_started = 0.0
        self.view: LiveView | None = None  # of the load running now
        self.feed: MetricFeed | None = None
        self.last_update: LiveUpdate | None = None  # the latest shown, of this or the last load
        self.workers_qt_free = True  # of the last load that ended
        self.pairs_done = 0  # of the running A/B: pairs whose B run completed
        self.ab_pairs = 0  # of the running A/B: pairs asked for
        # The progress strip follows every tick; the plots redraw at the pacer's rate.
        self.pacer = FramePacer(TICK_MS / 1000)
        self.pending_reads: list[AccessPoints] = []
        self.timer = QTimer(self)
        self.timer.setInterval(TICK_MS)
        self.timer.timeout.connect(self.on_tick)
        controller = workspace.controller
        controller.run_started.connect(self.on_run_started)
        controller.run_finished.connect(self.on_run_finished)
        controller.job_progress.connect(self.on_job_progress)
        controller.ceiling.connect(self.on_ceiling)
        controller.job_finished.connect(self.on_job_finished)

    # --- one load ---------------------------------------------------------------------------

    def on_run_started(self, start: RunStart) -> None:
        w = self.w
        self.label = start.label
        self.view = LiveView(start.session.load)
        self.feed = MetricFeed(start.label, start.session)
        self.last_update = None
        self.pending_reads = []
        name = start.label
        if start.pair is not None:
            name = f"{start.label} · pair {start.pair + 1}/{start.pairs}"
        w.progress.started(name, start.spec)
        w.throughput.start_run(start.label)
        w.access.start_run(f"run {name}", start.spec, start.label)
        for plot in w.metric_plots:
            plot.start_run(start.label)
        w.residency.start_run(start.label, start.spec)
        self.timer.start()

    def on_tick(self) -> None:
        """The frame tick: what the running load did since the last one."""
        if self.view is not None:
            self._show(self.view.update(time.perf_counter_ns()))
        if self.feed is not None:
            snapshot = self.feed.poll()
            if snapshot is not None:
                self.show_metrics(snapshot)

    def _show(self, update: LiveUpdate) -> None:
        w = self.w
        self.last_update = update
        if len(update.new_reads):
            self.pending_reads.append(update.new_reads)
        redraw = self.pacer.tick(time.monotonic())
        if update.phase == "done" or redraw:
            w.throughput.show_update(self.label, update)  # its bins so far: the latest will do
            reads, self.pending_reads = AccessPoints.concat(self.pending_reads), []
            w.access.add_reads(reads)
        # Last: QProgressBar.setValue repaints at once (not at the next event loop turn), and
        # that paints every widget marked dirty so far. After the plots' updates, that is one
        # paint of everything; before them, the plots would be painted twice.
        w.progress.show_update(update)

    def show_metrics(self, snapshot: MetricSnapshot) -> None:
        for plot in self.w.metric_plots:
            plot.show_snapshot(snapshot)
        self.w.residency.show_snapshot(snapshot)

    def stop_ticking(self) -> None:
        """The load ended (or the window closes): no more ticks; let go of the live load."""
        self.timer.stop()
        self.pacer.pause()
        self.view = self.feed = None

    def on_run_finished(self, record: RunRecord) -> None:
        w = self.w
        label = record.label
        view = self.view
        self.stop_ticking()
        self.workers_qt_free = True
        if view is not None and record.outcome is not None:
            self._show(view.update(time.perf_counter_ns(), final=True))
            self.show_metrics(MetricSnapshot.of_result(label, record.outcome))
            self.workers_qt_free = view.workers_qt_free
        w.results.add(record)
        w.state_changed.emit()
        result = record.result
        if record.pair is not None and label == "B" and result is not None:
            self.pairs_done = record.pair + 1 if result.status == "ok" else self.pairs_done
        if result is None:
            w.progress.stopped(f"Run {label}: could not run")
            w.message.emit(f"Run {label} could not run: {record.error}", "error")
            return
        w.blocks.show_result(label, result)
        if result.status == "ok":
            w.progress.stopped(
                f"Run {label}: {rate_text(result.mbps)} in {duration_text(result.seconds)}"
            )
            self._report_cache(record, result)
        elif result.status == "cancelled":
            w.progress.stopped(f"Run {label}: cancelled")
            w.message.emit(f"Run {label} cancelled; its workers were stopped.", "info")
        else:
            w.progress.stopped(f"Run {label}: failed")
            w.message.emit(f"Run {label} failed: {result.error}", "error")
        if not self.workers_qt_free:
            w.message.emit(
                "A worker process imported Qt: its timings may be off (report this as a bug).",
                "warning",
            )

    def _report_cache(self, record: RunRecord, result: LoadResult) -> None:
        cache = result.cache
        if cache_unmet(record):
            self.w.message.emit(
                f"Run {record.label} asked for a {cache.requested} cache but started "
                f"{cache_state_text(cache)}: {cache.note}",
                "warning",
            )
        elif result.notes:
            self.w.message.emit(f"Run {record.label}: {result.notes[0]}", "info")

    # --- jobs without live loads ------------------------------------------------------------

    def on_job_progress(self, progress: JobProgress) -> None:
        fraction = progress.fraction
        budget = self.w.recommend_budget_s
        if fraction is None and budget:
            fraction = (time.monotonic() - self.job_started) / budget
        self.w.progress.show_job(progress.text, fraction)
        if budget:  # a recommendation runs: its search, line by line
            self.w.recommendation.show_progress(progress.text)

    def on_ceiling(self, ceiling: Ceiling) -> None:
        w = self.w
        self.set_ceilings(with_ceiling(w.ceilings, w.info.model.path if w.info else "", ceiling))

    def set_ceilings(self, ceilings: Ceilings | None) -> None:
        w = self.w
        w.ceilings = ceilings
        w.throughput.set_ceilings(ceilings)
        w.results.set_ceilings(ceilings)
        w.compare.show_ceilings(ceilings)
        w.state_changed.emit()

    # --- the end of a job -------------------------------------------------------------------

    def on_job_finished(self, end: JobEnd) -> None:
        w = self.w
        if end.kind == "ab":
            self._ab_finished(end)
        elif end.kind == "ceilings":
            if end.error is None:  # shown in the compare bar, the plot and the results
                w.progress.stopped("Ceilings measured")
            else:
                w.progress.stopped("Ceilings: " + ("cancelled" if end.cancelled else "failed"))
                w.message.emit(
                    f"Measuring the ceilings stopped: {end.error}",
                    "info" if end.cancelled else "error",
                )
        elif end.kind == "recommend":
            w.recommend_budget_s = 0.0
            if isinstance(end.value, Recommended):
                rec = end.value.recommendation
                # The window's ceilings and the recommendation's are one set: any it measured
                # (those the window lacked) join the window's.
                if w.info is not None and rec.ceilings.model == w.info.model.path:
                    known = w.ceilings or Ceilings(rec.ceilings.model, ())
                    self.set_ceilings(known.merged(rec.ceilings))
                saved = end.value
                w.recommendation.show_recommendation(
                    rec, saved.path, saved.name, saved.failure, saved.explanation
                )
                w.progress.stopped(f"Recommended: {rec.used.spec}")
                head = f"Recommended {rec.used.spec} ({rate_text(rec.used.median_mbps)})"
                if saved.failure is None:
                    where, level = f"written to {saved.path}", "info"
                elif saved.path:  # the measurement is kept: say where, as a warning
                    where, level = f"{saved.failure}; kept in {saved.path}", "warning"
                else:
                    where, level = f"{saved.failure}; not kept anywhere", "error"
                w.message.emit(f"{head}; {where}; the Recommendation tab says why", level)
            else:
                bar, tab, message = recommendation_stopped(end.cancelled, str(end.error))
                w.progress.stopped(bar)
                w.recommendation.stopped(tab)
                w.message.emit(message, "info" if end.cancelled else "error")
        w.set_running(False)

    def _ab_finished(self, end: JobEnd) -> None:
        w = self.w
        # A cancel that lands between two runs lets run_ab return a verdict over the pairs
        # done so far; the user asked to stop, so that is reported as cancelled too.
        if isinstance(end.value, ABResult) and not end.cancelled:
            ab = end.value
            w.ab_history.finish(ab)
            w.compare.show_verdict(ab)
            # The verdict is shown large in the compare bar: no message repeating it.
            pairs = min(ab.a.runs, ab.b.runs)
            w.progress.stopped(f"A/B × {pairs}: {verdict_text(ab.verdict, pairs)}")
            w.state_changed.emit()
            return
        pairs = self.ab_pairs
        if end.cancelled:
            w.compare.show_failure(stopped_words(True, self.pairs_done, pairs))
            w.progress.stopped("A/B cancelled")
            w.message.emit("A/B cancelled; its workers were stopped.", "info")
        else:
            w.compare.show_failure(stopped_words(False, self.pairs_done, pairs))
            w.progress.stopped("A/B stopped")
            w.message.emit(f"A/B stopped, no verdict: {end.error}", "error")
