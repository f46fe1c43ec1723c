"""The workspace's widgets, wired to the state: each part of the ``Workbench`` tells the
widgets that draw it when it changes, and each widget's request goes to the state as a call.

Everything here runs in the GUI thread: the state changes only there (what other threads
produce comes in through the window's ``GuiPoster``, a queued signal). No widget talks to
another, and none runs engine work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.gui.state.live_run import Frame, Shown
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.records import RunRecord

if TYPE_CHECKING:
    from modelmon.core import Ceilings
    from modelmon.gui.state.metrics_live import MetricSnapshot
    from modelmon.gui.state.recommending import RecommendationShown
    from modelmon.gui.state.workbench import Workbench
    from modelmon.gui.workspace import Workspace


def bind(w: Workspace, bench: Workbench) -> None:
    _bind_inputs(w, bench)
    _bind_model(w, bench)
    _bind_live(w, bench)
    _bind_results(w, bench)


def _bind_inputs(w: Workspace, bench: Workbench) -> None:
    """The user's requests, to the state."""
    configs = bench.configs
    for label, panel in w.panels.items():
        panel.set_config(*configs.configs[label])
        panel.edited.connect(
            lambda strategy, options, label=label: configs.set(label, strategy, options)
        )
        panel.run_requested.connect(lambda label=label: bench.run(label))
    configs.changed.connect(lambda label: w.panels[label].set_config(*configs.configs[label]))

    def limits() -> None:
        for panel in w.panels.values():
            panel.require_discard(configs.discard_forced)
            panel.set_readahead_unavailable(configs.readahead_unavailable)

    configs.limits_changed.connect(limits)
    w.compare.set_pairs(bench.ab.pairs)
    w.compare.pairs_changed.connect(bench.ab.set_pairs)
    bench.ab.pairs_changed.connect(w.compare.set_pairs)
    w.compare.ab_requested.connect(lambda: bench.run_ab())
    w.compare.ceilings_requested.connect(bench.measure_ceilings)
    w.progress.cancel_requested.connect(bench.cancel)
    bench.running_changed.connect(w.set_running)


def _bind_model(w: Workspace, bench: Workbench) -> None:
    def opened(info: ModelInfo) -> None:
        w.model_panel.show_model(info)
        w.clear_run_plots()
        w.access.set_model(info.model)
        w.residency.set_model(info.model)
        w.blocks.set_block_order(info.model.blocks())
        w.compare.set_enabled(not bench.running)

    bench.model_opened.connect(opened)
    bench.plots_cleared.connect(w.clear_run_plots)


def _bind_live(w: Workspace, bench: Workbench) -> None:
    """The live run: its start, each frame tick's reads and totals, its series."""
    live = bench.live

    def started(shown: Shown) -> None:
        w.throughput.start_run(shown.label)
        w.access.start_run(shown.name, shown.spec)
        for plot in w.metric_plots:
            plot.start_run(shown.label)
        w.residency.start_run(shown.label, shown.spec)
        w.progress.started(shown)
        w.timer.start()

    def frame(frame: Frame) -> None:
        if frame.redraw:
            w.throughput.show_update(frame.label, frame.update)
            w.access.add_reads(frame.reads)
        # Last: QProgressBar.setValue repaints at once (not at the next event loop turn), and
        # that paints every widget marked dirty so far. After the plots' updates, that is one
        # paint of everything; before them, the plots would be painted twice.
        w.progress.show_update(frame.update)

    def metrics(snapshot: MetricSnapshot) -> None:
        for plot in w.metric_plots:
            plot.show_snapshot(snapshot)
        w.residency.show_snapshot(snapshot)

    live.started.connect(started)
    live.frame.connect(frame)
    live.metrics.connect(metrics)
    live.ended.connect(w.timer.stop)

    def run_ended(record: RunRecord) -> None:
        if record.result is not None:
            w.blocks.show_result(record.label, record.result)
        if record.status != "ok":  # its curve says how it ended, not just "run A"
            w.throughput.mark_run(record.label, record.status)

    bench.run_ended.connect(run_ended)


def _bind_results(w: Workspace, bench: Workbench) -> None:
    def reset(records: list[RunRecord]) -> None:
        w.results.results.clear()
        for record in records:
            w.results.add(record)

    bench.runs.added.connect(w.results.add)
    bench.runs.reset.connect(reset)

    def ceilings(value: Ceilings | None) -> None:
        w.throughput.set_ceilings(value)
        w.results.set_ceilings(value)
        w.compare.show_ceilings(value)

    bench.ceilings.changed.connect(ceilings)
    bench.ab.changed.connect(w.compare.show_banner)
    bench.status.changed.connect(w.progress.show_line)

    def recommendation(shown: RecommendationShown) -> None:
        w.recommendation.draw(shown)
        if shown.phase == "running" and not shown.lines:
            w.tabs.setCurrentWidget(w.recommendation)  # the search, as it runs

    bench.recommendation.changed.connect(recommendation)
