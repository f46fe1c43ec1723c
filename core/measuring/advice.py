"""``recommend`` with the user's loader: the loader as the user runs it, each setting of its
engine that changes how it reads the weights, and modelmon's best, measured in the same cold
rounds (``loader_rounds``), planned from the loader's first run (``loader_plan``) so that
modelmon's search has what they leave of the budget. The advice leads with the best thing
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

import dataclasses
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelmon.core.configuration import ProgramConfig, parse_engine, parse_program
from modelmon.core.errors import BUDGET_NOT_KEPT, BudgetWarning, OptionsError, warn
from modelmon.core.limits import EVIDENCE_OVERRUN, EVIDENCE_RUNS
from modelmon.core.loaders.registry import get_engine
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import MIN_GAIN, clearly_faster
from modelmon.core.measuring.loader_plan import (
    LoaderPlan,
    first_round,
    modelmon_pace,
    short_budget,
)
from modelmon.core.measuring.loader_rounds import Entry, best_change
from modelmon.core.measuring.recommend import (
    BudgetUse,
    Recommendation,
    checked,
    first_pace,
    recommend,
    search_ceilings,
)
from modelmon.core.model.records import Model
from modelmon.core.system.memory import memory_facts
from modelmon.core.watching.result import WatchResult

# The most of the budget modelmon's search takes: the loader's rounds have the rest, and at
# least what they were planned to need at the loader's measured pace (``loader_plan``).
LOADER_SHARE = 0.5
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


def advise(
    plan: LoaderPlan,
    rec: Recommendation,
    say: Progress = lambda _: None,
    search_wall_s: float | None = None,
) -> LoaderAdvice:
    """The rest of the loader's rounds after its first run (``plan``): each change once and
    modelmon's best (``rec``'s), then the finalists' evidence rounds, to the rounds'
    deadline and within its overrun for the evidence. ``search_wall_s``: what a search that
    ran its first load alone took; that load is modelmon's best's run of round 1."""
    rounds, as_is, notes = plan.rounds, plan.as_is, plan.notes
    changes, engine_as_is = plan.changes, plan.engine_as_is
    best = Entry(Candidate(rec.winner.config, role="modelmon's best"))
    best.baseline, best.essential = as_is, True
    ran = [c for c in (*rec.ranked, *rec.unranked) if c.results]
    if search_wall_s is not None and ran == [rec.winner] and len(rec.winner.results) == 1:
        # The same configuration, cold, right after the loader's first run, as round 1
        # would run it: run again it would only spend the budget the evidence needs.
        (searched,) = rec.winner.results
        best.candidate.results.append(searched)
        best.candidate.ended = "finished"
        best.by_round[rounds.round] = searched
        rounds.walls[best.spec] = [search_wall_s]
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
    round_s = sum(rounds.pace(e) for e in finalists if e.candidate.results)
    needed = (EVIDENCE_RUNS - 1) * round_s
    if needed > rounds.left() + rounds.overrun_s:
        held = int(max(rounds.left() + rounds.overrun_s, 0.0) // round_s) if round_s > 0 else 0
        say(
            f"the evidence rounds ({EVIDENCE_RUNS} cold runs of each of {len(finalists)} "
            f"finalists) need about {needed:.0f} s more; the budget holds "
            f"{min(held, EVIDENCE_RUNS - 1)} of those rounds"
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
    chosen = plan.engine
    return LoaderAdvice(
        loader=as_is.candidate,
        engine=chosen.name if chosen is not None else None,
        engine_found=plan.found,
        for_engine=plan.for_engine,
        changes=tuple(e.candidate for e in ordered),
        baselines={e.spec: e.baseline.spec for e in [*first, *changes, best] if e.baseline},
        pick=pick,
        modelmon=best.candidate,
        rounds=total,
        watch=as_is.watch,
        notes=tuple(notes),
    )


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
    """``recommend`` (``options`` are its own) and the loader's rounds in one budget: the
    ceilings, the loader as it is once (``loader_plan.first_round``), then modelmon's search
    on what the rest of the rounds leave (``LOADER_SHARE`` of the budget at most), then the
    rounds. Where the budget cannot hold the search's first load beside the rounds, the
    progress says so before the search starts. Arguments are checked first."""
    say = progress or (lambda _: None)
    started = time.monotonic() if started is None else started
    config = loader_config(loader, engine, model, path)
    limit, workers = options.get("memory_limit"), options.get("workers")
    budget_s, parallel = checked(budget_s, limit, workers)
    usable = memory_facts().usable if limit is None else limit
    if model.total_bytes > usable:
        rec = recommend(model, budget_s, progress=say, cancel=cancel, started=started, **options)
        note = (
            "your loader keeps the whole model in memory, and it does not fit in the RAM "
            "allowed: it was not measured"
        )
        return LoaderRecommendation(rec, None, note)
    known = options.pop("ceilings", None)
    ceilings = search_ceilings(model, known, parallel, say, cancel)
    deadline = started + budget_s
    given = engine if loader is not None else None
    overrun_s = EVIDENCE_OVERRUN * budget_s
    plan = first_round(
        model,
        config,
        deadline,
        overrun_s=overrun_s,
        engine=given,
        path=path,
        say=say,
        cancel=cancel,
    )
    now = time.monotonic()
    first_s = first_pace(model, ceilings)
    best_s = modelmon_pace(model, first_s, plan)
    rounds = plan.rest_of_rounds(best_s)
    search_end = min(started + budget_s * (1 - LOADER_SHARE), deadline - rounds.seconds)
    first_only = search_end - now < best_s  # the search holds its first load alone
    if first_only:  # at modelmon's best's pace in the rounds
        rounds, first_s = rounds.screened_by_search(best_s), best_s
    too_short = short_budget(plan, deadline - now, first_s, rounds, now - started, overrun_s)
    if too_short:
        say(too_short)
        if too_short.startswith(BUDGET_NOT_KEPT):
            warn(too_short, BudgetWarning)
    # The search's first load always runs; a budget that holds nothing more gives it none.
    search_s = max(search_end - now, 0.001)
    rec = recommend(
        model,
        search_s,
        progress=say,
        cancel=cancel,
        started=now,
        ceilings=ceilings,
        baseline=False,  # the loader as it is is the answer's baseline
        planned=True,
        **options,
    )
    advice = advise(plan, rec, say, time.monotonic() - now if first_only else None)
    budget = BudgetUse(
        given_s=budget_s,
        elapsed_s=time.monotonic() - started,
        unmeasured_s=rec.budget.unmeasured_s,
    )
    return LoaderRecommendation(dataclasses.replace(rec, budget=budget), advice)


def clearly_gains(candidate: Candidate, baseline: Candidate) -> bool:
    """The one rule the loader's rounds act on, for a change of the loader and for modelmon's
    best alike: its pairs against ``baseline`` (its ``verdict``, timing included) say it is
    faster in every pair beyond their noise by ``MIN_GAIN`` or more, in every round its
    baseline completed. Fewer than ``EVIDENCE_RUNS`` pairs where the budget held no more
    still act (the answer says it is not certain); fewer because its other runs failed or
    were cut do not."""
    verdict = candidate.verdict
    if verdict is None or verdict.text != "B faster" or verdict.median_ratio < MIN_GAIN:
        return False
    return verdict.pairs >= len(baseline.results)


def recommendable(leader: Entry | None, notes: list[str]) -> Candidate | None:
    """The change to recommend: the leader, where ``clearly_gains`` holds of it against its
    baseline; ``notes`` hears why not where its pairs favour it yet it is not (its other
    runs did not complete, or its gain is within what its runs' timing can tell apart:
    ``Entry.timing_resolution``)."""
    if leader is None or leader.candidate.verdict is None or leader.baseline is None:
        return None
    verdict, ratios = leader.candidate.verdict, leader.ratios()
    # What the pairs say before their timing is weighed: a change they favour beyond their
    # noise and within its timing is worth a note.
    if not clearly_faster(ratios):
        return None
    if clearly_gains(leader.candidate, leader.baseline.candidate):
        return leader.candidate
    pairs = len(ratios)
    if pairs < len(leader.baseline.candidate.results):
        notes.append(
            f"{leader.spec} ran {verdict.median_ratio:.2f}× its baseline in {pairs} paired "
            f"round{'s' if pairs != 1 else ''} and did not complete the others, so it is not "
            "recommended: a change to act on completes every round its baseline does"
        )
        return None
    resolution = verdict.resolution
    seconds = statistics.median(r.seconds for r in leader.by_round.values())
    notes.append(
        f"{leader.spec} ran {verdict.median_ratio:.2f}× its baseline, within what the watch "
        f"times on loads this short ({seconds:.1f} s, sampled every "
        f"{leader.timed_every_s:g} s: ±{resolution:.0%} on a ratio), so it is not recommended "
        "(a larger model, or slower storage, times it finer)"
    )
    return None
