"""The user's loader's rounds planned from its first run: the loader as it is runs first
(after the ceilings, before modelmon's search), so that its pace is measured before the
budget is split: the rounds its answer rests on (each change of its engine once, modelmon's
best, then ``EVIDENCE_RUNS`` rounds of the finalists) are reserved at that pace, and the
search has what is left. Where even the search's first load does not fit beside them, the
progress says so before the search starts, with the time the whole will take.

The changes tried are those of ``advice``'s docstring: an engine's variants, a command's
environment knobs and its engine's argument knobs (against that engine as it is), and the
device's readahead where modelmon may set it (only where the budget allows).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from modelmon.core.configuration import Command, ProgramConfig, parse_engine
from modelmon.core.errors import BUDGET_NOT_KEPT
from modelmon.core.limits import EVIDENCE_RUNS, STORAGE_REST_S
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

    def rest_of_rounds(self, best_s: float) -> tuple[float, int]:
        """(seconds, runs) the rounds still need at the loader's measured pace: each
        essential entry once and each new program's uncounted run, modelmon's best once
        (``best_s`` a run), then the finalists to ``EVIDENCE_RUNS`` runs each (the loader,
        the leading change and its baseline, modelmon's best). Readahead values are left
        out: they run only where the budget allows."""
        loader = self.rounds.pace(self.as_is)
        if not self.as_is.candidate.results:  # failed: modelmon's best once, nothing paired
            return best_s, 1
        first = [self.engine_as_is] if self.engine_as_is is not None else []
        screened = [e for e in (*first, *self.changes) if e.essential]
        programs = {e.candidate.program.code for e in screened if e.candidate.program is not None}
        unwarmed = len(programs - self.rounds.warmed)
        finalists = 1 + (1 if screened else 0) + len(first)
        runs = len(screened) + unwarmed + 1 + (EVIDENCE_RUNS - 1) * (finalists + 1)
        seconds = (len(screened) + unwarmed) * loader + best_s
        seconds += (EVIDENCE_RUNS - 1) * (finalists * loader + best_s)
        return seconds, runs


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
    plan: LoaderPlan, left_s: float, search_s: float, rounds_s: float, runs: int, elapsed_s: float
) -> str:
    """What the budget (``left_s`` of it left) cannot hold beside the loader's rounds
    (``rounds_s`` for ``runs`` more runs): modelmon's search, its first load at least
    (``search_s``); "" where it holds them. Said before the search starts."""
    if search_s + rounds_s <= left_s:
        return ""
    loader = plan.rounds.pace(plan.as_is)
    total = elapsed_s + search_s + rounds_s
    return (
        f"{BUDGET_NOT_KEPT}: a run of your loader takes about {loader:.0f} s (its "
        f"start and load), and the rounds its answer rests on need {runs} more runs (each "
        f"change once, modelmon's best, then {EVIDENCE_RUNS} cold runs of each finalist), "
        f"about {rounds_s:.0f} s, beside modelmon's search ({search_s:.0f} s at the least): "
        f"this recommendation will take about {total:.0f} s, "
        f"{total - elapsed_s - max(left_s, 0.0):.0f} s past the budget"
    )


def first_round(
    model: Model,
    loader: ProgramConfig,
    deadline: float,
    *,
    engine: str | None = None,
    path: str | None = None,
    say: Progress = lambda _: None,
    cancel: threading.Event | None = None,
) -> LoaderPlan:
    """The loader as it is, run once (its code read in first), and the changes to try."""
    measured, for_engine = stand_in(loader)
    rounds = LoaderRounds(model, path or model.path, deadline, say, cancel)
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
