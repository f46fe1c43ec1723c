"""The user's loader's rounds planned from its first run: the loader as it is runs first
(after the ceilings, before modelmon's search), so that its pace is measured before the
budget is split: the rounds its answer rests on (each change of its engine once, modelmon's
best, then ``EVIDENCE_RUNS`` rounds of the finalists) are reserved at that pace, and the
search has what is left. The evidence rounds may end ``limits.EVIDENCE_OVERRUN`` of the
budget past it, no further. Where the budget cannot hold them all beside the search's first
load, the progress says so before the search starts: how many runs of each finalist it holds
(the answer then says it is not certain), or, where not even round 1 fits, the time the
whole will take.

The changes tried are those of ``advice``'s docstring: an engine's variants, a command's
environment knobs and its engine's argument knobs (against that engine as it is), and the
device's readahead where modelmon may set it (only where the budget allows).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from modelmon.core.configuration import Command, ProgramConfig, parse_engine
from modelmon.core.errors import BUDGET_NOT_KEPT
from modelmon.core.limits import EVIDENCE_OVERRUN, EVIDENCE_RUNS, STORAGE_REST_S
from modelmon.core.loaders.engine import Engine
from modelmon.core.loaders.registry import engine_for_loader, get_engine
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.loader_rounds import Entry, LoaderRounds
from modelmon.core.model.records import Model
from modelmon.core.system import readahead
from modelmon.core.system.storage import storage_facts
from modelmon.core.watching.result import WatchResult

READAHEAD_TRIED_KIB = (1024, 4096, 16384)  # the device's readahead tried on the loader
Progress = Callable[[str], None]


@dataclass
class LoaderPlan:
    """The user's loader after its first counted run, and what its rounds still run."""

    rounds: LoaderRounds
    as_is: Entry  # the loader as it is (``measured``), run once
    measured: ProgramConfig  # the loader, or the engine that stands in for it
    for_engine: str | None  # the engine the advice is for, when it cannot run here
    engine: Engine | None  # the engine whose settings are tried
    found: str  # how that engine was known: "given", "recognised by the watch", ""
    changes: list[Entry]  # each against its baseline
    engine_as_is: Entry | None  # a command's engine as it is: its argument knobs' baseline
    notes: list[str] = field(default_factory=list)

    def rest_of_rounds(self, best_s: float) -> RoundsLeft:
        """What the rounds still need at the loader's measured pace: each essential entry
        once and each new program's uncounted run, modelmon's best once (``best_s`` a run),
        then the finalists to ``EVIDENCE_RUNS`` runs each (the loader, the leading change and
        its baseline, modelmon's best). Readahead values are left out: they run only where
        the budget allows."""
        loader = self.rounds.pace(self.as_is)
        if not self.as_is.candidate.results:  # failed: modelmon's best once, nothing paired
            return RoundsLeft(best_s, 1, 0.0, 0)
        first = [self.engine_as_is] if self.engine_as_is is not None else []
        screened = [e for e in (*first, *self.changes) if e.essential]
        programs = {e.candidate.program.code for e in screened if e.candidate.program is not None}
        unwarmed = len(programs - self.rounds.warmed)
        finalists = 1 + (1 if screened else 0) + len(first)
        return RoundsLeft(
            screen_s=(len(screened) + unwarmed) * loader + best_s,
            screen_runs=len(screened) + unwarmed + 1,
            round_s=finalists * loader + best_s,
            finalists=finalists + 1,
        )


