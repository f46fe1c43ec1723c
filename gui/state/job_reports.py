"""What the running job's reports change: each run's start and end, progress lines, ceilings,
and the job's end (the verdict, the ceilings, the recommendation), said in words. Qt-free.

``JobReports`` is given the parts of the state it updates; the workbench connects the job
runner's events to it. Nothing here reaches into a widget: the widgets follow the parts.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core import ABResult, Ceiling, LoadResult, Model
from modelmon.core.output import recommendation_answer as answer
from modelmon.gui.state.ab_session import ABState
from modelmon.gui.state.ceilings_state import CeilingsState
from modelmon.gui.state.formatting import cache_state_text, duration_text, rate_text, verdict_text
from modelmon.gui.state.jobs import JobEnd, JobProgress, Recommended, RunStart
from modelmon.gui.state.live import LiveView
from modelmon.gui.state.live_run import LiveRun, Shown
from modelmon.gui.state.metrics_live import MetricFeed, MetricSnapshot
from modelmon.gui.state.ranks_answer_view import ranks_headline
from modelmon.gui.state.ranks_job import RanksRecommended
from modelmon.gui.state.recommendation_view import recommendation_stopped
from modelmon.gui.state.recommending import RecommendationState
from modelmon.gui.state.records import WATCH_LABEL, RunRecord
from modelmon.gui.state.results_rows import cache_unmet
from modelmon.gui.state.run_list import JobStatus, RunList
from modelmon.gui.state.watch_live import WatchFeed, WatchView, watch_words

Say = Callable[[str, str], None]  # text, level ("info" | "warning" | "error")


@dataclass
class Parts:
    live: LiveRun
    runs: RunList
    ab: ABState
    ceilings: CeilingsState
    recommendation: RecommendationState
    status: JobStatus
    say: Say
    run_ended: Callable[[RunRecord], None]  # after the record is in the list: blocks, keys


class JobReports:
    def __init__(self, parts: Parts) -> None:
        self.p = parts
        self.job_started = 0.0  # monotonic
        self.budget_s = 0.0  # of the recommendation running, for its progress bar
        self.model: Model | None = None  # the job's (a watch places its files by it)

    def begin(self, model: Model | None, budget_s: float = 0.0) -> None:
        self.job_started = time.monotonic()
        self.budget_s = budget_s
        self.model = model

    # --- one load or watch ----------------------------------------------------------------------

    def run_started(self, start: RunStart) -> None:
        name = start.label
        if start.pair is not None:
            name = f"{start.label} · pair {start.pair + 1}/{start.pairs}"
        if start.watch is not None:
            files = [(f.path, f.size) for f in self.model.files] if self.model else []
            # A program as configuration A or B is watched as File ▸ Watch watches one.
            plotted = "watch" if start.label == WATCH_LABEL else f"run {name}"
            shown = Shown(start.label, plotted, start.spec, watched=True)
            feed = WatchFeed(start.label, start.watch, [path for path, _ in files])
            self.p.live.begin(shown, WatchView(start.watch, files), feed)
        elif start.session is not None:
            shown = Shown(start.label, f"run {name}", start.spec)
            session = start.session
            self.p.live.begin(shown, LiveView(session.load), MetricFeed(start.label, session))

    def run_finished(self, record: RunRecord) -> None:
        p = self.p
        label = record.label
        final = None
        if record.sampled is not None:
            final = MetricSnapshot.of_result(label, record.sampled)
        elif record.watched is not None and isinstance(p.live.feed, WatchFeed):
            final = p.live.feed.final_snapshot(record.watched)
        p.live.finish(final)
        if record.pair is not None:
            p.ab.run_ended()
        p.runs.add(record)
        p.run_ended(record)
        if record.is_watch:
            self._watch_ended(record)
            return
        result = record.result
        if (
            record.pair is not None
            and label == "B"
            and result is not None
            and result.status == "ok"
        ):
            p.ab.pair_done(record.pair)
        if result is None:
            p.status.ended(f"Run {label}: could not run")
            p.say(f"Run {label} could not run: {record.error}", "error")
            return
        if result.status == "ok":
            p.status.ended(
                f"Run {label}: {rate_text(result.mbps)} in {duration_text(result.seconds)}"
            )
            self._report_cache(record, result)
        elif result.status == "cancelled":
            p.status.ended(f"Run {label}: cancelled")
            p.say(f"Run {label} cancelled; its workers were stopped.", "info")
        else:
            p.status.ended(f"Run {label}: failed")
            p.say(f"Run {label} failed: {result.error}", "error")
        if not p.live.workers_qt_free:
            p.say(
                "A worker process imported Qt: its timings may be off (report this as a bug).",
                "warning",
            )

    def _watch_ended(self, record: RunRecord) -> None:
        bar, message, level = watch_words(record)
        self.p.status.ended(bar)
        self.p.say(message, level)

    def _report_cache(self, record: RunRecord, result: LoadResult) -> None:
        cache = result.cache
        if cache_unmet(record):
            self.p.say(
                f"Run {record.label} asked for a {cache.requested} cache but started "
                f"{cache_state_text(cache)}: {cache.note}",
                "warning",
            )
        elif result.notes:
            self.p.say(f"Run {record.label}: {result.notes[0]}", "info")

    # --- jobs without live loads ----------------------------------------------------------------

    def job_progress(self, progress: JobProgress) -> None:
        fraction = progress.fraction
        if fraction is None and self.budget_s:
            fraction = (time.monotonic() - self.job_started) / self.budget_s
        self.p.status.show(progress.text, fraction)
        if self.p.recommendation.running:  # its search, line by line
            self.p.recommendation.progress(progress.text)

    def ceiling(self, ceiling: Ceiling) -> None:
        self.p.ceilings.add(ceiling)

    # --- the end of a job -----------------------------------------------------------------------

    def job_finished(self, end: JobEnd) -> None:
        p = self.p
        if end.kind == "ab":
            self._ab_finished(end)
        elif end.kind == "ceilings":
            if end.error is None:  # shown in the compare bar, the plot and the results
                p.status.ended("Ceilings measured")
            else:
                p.status.ended("Ceilings: " + ("cancelled" if end.cancelled else "failed"))
                p.say(
                    f"Measuring the ceilings stopped: {end.error}",
                    "info" if end.cancelled else "error",
                )
        elif end.kind == "recommend":
            self._recommend_finished(end)
        elif end.kind == "watch" and end.error is not None and not end.cancelled:
            p.status.ended("Watch: could not run")
            p.say(f"The watch could not run: {end.error}", "error")
        self.budget_s = 0.0

    def _recommend_finished(self, end: JobEnd) -> None:
        p = self.p
        if isinstance(end.value, RanksRecommended):
            found = end.value.found
            p.recommendation.ranks_done(found, found.memory_limit)
            action = ranks_headline(found, None).split("\n", 1)[0]
            p.status.ended(action)
            p.say(
                f"{action} The Recommendation tab has each way; File ▸ Export recommended "
                "configuration… writes it",
                "info" if found.pick is not None else "warning",
            )
            return
        if isinstance(end.value, Recommended):
            rec = end.value.recommendation
            # The window's ceilings and the recommendation's are one set: any it measured
            # (those the window lacked) join the window's.
            p.ceilings.merge(rec.ceilings)
            value = end.value
            p.recommendation.done(
                rec,
                value.explanation,
                value.memory_limit,
                advice=value.advice,
                loader_note=value.loader_note,
                apply_tools=value.apply_tools,
            )
            # The bar and the message say the one answer the tab leads with.
            action = answer(rec, "modelmon.toml", value.advice).action
            p.status.ended(action)
            p.say(
                f"{action} The Recommendation tab says why; File ▸ Export recommended "
                "configuration… writes it",
                "info",
            )
            return
        previous = p.recommendation.previous is not None
        bar, tab, message = recommendation_stopped(end.cancelled, str(end.error), previous)
        p.status.ended(bar)
        p.recommendation.stopped(tab)
        p.say(message, "info" if end.cancelled else "error")

    def _ab_finished(self, end: JobEnd) -> None:
        p = self.p
        # A cancel that lands between two runs lets run_ab return a verdict over the pairs
        # done so far; the user asked to stop, so that is reported as cancelled too.
        if isinstance(end.value, ABResult) and not end.cancelled:
            ab = end.value
            p.ab.finish(ab)
            # The verdict is shown large in the compare bar: no message repeating it.
            pairs = min(ab.a.runs, ab.b.runs)
            p.status.ended(f"A/B × {pairs}: {verdict_text(ab.verdict, pairs)}")
            return
        p.ab.stopped(end.cancelled)
        if end.cancelled:
            p.status.ended("A/B cancelled")
            p.say("A/B cancelled; its workers were stopped.", "info")
        else:
            p.status.ended("A/B stopped")
            p.say(f"A/B stopped, no verdict: {end.error}", "error")
