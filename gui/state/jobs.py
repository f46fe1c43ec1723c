"""What the job thread does: one load, A/B × n, the ceilings, or a recommendation. Qt-free.

Every run is what its configuration calls for (``modelmon.core.run_for``): modelmon's strategy
as a ``Session`` (a LoadRun plus the metrics sampler), or a program watched. A job reports
events, in order, through the ``report`` callable it is run with: for each run a ``RunStart``
(carrying the live run, whose read log and sampler the window reads on its own frame tick)
and a ``RunRecord`` when it has ended; ``JobProgress`` lines and ceilings as they come; last
a ``JobEnd``. Reads never travel this way: they stay in the run's ``ReadLog``.

Events go in deliveries (tuples), each handled by the GUI thread in one go. A run's record
waits for the job's next event and travels with it: the last run's end and the ``JobEnd``
are then one delivery, so no observer sees a run's result while the job still counts as
running. One job runs at a time: two loads at once would measure each other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from modelmon.core import (
    ABResult,
    CacheState,
    Ceiling,
    Ceilings,
    Configuration,
    LoadResult,
    Model,
    Watch,
    measure_ceilings,
    run_ab,
    run_for,
)
from modelmon.core.errors import LoadError, ModelmonError, one_line
from modelmon.core.measuring import CEILINGS, RunSettings
from modelmon.core.options import CacheMode
from modelmon.core.runs import ProgramRun, RunOutcome, Session
from modelmon.gui.state.programs import model_path
from modelmon.gui.state.records import RunRecord

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 0.1
# Residency maps every 100 ms instead of the sampler's 500 ms: a demo load lasts well under
# a second, and the sampler's own CPU budget (ROUND_CPU_SHARE) spaces maps out on big models.
MAP_INTERVAL_S = 0.1

Report = Callable[[tuple[object, ...]], None]  # one delivery of events to the GUI thread


@dataclass(frozen=True, slots=True)
class RunStart:
    """A run (or a watch) begins. ``run`` is live: the state's thread only reads its read log
    and sampler (both thread-safe) and its ``t0_ns`` (0 until it goes). A program's run is
    announced once its cache is verified, with the watch that times it."""

    label: str  # "A" | "B" | "W" (a watch)
    spec: str
    pair: int | None  # 0-based pair of an A/B; None for a single run
    pairs: int | None  # how many pairs the A/B has
    run: Session | Watch

    @property
    def watch(self) -> Watch | None:
        return self.run if isinstance(self.run, Watch) else None

    @property
    def session(self) -> Session | None:
        return self.run if isinstance(self.run, Session) else None


@dataclass(frozen=True, slots=True)
class JobProgress:
    """A line about a job without live loads (the ceilings, a recommendation)."""

    text: str
    fraction: float | None = None  # of the whole job, when known


@dataclass(frozen=True, slots=True)
class CeilingDone:
    ceiling: Ceiling


@dataclass(frozen=True, slots=True)
class JobEnd:
    kind: str  # Job.kind
    value: Any  # SessionResult, ABResult, Ceilings, Recommended; None on failure
    error: str | None
    cancelled: bool


@dataclass(frozen=True, slots=True)
class Recommended:
    recommendation: Any  # modelmon.core.Recommendation
    explanation: tuple[str, ...] = ()  # the recommendation in sentences (its config's too)
    memory_limit: int | None = None  # the limit it was searched under (its config says it)
    advice: Any = None  # modelmon.core.measuring.LoaderAdvice: the user's loader measured beside it
    loader_note: str = ""  # why the user's loader was not measured
    apply_tools: tuple[str, ...] = ()  # the config's [apply] tools, in its order


JOB_NAMES = {
    "run": "A load",
    "ab": "An A/B comparison",
    "ceilings": "A measurement of the ceilings",
    "recommend": "A recommendation search",
    "watch": "A watched command",
}


def job_name(job: Job | None) -> str:
    """What a user calls the job: "An A/B comparison"."""
    return JOB_NAMES.get(job.kind, "A job") if job is not None else "A job"


class Job:
    """A unit of background work; ``run(report)`` is the job thread's body."""

    kind: ClassVar[str] = "job"

    def __init__(self, model: Model) -> None:
        self.model = model
        self.cancel_event = threading.Event()
        self.sample_interval_s = SAMPLE_INTERVAL_S  # the metrics' sampling period of its runs
        self.memory_limit: int | None = None  # its runs run in a memory cgroup of this size
        self._report: Report = lambda _events: None
        self._ended: RunRecord | None = None  # the last run's end, sent with the next event

    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def execute(self) -> Any:
        raise NotImplementedError

    def report(self, event: object) -> None:
        """Send ``event``, after the end of the run before it, as one delivery."""
        held, self._ended = self._ended, None
        self._report((event,) if held is None else (held, event))

    def run(self, report: Report) -> None:
        self._report = report
        try:
            end = JobEnd(self.kind, self.execute(), None, self.cancelled)
        except ModelmonError as exc:  # no RAM, bad file, a failed or cancelled run: one line
            end = JobEnd(self.kind, None, one_line(exc), self.cancelled)
        except Exception as exc:  # a bug or an OS error: the window says it, the log has more
            log.exception("%s job failed", self.kind)
            end = JobEnd(self.kind, None, f"{type(exc).__name__}: {one_line(exc)}", self.cancelled)
        self.report(end)

    def run_config(
        self,
        label: str,
        config: Configuration,
        pair: int | None = None,
        pairs: int | None = None,
        settings: RunSettings | None = None,
    ) -> RunOutcome:
        """One monitored run of ``config`` (``run_for``), announced and concluded: a
        strategy's as its workers start, a program's once its cache is verified cold, with
        the watch that times it; ``settings``: what an A/B gives each of its runs (its cache
        state, when a server is ready, its compile caches)."""
        ab_session = getattr(self, "session", None)  # an A/B's name, for its runs' records
        spec = config.spec
        live: Session | ProgramRun | None = None

        def announce(_state: CacheState) -> bool:
            if isinstance(live, ProgramRun) and live.watch is not None:
                self.report(RunStart(label, spec, pair, pairs, live.watch))
            return True

        try:
            live = run_for(
                self.model,
                config,
                cancel=self.cancel_event,
                interval_s=self.sample_interval_s,
                map_interval_s=MAP_INTERVAL_S,
                start_gate=announce,
                path=model_path(self.model),
                memory_limit=self.memory_limit,
                **(settings or {}),
            )
            if isinstance(live, Session):
                self.report(RunStart(label, spec, pair, pairs, live))
            outcome: RunOutcome = live.run()
        except Exception as exc:
            self._ended = RunRecord(label, spec, pair, None, one_line(exc), ab_session)
            raise
        self._ended = RunRecord(label, spec, pair, outcome, session=ab_session)
        return outcome