@dataclass(frozen=True)
class RoundsLeft:
    """What the loader's rounds still need after its first run (``rest_of_rounds``): round
    1's rest, then ``EVIDENCE_RUNS - 1`` rounds of the finalists."""

    screen_s: float  # round 1's rest: each change once, modelmon's best once
    screen_runs: int
    round_s: float  # one round of the finalists
    finalists: int  # 0: no round of finalists follows (the loader failed)
    best_screened: bool = True  # round 1 runs modelmon's best (not the search's first load)

    @property
    def evidence_rounds(self) -> int:
        return EVIDENCE_RUNS - 1 if self.finalists else 0

    @property
    def seconds(self) -> float:
        return self.screen_s + self.evidence_rounds * self.round_s

    @property
    def runs(self) -> int:
        return self.screen_runs + self.evidence_rounds * self.finalists

    def screened_by_search(self, best_s: float) -> RoundsLeft:
        """These rounds where modelmon's search runs its first load alone: that load, right
        after the loader's first run, is modelmon's best's run of round 1 (``best_s``)."""
        return replace(
            self,
            screen_s=self.screen_s - best_s,
            screen_runs=self.screen_runs - 1,
            best_screened=False,
        )

    def runs_held(self, room_s: float) -> int:
        """The cold runs of each finalist that ``room_s`` holds (round 1's at least)."""
        if self.round_s <= 0:
            return 1 + self.evidence_rounds
        rounds = int(max(room_s - self.screen_s, 0.0) // self.round_s)
        return 1 + min(rounds, self.evidence_rounds)


def modelmon_pace(model: Model, first_s: float, plan: LoaderPlan) -> float:
    """A run of modelmon's best in the loader's rounds, planned before it ran: the search's
    first pace (``recommend.first_pace``) with the rest a network mount takes before each run
    there, and no less than a run of the loader as it is (a run there pays for fresh memory
    and the workers' start as the loader's pays for its interpreter: on a busy machine
    modelmon's took 15 s where the ceilings' pace said 5 s)."""
    pace = first_s
    if all(f.remote is None for f in model.files) and storage_facts(model.files[0].path).remote:
        pace += STORAGE_REST_S
    return max(pace, plan.rounds.pace(plan.as_is))


def short_budget(
    plan: LoaderPlan,
    left_s: float,
    search_s: float,
    rounds: RoundsLeft,
    elapsed_s: float,
    overrun_s: float,
) -> str:
    """What the budget (``left_s`` of it left, and the evidence's ``overrun_s`` past it)
    cannot hold beside the loader's ``rounds`` and modelmon's search, its first load at least
    (``search_s``); "" where it holds them. Said before the search starts: ``BUDGET_NOT_KEPT``
    where even round 1 does not fit (the answer then rests on one run of each), else how
    many of the ``EVIDENCE_RUNS`` runs of each finalist it holds."""
    room = left_s + overrun_s - search_s
    if rounds.seconds <= room:
        return ""
    loader = plan.rounds.pace(plan.as_is)
    if rounds.screen_s > room:
        total = elapsed_s + search_s + rounds.screen_s
        best = ", modelmon's best" if rounds.best_screened else ""
        return (
            f"{BUDGET_NOT_KEPT}: a run of your loader takes about {loader:.0f} s (its "
            f"start and load), and round 1 of the rounds its answer rests on needs "
            f"{rounds.screen_runs} more runs (each change once{best}), about "
            f"{rounds.screen_s:.0f} s, beside modelmon's search ({search_s:.0f} s at the "
            f"least): this recommendation will take about {total:.0f} s, "
            f"{total - elapsed_s - max(left_s, 0.0):.0f} s past the budget, and its answer "
            "will rest on 1 cold run of each"
        )
    held = rounds.runs_held(room)
    total = elapsed_s + search_s + rounds.seconds
    return (
        f"the budget holds {held} cold run{'s' if held != 1 else ''} of each finalist, not "
        f"{EVIDENCE_RUNS}: a run of your loader takes about {loader:.0f} s (its start and "
        f"load), and the answer will say it is not certain; a budget of about "
        f"{total / (1 + EVIDENCE_OVERRUN):.0f} s holds {EVIDENCE_RUNS}"
    )


def first_round(
    model: Model,
    loader: ProgramConfig,
    deadline: float,
    *,
    overrun_s: float,
    engine: str | None = None,
    path: str | None = None,
    say: Progress = lambda _: None,
    cancel: threading.Event | None = None,
) -> LoaderPlan:
    """The loader as it is, run once (its code read in first), and the changes to try; the
    rounds' evidence may end ``overrun_s`` past ``deadline``."""
    measured, for_engine = stand_in(loader)
    rounds = LoaderRounds(model, path or model.path, deadline, say, cancel, overrun_s=overrun_s)
    as_is = Entry(Candidate(measured, role="your loader"), essential=True)
    say(f"your loader as it is: {measured.spec}")
    rounds.run(as_is)
    chosen, found = engine_of(measured, engine, as_is.watch)
    notes: list[str] = []
    if chosen is not None and chosen.unavailable() is not None and measured.kind == "cmd":
        notes.append(f"{chosen.label}'s own settings were not measured: {chosen.unavailable()}")
    features = dict(as_is.own["features"]) if as_is.own and "features" in as_is.own else {}
    changes, engine_as_is = _changes(measured, chosen, as_is, features)
    changes += _readahead_changes(measured, model, as_is)
    return LoaderPlan(
        rounds, as_is, measured, for_engine, chosen, found, changes, engine_as_is, notes
    )


def _candidate(program: ProgramConfig, role: str) -> Candidate:
    return Candidate(program, role=role)


def stand_in(config: ProgramConfig) -> tuple[ProgramConfig, str | None]:
    """An engine that cannot run here is measured as the engine that stands for it."""
    if config.engine is None:
        return config, None
    engine = get_engine(config.engine)
    if engine.stand_in is None:
        return config, None
    stand = ProgramConfig("engine", engine=engine.stand_in, readahead=config.readahead)
    return stand.with_knobs(dict(config.knobs)), engine.name


def _changes(
    loader: ProgramConfig, engine: Engine | None, as_is: Entry, features: dict[str, Any]
) -> tuple[list[Entry], Entry | None]:
    """The changes to try, each against its baseline; and the engine as it is, when its
    argument knobs are tried beside a command (their baseline)."""
    changes: list[Entry] = []
    engine_as_is: Entry | None = None
    if engine is None:
        return changes, None
    if loader.kind == "engine":
        for settings in engine.variants(loader.settings):
            if all(value in features.get(name, [value]) for name, value in settings.items()):
                change = _candidate(loader.with_knobs(settings), "a change of your loader")
                changes.append(Entry(change, as_is, essential=True))
        return changes, None
    defaults = engine.defaults()
    words = loader.command_words
    assert words is not None
    for knob in engine.knobs:
        if knob.environment and knob.tried:
            for value in knob.values[1:]:
                env = (*words.env, (knob.name, value))
                program = ProgramConfig("cmd", Command(words.argv, env), readahead=loader.readahead)
                change = _candidate(program, "a change of your loader")
                changes.append(Entry(change, as_is, essential=True))
    arguments = [k for k in engine.knobs if not k.environment and k.tried]
    if arguments and engine.unavailable() is None:
        plain = ProgramConfig("engine", engine=engine.name)
        plain_as_is = _candidate(plain, f"{engine.label} as it is")
        engine_as_is = Entry(plain_as_is, as_is, essential=True)
        for knob in arguments:
            for value in knob.values[1:]:
                program = plain.with_knobs({**defaults, knob.name: value})
                change = _candidate(program, f"a setting of {engine.label}")
                changes.append(Entry(change, engine_as_is, essential=True))
    return changes, engine_as_is


def _readahead_changes(loader: ProgramConfig, model: Model, as_is: Entry) -> list[Entry]:
    paths = [f.path for f in model.files]
    if loader.readahead is not None or readahead.unavailable(paths) is not None:
        return []
    knob = readahead.locate(paths[0])
    current = knob.read_kb() if knob is not None else None
    return [
        Entry(_candidate(loader.with_readahead(kib), "the device's readahead"), as_is)
        for kib in READAHEAD_TRIED_KIB
        if kib != current
    ]


def engine_of(
    loader: ProgramConfig, given: str | None, watch: WatchResult | None
) -> tuple[Engine | None, str]:
    if loader.engine is not None:
        return get_engine(loader.engine), "given"
    if given is not None:
        return get_engine(parse_engine(given).engine or ""), "given"
    if watch is not None:
        engine = engine_for_loader(watch.loader.key)
        if engine is not None:
            return engine, "recognised by the watch"
    return None, ""
