"""Recommendation: characterise the storage, race the candidates (modelmon's configurations and
the other loaders installed here, ``loaders.registry``) within a time budget, and keep the
record of what was measured and picked. (The pick in words is ``output.explain``'s.)

The ceilings (cold sequential and parallel reads, memcpy) say what the storage gives and
how long a first run should take; the search space is ``measuring.search_space``, its order
and the search itself ``measuring.search``. This module holds the budget and the record of
the outcome.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core.errors import (
    BUDGET_NOT_KEPT,
    BudgetWarning,
    DoesNotFitError,
    LoadError,
    warn,
)
from modelmon.core.limits import (
    DEFAULT_BUDGET_S,
    EVIDENCE_OVERRUN,
    EVIDENCE_RUNS,
    MAX_SEARCH_WORKERS,
    check_budget,
    check_whole,
)
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceiling_records import Ceilings
from modelmon.core.measuring.ceilings import default_parallelism, measure_ceilings
from modelmon.core.measuring.judging import Duel
from modelmon.core.measuring.limit_probe import LimitProbes, LimitSearch
from modelmon.core.measuring.object_search import BucketSearch, object_candidates
from modelmon.core.measuring.race import Race
from modelmon.core.measuring.search import Search, screening_order
from modelmon.core.measuring.search_space import (
    candidates,
    peer_candidates,
    readahead_variants,
    storage_lead,
)
from modelmon.core.model.records import Model
from modelmon.core.system import readahead
from modelmon.core.system.memory import check_memory_limit, memory_facts
from modelmon.core.system.memory_limit import PROCESS_BYTES, ram_text, size_text
from modelmon.core.system.storage import RAM_FS_TYPES, StorageFacts, storage_facts

Progress = Callable[[str], None]

# Under a memory limit, the share of the budget the search leaves for the pick's runs under
# smaller limits (``limit_probe``): with what the search leaves unspent, two or three runs.
PROBE_SHARE = 0.2


@dataclass(frozen=True, kw_only=True)
class BudgetUse:
    given_s: float  # the budget asked for
    elapsed_s: float  # the whole search, counted from the caller's start
    # More budget that would have screened the candidates not measured, once each, at the
    # paces this search measured (a peer's with its process start): what to ask for next.
    unmeasured_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """What a search measured and picked. Its words are ``output.explain.explain(rec)``'s."""

    model: Model
    winner: Candidate  # the modelmon configuration the config file holds
    ranked: tuple[Candidate, ...]  # modelmon candidates, best first, every one measured
    ceilings: Ceilings
    usable_ram: int
    budget: BudgetUse
    storage: StorageFacts | None = None  # the model's storage as the search found it
    duel: Duel | None = None  # how the pick was settled; None: nothing to compare it with
    pick: Candidate | None = None  # what to use: the winner, or a peer that beat it
    peers: tuple[Candidate, ...] = ()  # installed peer loaders, measured like candidates
    absent_peers: tuple[str, ...] = ()  # peers not installed here, one note each
    unranked: tuple[Candidate, ...] = ()  # failed, or no budget left for them
    # Under a memory limit: the pick's runs under smaller limits (the smallest it holds at).
    limit_probes: LimitProbes | None = None

    @property
    def used(self) -> Candidate:
        return self.pick or self.winner


def refuse_unless_fits(model: Model, allowed: int, limited: bool) -> None:
    """DoesNotFitError, before anything is measured, when the weights and a process outgrow
    ``allowed`` (a memory limit, else the RAM usable now): a recommendation is a way to load
    the weights, and a load that keeps nothing loads none."""
    needs = model.total_bytes + PROCESS_BYTES
    if needs <= allowed:
        return
    what = "the memory limit" if limited else "the RAM usable now"
    raise DoesNotFitError(
        f"does not fit: the weights need at least {ram_text(needs)} ({ram_text(model.total_bytes)}"
        f" of tensors and {ram_text(PROCESS_BYTES)} for the process; the page cache a load "
        f"reads through is reclaimable), {what} is {ram_text(allowed)}. What would fit: "
        f"--memory-limit {-(-needs // 2**20)}Mi or more, or a part of the weights per "
        "process (N tensor-parallel ranks each hold 1/N: recommend --ranks N measures them); "
        "`modelmon load --discard` measures the storage's speed without keeping the weights",
        needs,
        allowed,
    )


def left_out(order: list[Candidate]) -> tuple[Candidate, ...]:
    """The candidates the ranking has no rate for: modelmon's that failed, and every one the
    budget never reached. A peer never reached is listed with them (a failed peer is among
    the measured peers, with its error): a user who has Run:ai installed reads that it was
    not measured, rather than finding it missing."""
    return tuple(
        c for c in order if c.ended == "not measured" or (c.ended == "failed" and c.own is not None)
    )


