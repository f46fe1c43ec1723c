"""The open model and everything measured on it, and the jobs that measure: the app's state
behind the workspace page. Qt-free.

Its parts each hold one thing and say when it changes: ``configs`` (A and B), ``runs`` (the
finished runs), ``ab`` (A/Bs and their verdicts), ``ceilings``, ``recommendation``, ``live``
(the run on screen now, for the frame tick), ``status`` (the progress strip's line). The
workbench starts jobs (one at a time: two loads at once would measure each other) and its
``JobReports`` turns what they report into changes of those parts. The widgets subscribe to
the parts and draw; what the user does comes back as calls of the methods here.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Literal

from modelmon.core.errors import OptionsError, printable
from modelmon.core.measuring import RunSettings
from modelmon.core.options import CacheMode, parse_size
from modelmon.core.output import limit_text as size_words
from modelmon.core.system import check_memory_limit, memory_limit_range, memory_limit_unavailable
from modelmon.gui.state.ab_session import ABState, ab_cache
from modelmon.gui.state.ceilings_state import CeilingsState, CeilingStore
from modelmon.gui.state.configs import LABELS, Configs
from modelmon.gui.state.events import Event, Post
from modelmon.gui.state.job_reports import JobReports, Parts
from modelmon.gui.state.job_runner import JobRunner
from modelmon.gui.state.jobs import (
    SAMPLE_INTERVAL_S,
    ABJob,
    CeilingsJob,
    Job,
    JobEnd,
    RecommendJob,
    SingleRun,
)
from modelmon.gui.state.live_run import LiveRun
from modelmon.gui.state.model_info import ModelInfo
from modelmon.gui.state.model_sessions import ModelResults, ModelSessions
from modelmon.gui.state.plot_runs import plot_runs
from modelmon.gui.state.programs import is_program, loader_error, side_config, spec_error
from modelmon.gui.state.ready_rule import ReadyState
from modelmon.gui.state.recent_entries import recent_label
from modelmon.gui.state.recommending import RecommendationState
from modelmon.gui.state.records import WATCH_LABEL, RunRecord
from modelmon.gui.state.run_list import JobStatus, RunList
from modelmon.gui.state.run_replay import Replay, replay
from modelmon.gui.state.run_trace import has_trace
from modelmon.gui.state.watch_job import WatchJob, WatchRequest, model_scope

CEILING_REPEATS = 3


NO_LIMIT = ("", "none", "no", "off")


def read_memory_limit(text: str) -> tuple[int | None, str | None]:
    """``text`` as a memory limit (None: no limit), or the one line why it is none modelmon
    takes: checked as it is typed, so a dialog never shows a refusal of text it no longer
    holds."""
    if text.strip().lower() in NO_LIMIT:
        return None, None
    shown = printable(text.strip())
    try:
        size = parse_size(text)
    except OptionsError:
        return None, f"Not a memory limit: {shown} (write 16Gi or 512Mi)"
    try:
        return check_memory_limit(size), None
    except OptionsError:
        return None, f"The memory limit must be {memory_limit_range()}, not {shown}"


class Workbench:
    def __init__(self, post: Post, ceiling_store: CeilingStore | None = None) -> None:
        self.info: ModelInfo | None = None
        self.configs = Configs()
        self.runs = RunList()
        self.ab = ABState()
        self.ready = ReadyState()  # when a command that serves is ready
        self.ceilings = CeilingsState(ceiling_store)
        self.recommendation = RecommendationState()
        self.live = LiveRun()
        self.status = JobStatus()
        self.sessions = ModelSessions()  # the results of the other models opened
        self.runner = JobRunner(post)
        self.ceiling_repeats = CEILING_REPEATS
        self.sample_interval_s = SAMPLE_INTERVAL_S  # the metrics' period for the next runs
        # The memory limit the next runs run under (a memory cgroup of that size, as a
        # container's), or None; ``memory_limit_changed`` says when it changes.
        self.memory_limit: int | None = None
        self.memory_limit_changed = Event()  # int | None
        # The last run of each label on the plots, in the order they ended (oldest first): a
        # run replaces only its own label's, so a Run A after an A/B keeps the A/B's last B.
        self.shown_runs: dict[str, RunRecord] = {}
        self.model_opened = Event()  # ModelInfo: a model is open (the plots start empty)
        self.plots_cleared = Event()  # (): every run leaves the plots (the model's axes stay)
        # list[Replay]: finished runs drawn again, oldest first, each in place of its label's
        # (a model's kept runs when it is opened again, a row of the results picked).
        self.runs_replayed = Event()
        self.run_ended = Event()  # RunRecord: a run's end, after it joined ``runs``
        self.running_changed = Event()  # bool
        self.message = Event()  # text, level ("info" | "warning" | "error")
        self.exports_changed = Event()  # (): what can be exported may have changed
        self.reports = JobReports(
            Parts(
                self.live,
                self.runs,
                self.ab,
                self.ceilings,
                self.recommendation,
                self.status,
                self.message.emit,
                self.run_ended.emit,
            )
        )
        runner = self.runner
        runner.run_started.connect(self.reports.run_started)
        runner.run_finished.connect(self.reports.run_finished)
        runner.job_progress.connect(self.reports.job_progress)
        runner.ceiling.connect(self.reports.ceiling)
        runner.job_finished.connect(self._job_finished)
        for event in (self.runs.added, self.runs.reset, self.ab.changed, self.ceilings.changed):
            event.connect(lambda *_: self.exports_changed.emit())
        self.run_ended.connect(self._shown)
        self.plots_cleared.connect(self.shown_runs.clear)
        self.model_opened.connect(lambda _info: self.shown_runs.clear())
        self.recommendation.changed.connect(lambda _shown: self.exports_changed.emit())

    def _shown(self, record: RunRecord) -> None:
        self.shown_runs.pop(record.label, None)  # to the end: the newest last
        self.shown_runs[record.label] = record

    def show_run(self, record: RunRecord) -> None:
        """Draw ``record`` (a row the user picked) in place of the last run of its label;
        one that left nothing to draw (it could not start) is not drawn, nor any while a
        run is live (its plots are the live run's)."""
        if self.running or self.info is None or not has_trace(record) or record not in self.records:
            return
        if list(self.shown_runs.values())[-1:] == [record]:
            return  # drawn already, and the newest: as a picked row redraws nothing
        self._replay([record])

    def _replay(self, records: list[RunRecord]) -> None:
        """``records`` become the shown runs of their labels, and are drawn again."""
        replays: list[Replay] = []
        model = self.info.model if self.info is not None else None
        for record in records:
            self._shown(record)
            again = replay(record, model)
            if again is not None:
                replays.append(again)
        self.runs_replayed.emit(replays)

    def plot_runs(self, name: str) -> list[RunRecord]:
        """The finished runs the plot ``name`` shows: its export names and draws these."""
        return plot_runs(name, list(self.shown_runs.values()))

    @property
    def running(self) -> bool:
        return self.runner.running

    @property
    def records(self) -> list[RunRecord]:
        return self.runs.records

    # --- the open model -------------------------------------------------------------------------

    def open(self, info: ModelInfo) -> None:
        """Show a newly opened model. The previous model's runs, A/B, ceilings and
        recommendation are kept for when it is opened again; this model's own come back."""
        if self.running:
            raise RuntimeError("cancel the running job before opening another model")
        previous = self.info
        kept_runs = len(self.records) if previous is not None else 0
        if self.info is not None:
            self.sessions.stash(
                self.info.path,
                ModelResults(
                    list(self.records),
                    verdict[1] if (verdict := self.ab.history.verdict) else None,
                    verdict[0] if verdict else "",
                    self.ab.history.started,
                    self.ceilings.current,
                    self.recommendation.shown
                    if self.recommendation.shown.phase == "done"
                    else None,
                    list(self.shown_runs.values()),
                ),
            )
        kept = self.sessions.take(info.path)
        self.info = info
        self.configs.set_limits(
            not info.fits_in_ram,
            info.readahead_unavailable,
            info.in_bucket,
            str(info.summary.get("format") or "") or None,
        )
        self.model_opened.emit(info)
        self.runs.show(kept.records)
        self.ab.restore(kept.ab_result, kept.ab_session, kept.ab_started)
        self.ceilings.open(info, kept.ceilings)
        self.recommendation.restore(kept.recommendation)
        # Its plots as they were: each run they showed drawn again, on this model's axes.
        if kept.shown_runs:
            self._replay(kept.shown_runs)
        self.status.idle()
        if previous is not None and previous.path != info.path and kept_runs:
            # The window's results change with the model: say where the others went.
            back = f"; {len(kept.records)} of this model's came back" if kept.records else ""
            self.message.emit(
                f"{kept_runs} run{'s' if kept_runs != 1 else ''} of "
                f"{recent_label(previous.path)} {'are' if kept_runs != 1 else 'is'} kept for "
                f"when it is opened again in this window{back}.",
                "info",
            )
        for label, why in self.configs.replaced.items():
            self.message.emit(
                f"Configuration {label} is back to {self.configs.spec(label)}: {why}.", "info"
            )
        if not info.fits_in_ram:
            self.message.emit(
                "This model does not fit in the RAM available: runs use discard "
                "mode (stream through bounded buffers, keep nothing).",
                "warning",
            )

    def clear_run_plots(self) -> None:
        self.plots_cleared.emit()

    # --- starting jobs --------------------------------------------------------------------------

    def run(self, label: str) -> None:
        """Load once with configuration ``label``; ignored while a job runs."""
        if self.running or self.info is None:
            return
        strategy, options = self.configs.strategy(label), self.configs.effective(label)
        refused = spec_error(strategy)
        if refused is not None:
            self.message.emit(f"Configuration {label}: {refused}", "warning")
            return
        serving = self._serving((strategy,))
        if serving is False:
            return
        config = side_config(strategy, options)
        self._start(SingleRun(self.info.model, label, config, serving or None))

    def run_ab(self, pairs: int | None = None, cache: CacheMode | None = None) -> None:
        """A B A B … ``pairs`` pairs (default: the pairs set) from the same verified cache
        state, then the verdict. The state is ``cache`` when given, else A's and B's Cache
        setting (they must agree)."""
        if self.running or self.info is None:
            return
        if pairs is not None:
            self.ab.set_pairs(pairs)
        pairs = self.ab.pairs
        for label in LABELS:
            refused = spec_error(self.configs.strategy(label))
            if refused is not None:
                self.message.emit(f"Configuration {label}: {refused}", "warning")
                return
        serving = self._serving(tuple(self.configs.strategy(s) for s in LABELS))
        if serving is False:
            return
        a, b = (side_config(self.configs.strategy(s), self.configs.effective(s)) for s in LABELS)
        try:
            programs = [s for s in LABELS if is_program(self.configs.strategy(s))]
            cache: CacheMode = ab_cache(
                *(self.configs.effective(s) for s in LABELS if s not in programs), asked=cache
            )
        except OptionsError as exc:
            self.message.emit(str(exc), "warning")
            return
        # The plots show this A/B's runs only: never a run of an earlier one beside them.
        self.clear_run_plots()
        session = self.ab.start(time.strftime("%H:%M:%S"), pairs)  # no verdict until it ends
        self._start(ABJob(self.info.model, a, b, pairs, cache, session, serving or None))

    def _serving(self, strategies: tuple[str, ...]) -> RunSettings | Literal[False] | None:
        """When the commands among ``strategies`` are ready (None: no command, or the
        default rule); False, with its one line said, where the rule set cannot be used."""
        if not any(is_program(strategy) for strategy in strategies):
            return None
        try:
            return self.ready.rule.serving()
        except OptionsError as exc:
            self.message.emit(f"Servers' ready: {exc}", "warning")
            return False

    def measure_ceilings(self) -> None:
        if self.running or self.info is None:
            return
        self._start(CeilingsJob(self.info.model, self.ceiling_repeats))
        self.status.show("Measuring ceilings…", 0.0)

    def recommend(self, budget_s: float, loader: str | None = None, ranks: int = 1) -> None:
        """Search for the best configuration within ``budget_s``; with ``loader`` (``cmd:``
        or ``engine:``) the user's loader is measured beside it; with ``ranks`` > 1, how
        that many ranks of this node load it under the memory limit. Exporting it is a step
        of its own (``Exporter.export_recommendation``)."""
        if self.running or self.info is None:
            return
        if ranks > 1:
            from modelmon.gui.state.ranks_job import RanksRecommendJob

            self._start(RanksRecommendJob(self.info.model, ranks, budget_s), budget_s)
            self.recommendation.start(budget_s, ranks=ranks)
            self.status.show(f"Recommending for {ranks} ranks (budget {budget_s:.0f} s)…", 0.0)
            return
        if loader is not None:
            refused = loader_error(loader, self.info.model)
            if refused is not None:
                self.message.emit(f"Your loader: {refused}", "warning")
                return
        model, ceilings = self.info.model, self.ceilings.current
        self._start(RecommendJob(model, budget_s, ceilings=ceilings, loader=loader), budget_s)
        self.recommendation.start(budget_s, loader)
        self.status.show(f"Recommending (budget {budget_s:.0f} s)…", 0.0)

    def watch(self, request: WatchRequest) -> None:
        """Watch a command (or a running process) load; its plots replace the runs'."""
        if self.running or self.info is None:
            return
        number = 1 + sum(1 for record in self.records if record.label == WATCH_LABEL)
        scope = request.model or model_scope(self.info.model)
        request = dataclasses.replace(request, number=number, model=scope)
        self.clear_run_plots()
        self._start(WatchJob(request, self.info.model))
        self.status.show(f"Watching {request.title}…", None)

    @property
    def memory_limit_text(self) -> str:
        """The limit as one writes it (``2Gi``, ``512Mi``), empty for none: what its dialog
        offers to edit."""
        return k8s_text(self.memory_limit)

    @property
    def memory_limit_words(self) -> str:
        """The limit as every figure of memory is said (``4 GiB``), empty for none."""
        return size_words(self.memory_limit) if self.memory_limit is not None else ""

    @staticmethod
    def memory_limit_range() -> str:
        """The limits modelmon takes here: 'from 1 MiB to 23.4 GiB (this machine's RAM)'."""
        return memory_limit_range()

    def set_memory_limit(self, text: str) -> str | None:
        """Run what follows under ``text`` (``16Gi``, ``512MiB``; empty or ``none``: no limit).
        The one line why not when it is no limit modelmon takes; a limit no cgroup can be made
        for here is kept and said in a warning (runs then only plan with it)."""
        limit, refused = read_memory_limit(text)
        if refused is not None:
            return refused
        self.memory_limit = limit
        self.memory_limit_changed.emit(limit)
        unavailable = memory_limit_unavailable(limit) if limit is not None else None
        if unavailable is not None:
            self.message.emit(unavailable, "warning")
        elif limit is not None:
            self.message.emit(
                f"The next runs run under a {size_words(limit)} memory limit, in a memory "
                "cgroup of that size (as in a container).",
                "info",
            )
        return None

    def _start(self, job: Job, budget_s: float = 0.0) -> None:
        """Start ``job``: what the last one left (a failure's banner, a full bar) goes."""
        if not isinstance(job, ABJob):
            self.ab.other_job_started()
        self.status.show("starting…", 0.0)
        job.sample_interval_s = self.sample_interval_s
        job.memory_limit = self.memory_limit
        self.reports.begin(self.info.model if self.info is not None else None, budget_s)
        self.runner.start(job)
        self.running_changed.emit(True)

    def _job_finished(self, end: JobEnd) -> None:
        self.reports.job_finished(end)
        self.running_changed.emit(False)

    def cancel(self) -> None:
        self.runner.cancel()

    def shutdown(self) -> bool:
        """Stop any job and wait for its workers (or watched command) to be gone."""
        stopped = self.runner.shutdown()
        self.live.stop()
        if stopped:
            self.running_changed.emit(False)
        return stopped


def k8s_text(limit: int | None) -> str:
    """A memory limit as Kubernetes writes it (``2Gi``, ``512Mi``; bytes when neither)."""
    if limit is None:
        return ""
    for unit, shift in (("Gi", 30), ("Mi", 20)):
        if limit % (1 << shift) == 0:
            return f"{limit >> shift}{unit}"
    return str(limit)