class SingleRun(Job):
    kind = "run"

    def __init__(
        self,
        model: Model,
        label: str,
        config: Configuration,
        serving: RunSettings | None = None,
    ) -> None:
        """``serving``: when a command that serves is ready (``ReadyRule.serving``)."""
        super().__init__(model)
        self.label, self.config, self.serving = label, config, serving

    def execute(self) -> RunOutcome:
        return self.run_config(self.label, self.config, settings=self.serving)


class ABJob(Job):
    """A B A B … ``n`` pairs through ``core.ab.run_ab``, each run a monitored Session."""

    kind = "ab"

    def __init__(
        self,
        model: Model,
        a: Configuration,
        b: Configuration,
        n: int,
        cache: CacheMode,
        session: str | None = None,
        serving: RunSettings | None = None,
    ) -> None:
        """``session`` names this A/B in its runs' records ("A/B 2 at 14:03:55");
        ``serving``: when its commands that serve are ready (``ReadyRule.serving``)."""
        super().__init__(model)
        self.a, self.b, self.n, self.cache = a, b, n, cache
        self.session = session
        self.serving = serving

    def execute(self) -> ABResult:
        def run_one(
            side: str, pair: int, config: Configuration, settings: RunSettings
        ) -> LoadResult:
            return self.run_config(side, config, pair, self.n, settings).result

        return run_ab(
            self.model,
            self.a,
            self.b,
            n=self.n,
            cache=self.cache,
            cancel=self.cancel_event,
            run_one=run_one,
            serving=self.serving,
            on_warm=lambda line: self.report(JobProgress(f"{line}…")),
            on_rest=lambda seconds: self.report(
                JobProgress(
                    f"Letting the mount rest {seconds:.0f} s: no run is timed with help the "
                    "last one left in the filesystem's client…"
                )
            ),
        )