# keeping_read: no bound, what says what holds a keeping load under its storage bound.
NEEDED_CEILINGS = (
    "sequential_read",
    "parallel_read",
    "storage",
    "memory_fill",
    "memcpy",
    "keeping_read",
)


def first_pace(model: Model, ceilings: Ceilings) -> float:
    """A run's wall time before any candidate ran: the parallel-read ceiling's (whose wall
    time includes starting its workers), else its bytes at its rate."""
    parallel = ceilings.get("parallel_read")
    if parallel is None or parallel.mbps <= 0:  # cancelled before it was measured
        return 0.0
    return parallel.wall_s or model.file_bytes / (parallel.mbps * 1e6)


def short_budget(
    left_s: float, pace_s: float, overrun_s: float, loads: int, budget_s: float
) -> str:
    """What the budget left after the ceilings (``left_s``) cannot hold, said before the
    search starts: the ``loads`` every answer rests on (a first load, and the baseline's
    where it is reserved) at ``pace_s`` each, then the pick's ``EVIDENCE_RUNS``, with the
    evidence overrun (``overrun_s``) past the budget; "" where it holds them."""
    if pace_s <= 0:
        return ""
    left = max(left_s, 0.0)
    needed = loads * pace_s
    which = "a first load and the baseline's" if loads > 1 else "a first load"
    head = f"{left:.0f} s of the budget are left after the ceilings"
    if left_s < -0.5:  # the ceilings overran it already: that is past it too
        head = f"the ceilings took it and {-left_s:.0f} s more"
        left = left_s
    if needed > left + overrun_s:
        return (
            f"{BUDGET_NOT_KEPT}: {head}, and the loads every answer rests on ({which}) "
            f"take about {needed:.0f} s at the ceilings' pace: the search will end about "
            f"{needed - left:.0f} s past it"
        )
    evidence = needed + (EVIDENCE_RUNS - 1) * pace_s
    if evidence <= left + overrun_s:
        return ""
    ask = math.ceil((budget_s + evidence - left - overrun_s) / 10) * 10
    fit = f"{which} fit" if needed <= left else f"{which} end up to {overrun_s:.0f} s past it"
    return (
        f"{head}: {fit}, but the pick may rest on fewer than {EVIDENCE_RUNS} runs (about "
        f"{pace_s:.0f} s each); a budget of {ask} s or more holds them"
    )


def checked(budget_s: float, memory_limit: int | None, workers: int | None) -> tuple[float, int]:
    """The budget, refused where out of range, and the parallelism to search at (the widest
    candidate runs ``SEARCH_WIDTH`` × it: a machine with more CPUs than that allows searches
    at the most it allows); the memory limit and the workers checked too."""
    budget_s = check_budget(budget_s)
    if memory_limit is not None:
        check_memory_limit(memory_limit)
    if workers is not None:
        check_whole("workers", workers, 1, MAX_SEARCH_WORKERS)
    return budget_s, workers or min(default_parallelism(), MAX_SEARCH_WORKERS)


def search_ceilings(
    model: Model,
    known: Ceilings | None,
    parallel: int,
    say: Progress,
    cancel: threading.Event | None,
) -> Ceilings:
    """The ceilings a search needs (``NEEDED_CEILINGS``): ``known``'s, and those it lacks
    measured now (said first)."""
    known = known if known is not None else Ceilings(model.path, ())
    missing = tuple(name for name in NEEDED_CEILINGS if known.get(name) is None)
    remote = any(file.remote is not None for file in model.files)
    if not missing:
        say("using the ceilings already measured on this model")
        return known
    if remote:
        say(
            "measuring the ceilings of this bucket and memory (the curve of plain GETs: "
            "connections × part sizes; filling fresh memory, memcpy)"
        )
    else:
        # A file in RAM (tmpfs) cannot be made cold: its reads are not called cold.
        cold = "" if storage_facts(model.files[0].path).fs_type in RAM_FS_TYPES else "cold "
        say(
            f"measuring the ceilings of this storage and memory ({cold}plain reads, "
            "filling fresh memory, memcpy)"
        )
    return known.merged(
        measure_ceilings(model, missing, repeats=1, workers=parallel, cancel=cancel)
    )


