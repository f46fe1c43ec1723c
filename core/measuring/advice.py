"""``recommend`` with the user's loader: modelmon's search, then the loader as the user runs
it, each setting of its engine that changes how it reads the weights, and modelmon's best,
measured in the same cold rounds (``loader_rounds``). The advice leads with the best thing
the user can change in their loader, and its gain over the loader as it is.

The loader is a command (``cmd: ...``, the user's own program) or an engine (``engine:
transformers``, or ``--engine transformers``: the engine with its defaults, as a user calls
it). For a command, the engine it uses is the one given, or the one its watch recognised;
the changes that apply to the command itself (environment knobs, the device's readahead) are
made to it, and an engine's argument knobs are measured on modelmon's run of that engine,
counted against that engine as it is. An engine that cannot run here (vLLM, SGLang) is stood
in for by the engine that reads the same files, and its snippet says so.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelmon.core.configuration import Command, ProgramConfig, parse_engine, parse_program
from modelmon.core.errors import OptionsError
from modelmon.core.limits import EVIDENCE_RUNS, MIN_BUDGET_S
from modelmon.core.loaders.engine import Engine
from modelmon.core.loaders.registry import engine_for_loader, get_engine
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.loader_rounds import Entry, LoaderRounds, best_change
from modelmon.core.measuring.recommend import Recommendation, recommend
from modelmon.core.measuring.search import clearly_faster
from modelmon.core.model.records import Model
from modelmon.core.system import readahead
from modelmon.core.watching.result import WatchResult

LOADER_SHARE = 0.5  # of the budget: the loader's rounds (modelmon's search has the rest)
READAHEAD_TRIED_KIB = (1024, 4096, 16384)  # the device's readahead tried on the loader
Progress = Callable[[str], None]


@dataclass(frozen=True)
class LoaderAdvice:
    """The user's loader, what changing it gains, and modelmon's best, from one set of cold
    rounds. Each change's ``verdict`` is its pairs against its baseline (B/A = change /
    baseline); ``baselines`` names each change's baseline by spec."""

    loader: Candidate  # the user's loader as it is
    engine: str | None  # the engine whose settings were tried
    engine_found: str  # how the engine was known: "given", "recognised by the watch", ""
    for_engine: str | None  # the engine the advice is for, when it could not run here
    changes: tuple[Candidate, ...]  # one change each from its baseline, best first
    baselines: dict[str, str]
    pick: Candidate | None  # the change to make: faster than its baseline in every pair
    modelmon: Candidate  # modelmon's best, run in the same rounds
    rounds: int
    watch: WatchResult | None  # the loader as it is, as the watch saw its last run
    notes: tuple[str, ...] = ()

    def baseline_of(self, change: Candidate) -> Candidate:
        spec = self.baselines.get(change.spec, self.loader.spec)
        found = [c for c in self.changes if c.spec == spec]
        return found[0] if found else self.loader

    def gain(self, candidate: Candidate) -> float | None:
        """Its MB/s over its baseline's (the loader as it is, for modelmon's best): the
        median pair by pair where the pairs were judged, else the ratio of the medians; None
        where either has no run. Every figure of a change against its baseline is this one."""
        if candidate.verdict is not None:
            return candidate.verdict.median_ratio
        base = self.loader if candidate is self.modelmon else self.baseline_of(candidate)
        if candidate.results and base.results and base.median_mbps > 0:
            return candidate.median_mbps / base.median_mbps
        return None


@dataclass(frozen=True)
class LoaderRecommendation:
    recommendation: Recommendation  # modelmon's search, as ``recommend`` returns it
    advice: LoaderAdvice | None  # None where the loader could not be measured (see note)
    note: str = ""


def loader_config(
    loader: str | None, engine: str | None, model: Model, path: str | None = None
) -> ProgramConfig:
    """The user's loader from ``--loader`` and ``--engine``, checked before measuring;
    ``path``: what its ``{path}`` stands for (default: the model's)."""
    if loader is None and engine is None:
        raise OptionsError("name your loader: --loader 'cmd: ...' or --engine NAME")
    named = parse_engine(engine) if engine is not None else None
    config = parse_program(loader) if loader is not None else named
    assert config is not None
    for program in (named, config):
        if program is None or program.engine is None:
            continue
        chosen = get_engine(program.engine)
        if model.format not in chosen.formats:
            raise OptionsError(chosen.cannot_load(model.format, path or model.path) or "")
        stand_in = get_engine(chosen.stand_in) if chosen.stand_in else chosen
        why = stand_in.unavailable() or stand_in.refuses(path or model.path)
        if why is not None and program is config:
            raise OptionsError(why)
    return config


def _stand_in(config: ProgramConfig) -> tuple[ProgramConfig, str | None]:
    """An engine that cannot run here is measured as the engine that stands for it."""
    if config.engine is None:
        return config, None
    engine = get_engine(config.engine)
    if engine.stand_in is None:
        return config, None
    stand = ProgramConfig("engine", engine=engine.stand_in, readahead=config.readahead)
    return stand.with_knobs(dict(config.knobs)), engine.name


def _candidate(program: ProgramConfig, role: str) -> Candidate:
    return Candidate(program, role=role)


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