class CeilingsJob(Job):
    kind = "ceilings"

    def __init__(self, model: Model, repeats: int = 3, names: tuple[str, ...] = CEILINGS) -> None:
        super().__init__(model)
        self.repeats, self.names = repeats, names

    def execute(self) -> Ceilings:
        done: list[Ceiling] = []

        def on_ceiling(ceiling: Ceiling) -> None:
            done.append(ceiling)
            self.report(CeilingDone(ceiling))
            if len(done) < len(self.names):
                self.report(self._progress(len(done)))

        self.report(self._progress(0))
        ceilings = measure_ceilings(
            self.model,
            self.names,
            repeats=self.repeats,
            cancel=self.cancel_event,
            on_ceiling=on_ceiling,
        )
        if self.cancelled:
            raise LoadError(f"ceilings cancelled after {len(done)} of {len(self.names)}")
        return ceilings

    def _progress(self, done: int) -> JobProgress:
        name = self.names[done].replace("_", " ")
        return JobProgress(
            f"Measuring ceilings: {name} ({done + 1} of {len(self.names)}, {self.repeats}× each)…",
            done / len(self.names),
        )


class RecommendJob(Job):
    """``core.recommend`` within a budget. It measures and writes nothing: its answer is
    exported as a config file afterwards, as often as the user wants."""

    kind = "recommend"

    def __init__(
        self,
        model: Model,
        budget_s: float,
        memory_limit: int | None = None,
        ceilings: Ceilings | None = None,
        loader: str | None = None,
    ) -> None:
        """``loader``: the user's loader (``cmd: ...`` or ``engine: ...``), measured as it is,
        with its engine's knobs and against modelmon's best (``recommend --loader``)."""
        super().__init__(model)
        self.budget_s, self.memory_limit, self.loader = budget_s, memory_limit, loader
        # The window's ceilings of this model: the recommendation's too (one set per model).
        self.ceilings = ceilings if ceilings is not None and ceilings.model == model.path else None

    def execute(self) -> Recommended:
        from modelmon.core import recommend
        from modelmon.core.output import as_told
        from modelmon.core.output import explain_recommendation as explain

        if self.loader is not None:
            return self._with_loader(self.loader)
        rec = recommend(
            self.model,
            self.budget_s,
            memory_limit=self.memory_limit,
            progress=lambda text: self.report(JobProgress(text)),
            cancel=self.cancel_event,
            ceilings=self.ceilings,
        )
        if self.cancelled:
            raise LoadError("recommendation cancelled")
        rec = as_told(rec)  # the one record the tab, its why and the config file tell
        return Recommended(rec, tuple(explain(rec)), self.memory_limit)

    def _with_loader(self, loader: str) -> Recommended:
        from modelmon.core import recommend_with_loader
        from modelmon.core.output import as_told, recommendation_document

        advised = recommend_with_loader(
            self.model,
            self.budget_s,
            loader=loader,
            path=model_path(self.model),
            memory_limit=self.memory_limit,
            progress=lambda text: self.report(JobProgress(text)),
            cancel=self.cancel_event,
            ceilings=self.ceilings,
        )
        if self.cancelled:
            raise LoadError("recommendation cancelled")
        rec, advice, note = advised.recommendation, advised.advice, advised.note
        rec = as_told(rec, advice)  # the one record the tab, its why and the config file tell
        document = recommendation_document(rec, "modelmon.toml", self.memory_limit, advice, note)
        return Recommended(
            rec,
            tuple(document["explanation"]),
            self.memory_limit,
            advice,
            note,
            tuple(document["apply"]),
        )