def recommend(
    model: Model,
    budget_s: float = DEFAULT_BUDGET_S,
    *,
    memory_limit: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    pool: list[Candidate] | None = None,
    peers: bool = True,
    ceilings: Ceilings | None = None,
    started: float | None = None,
    baseline: bool = True,
    planned: bool = False,
) -> Recommendation:
    """Measure and pick. ``pool`` replaces the built-in search space; ``peers`` False leaves
    other loaders out. ``ceilings``: measured on this model in this session (the window's):
    reused, so that one set of ceilings stands for the model; those missing are measured.

    ``budget_s`` bounds the whole search, counted from ``started`` (``time.monotonic()``;
    default: now), so a command that passes its own start ends near it. The ceilings and a
    first complete load always run (without them there is no answer), and with ``baseline``
    the baseline's run right after it (what a user runs who changes nothing: the answer's gain
    is against it; ``search.Search``'s reserve); where the budget cannot hold those, the
    progress says so before the search starts (``short_budget``). The pick's runs, and the
    baseline's, may overrun by ``EVIDENCE_OVERRUN`` of the budget. Under a
    ``memory_limit``, ``PROBE_SHARE`` of the budget is kept from the search for the pick's
    runs under smaller limits (``limit_probe``: the smallest limit it holds at).
    ``planned``: the caller measured the ceilings and said what its budget holds
    (``advice.recommend_with_loader``), so neither is said again.

    The arguments are checked before anything is measured (``core.limits``)."""
    say = progress or (lambda _: None)
    started = time.monotonic() if started is None else started
    budget_s, parallel = checked(budget_s, memory_limit, workers)
    remote = any(file.remote is not None for file in model.files)
    usable = memory_facts().usable if memory_limit is None else memory_limit
    refuse_unless_fits(model, usable, memory_limit is not None)
    facts = None if remote else storage_facts(model.files[0].path)
    ceilings = search_ceilings(
        model, ceilings, parallel, (lambda _: None) if planned else say, cancel
    )
    probe_s = 0.0 if memory_limit is None else PROBE_SHARE * budget_s
    race = Race(
        model,
        started + budget_s - probe_s,
        first_pace(model, ceilings),
        say,
        cancel,
        evidence_overrun_s=EVIDENCE_OVERRUN * budget_s,
        memory_limit=memory_limit,
    )
    race.check_cancel()
    loads = 2 if baseline else 1  # the first load, and the baseline's when it is reserved
    plan = short_budget(race.left(), race.first_pace_s, race.evidence_overrun_s, loads, budget_s)
    if plan and not planned:
        say(plan)
        if plan.startswith(BUDGET_NOT_KEPT):
            warn(plan, BudgetWarning)
    if pool is not None:
        own = pool
    elif remote:
        own = object_candidates(model, ceilings)
    else:
        own = candidates(model, parallel, storage_lead(ceilings))
    rivals, absent = peer_candidates(model, parallel) if peers else ([], [])
    for note in absent:
        say(note)
    order = screening_order(own, rivals)
    paths = [f.path for f in model.files]
    settable = pool is None and not remote and readahead.unavailable(paths) is None
    variants = readahead_variants(paths) if settable else None
    searching = BucketSearch if remote else Search
    best, duel = searching(race, order, facts, variants, reserve=baseline).run()
    if best is None:
        limited = memory_limit is not None and any("memory limit" in c.reason for c in order)
        under = f" under the memory limit of {size_text(memory_limit or 0)}" if limited else ""
        raise LoadError(f"no candidate load completed{under}: nothing to recommend")
    probes = None
    if memory_limit is not None:
        race.deadline += probe_s
        probes = LimitSearch(race, best, memory_limit).run(say, cancel)
    measured = [c for c in order if c.results or c.stopped_below_mbps is not None]
    ranked = tuple(
        sorted(
            (c for c in measured if c.own is not None), key=lambda c: c.median_mbps, reverse=True
        )
    )
    # Another loader picked: the config file holds modelmon's best, measured too.
    winner = best if best.own is not None else _best_own(order)
    measured_peers = tuple(c for c in order if c.own is None and c.ended != "not measured")
    unranked = left_out(order)
    return Recommendation(
        model=model,
        winner=winner,
        ranked=ranked,
        ceilings=ceilings,
        usable_ram=usable,
        budget=BudgetUse(
            given_s=budget_s,
            elapsed_s=time.monotonic() - started,
            unmeasured_s=sum(race.pace(c) for c in unranked if c.ended == "not measured"),
        ),
        storage=facts,
        duel=duel,
        pick=None if best is winner else best,
        peers=measured_peers,
        absent_peers=tuple(absent),
        unranked=unranked,
        limit_probes=probes,
    )


def _best_own(order: list[Candidate]) -> Candidate:
    """modelmon's fastest candidate that finished (the failure mode is never one)."""
    own = [
        c
        for c in order
        if c.own is not None and c.results and c.ended == "finished" and c.role != "failure mode"
    ]
    return max(own, key=lambda c: c.median_mbps)