def advise(
    model: Model,
    loader: ProgramConfig,
    rec: Recommendation,
    deadline: float,
    *,
    engine: str | None = None,
    path: str | None = None,
    say: Progress = lambda _: None,
    cancel: threading.Event | None = None,
) -> LoaderAdvice:
    """The loader's rounds, to ``deadline`` (``time.monotonic``) and past it for evidence."""
    measured, for_engine = _stand_in(loader)
    rounds = LoaderRounds(model, path or model.path, deadline, say, cancel)
    as_is = Entry(_candidate(measured, "your loader"), essential=True)
    best = Entry(Candidate(rec.winner.config, role="modelmon's best"))
    best.baseline, best.essential = as_is, True
    say(f"your loader as it is: {measured.spec}")
    rounds.run(as_is)
    chosen, found = _engine_of(measured, engine, as_is.watch)
    notes: list[str] = []
    if chosen is not None and chosen.unavailable() is not None and measured.kind == "cmd":
        notes.append(f"{chosen.label}'s own settings were not measured: {chosen.unavailable()}")
    features = dict(as_is.own["features"]) if as_is.own and "features" in as_is.own else {}
    changes, engine_as_is = _changes(measured, chosen, as_is, features)
    changes += _readahead_changes(measured, model, as_is)
    first = [e for e in (engine_as_is,) if e is not None]
    keep = (EVIDENCE_RUNS - 1) * 3 * max(rounds.pace(as_is), 1.0)
    if as_is.candidate.results:
        rounds.screen(as_is, [*first, *changes, best], keep)
    else:
        notes.append(
            f"your loader failed, so no change of it was measured: {as_is.candidate.reason}"
        )
        rounds.screen(as_is, [best], 0.0)
    leader = best_change(changes)
    finalists = (
        [as_is, *first] if leader is not None and leader.baseline is engine_as_is else [as_is]
    )
    finalists += [e for e in (leader, best) if e is not None]
    needed = (EVIDENCE_RUNS - 1) * sum(rounds.pace(e) for e in finalists if e.candidate.results)
    if needed > rounds.left():
        say(
            f"the evidence rounds ({EVIDENCE_RUNS} cold runs of each of {len(finalists)} "
            f"finalists) need about {needed:.0f} s more: "
            f"{needed - max(rounds.left(), 0.0):.0f} s past the budget"
        )
    total = rounds.settle(finalists)
    if rounds.unsettled:
        notes.append(rounds.unsettled)
    for entry in [*first, *changes, best]:
        entry.candidate.verdict = entry.verdict()
    pick = recommendable(leader, notes)
    ordered = sorted(
        [*first, *changes], key=lambda e: (e.candidate.results != [], e.gain() or 0.0), reverse=True
    )
    return LoaderAdvice(
        loader=as_is.candidate,
        engine=chosen.name if chosen is not None else None,
        engine_found=found,
        for_engine=for_engine,
        changes=tuple(e.candidate for e in ordered),
        baselines={e.spec: e.baseline.spec for e in [*first, *changes, best] if e.baseline},
        pick=pick,
        modelmon=best.candidate,
        rounds=total,
        watch=as_is.watch,
        notes=tuple(notes),
    )


def _engine_of(
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


def recommend_with_loader(
    model: Model,
    budget_s: float,
    *,
    loader: str | None = None,
    engine: str | None = None,
    path: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    started: float | None = None,
    **options: Any,
) -> LoaderRecommendation:
    """``recommend`` (``options`` are its own) on part of the budget, then the loader's
    rounds (``LOADER_SHARE`` of it, and more for the evidence). Arguments are checked first."""
    say = progress or (lambda _: None)
    started = time.monotonic() if started is None else started
    config = loader_config(loader, engine, model, path)
    search_s = max(MIN_BUDGET_S, budget_s * (1 - LOADER_SHARE))
    rec = recommend(model, search_s, progress=say, cancel=cancel, started=started, **options)
    if rec.streaming:
        note = (
            "your loader keeps the whole model in memory, and it does not fit in the RAM "
            "allowed: it was not measured"
        )
        return LoaderRecommendation(rec, None, note)
    deadline = started + max(budget_s, search_s)
    given = engine if loader is not None else None
    advice = advise(model, config, rec, deadline, engine=given, path=path, say=say, cancel=cancel)
    return LoaderRecommendation(rec, advice)


def recommendable(leader: Entry | None, notes: list[str]) -> Candidate | None:
    """The change to recommend: the leader, when faster than its baseline in every pair by
    ``MIN_GAIN`` or more, over ``EVIDENCE_RUNS`` pairs at least (fewer: its other runs failed
    or were cut, and one pair has no noise to judge by; ``notes`` hears why not), and by more
    than its runs' timing can tell apart (``Entry.timing_resolution``)."""
    if leader is None or leader.candidate.verdict is None:
        return None
    verdict, ratios = leader.candidate.verdict, leader.ratios()
    # What the pairs say before their timing is weighed: a change they favour beyond their
    # noise and within its timing is worth a note.
    if not clearly_faster(ratios):
        return None
    pairs = len(ratios)
    if pairs < EVIDENCE_RUNS:
        notes.append(
            f"{leader.spec} ran {verdict.median_ratio:.2f}× its baseline in {pairs} paired "
            f"round{'s' if pairs != 1 else ''} and did not complete the others, so it is not "
            f"recommended: a change to act on rests on {EVIDENCE_RUNS} paired cold runs"
        )
        return None
    if not clearly_faster(ratios, leader.timing_resolution()):  # within its timing
        resolution = verdict.resolution
        seconds = statistics.median(r.seconds for r in leader.by_round.values())
        notes.append(
            f"{leader.spec} ran {verdict.median_ratio:.2f}× its baseline, within what the watch "
            f"times on loads this short ({seconds:.1f} s, sampled every "
            f"{leader.timed_every_s:g} s: ±{resolution:.0%} on a ratio), so it is not recommended "
            "(a larger model, or slower storage, times it finer)"
        )
        return None
    return leader.candidate
