"""Recommendation: characterise the storage, race strategies (and installed peer loaders)
within a time budget, settle the top two with paired runs, and explain the pick.

1. Ceilings (cold sequential and parallel reads, memcpy): what the storage gives, and the
   first estimate of a run's wall time.
2. Screening: every candidate once, cold, most promising first, while the budget keeps room
   for what follows. A run far behind the leader is cut at once (``cutoff``); a candidate the
   storage rules out (one shared descriptor on FUSE/NFS) is measured once, as the failure
   mode, and never recommended. Then a semifinal: the ``SEMIFINALISTS`` leaders run once more.
3. Finals: the best modelmon candidate and its strongest rival run alternately, cold, in
   pairs, until the budget cannot fit another pair (at least ``PAIRS`` when it can). The
   pairs are judged like an A/B (``ab.judge``); within noise, the more robust of the two is
   recommended (``Candidate.robustness``) and the explanation says so.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelmon.core.errors import LoadError, ReadaheadError
from modelmon.core.measuring.ab import Verdict, judge
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.ceilings import Ceilings, default_parallelism, measure_ceilings
from modelmon.core.measuring.peers import PeerSettings, peer_unavailable
from modelmon.core.measuring.race import Race
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, MiB
from modelmon.core.output.explain import explain
from modelmon.core.system import readahead
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.storage import StorageFacts, storage_facts

Progress = Callable[[str], None]

PAIRS = 3  # paired runs of the finalists the budget is planned for: the winner runs ≥ 5 times
MIN_PAIRS = 2  # fewer pairs than this decide nothing: the more robust finalist is picked
SEMIFINALISTS = 4  # leaders of the screening that run once more before the finals are chosen
SCREEN_FIRST = 2  # candidates screened whatever the reserve for the finals (a race needs two)
LATER_SHARE = 0.5  # of the budget left when screening starts, at most this is kept for later
# Device readahead tried for the leading strategy, where modelmon may set it: the kernel's
# default, the common "raise it" advice, and two steps past it.
READAHEAD_KIB = (128, 1024, 4096, 16384)


@dataclass(frozen=True)
class Recommendation:
    model: Model
    winner: Candidate  # the modelmon configuration the config file holds
    ranked: tuple[Candidate, ...]  # modelmon candidates, best first, every one measured
    ceilings: Ceilings
    streaming: bool  # the model does not fit in the RAM allowed: discard-mode loads only
    usable_ram: int
    budget_s: float
    elapsed_s: float
    explanation: tuple[str, ...]
    runner_up: Candidate | None = None  # the finalist not picked (modelmon's best if a peer won)
    verdict: Verdict | None = None  # the finals' pairs, B/A = runner-up / pick
    tie: bool = False  # the finals were within noise: the more robust one was picked
    pick: Candidate | None = None  # what to use: the winner, or a peer that beat it
    peers: tuple[Candidate, ...] = ()  # installed peer loaders, measured like candidates
    absent_peers: tuple[str, ...] = ()  # peers not installed here, one note each
    unranked: tuple[Candidate, ...] = ()  # failed, or no budget left for them
    pairs: int = 0  # paired runs in the finals

    @property
    def used(self) -> Candidate:
        return self.pick or self.winner

    def table(self) -> list[dict[str, Any]]:
        """Every candidate (modelmon and peers), best first: the ranking's rows."""
        rows = sorted((*self.ranked, *self.peers), key=lambda c: c.median_mbps, reverse=True)

        def row(c: Candidate) -> dict[str, Any]:
            return c.to_dict() | {"picked": c is self.used, "in_config": c is self.winner}

        return [row(c) for c in rows] + [row(c) for c in self.unranked]


def candidates(model: Model, fits: bool, parallel: int) -> list[Candidate]:
    """The search space, most promising first (the budget trims from the end).

    Options are what a loader would apply (cache "keep"); every run is made cold.
    """
    base = LoadOptions(threads=1, discard=not fits)  # each candidate names its own threads
    grid = [
        Candidate("sequential", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate("library", base, role="baseline"),
        Candidate("mmap-shared-fd", base.with_(workers=parallel), role="failure mode"),
        Candidate("pread", base.with_(workers=parallel, threads=2)),
        Candidate("mmap", base.with_(workers=parallel)),
        Candidate("mmap-view", base.with_(workers=parallel)),
        Candidate("sequential", base.with_(workers=1, chunk=16 * MiB)),
        Candidate("direct", base.with_(workers=parallel, chunk=16 * MiB)),
        Candidate("sequential", base.with_(workers=parallel, threads=2, chunk=64 * MiB)),
        Candidate("sequential", base.with_(workers=parallel, chunk=4 * MiB, fadvise="sequential")),
        Candidate("pread", base.with_(workers=1, threads=4)),
        Candidate("sequential", base.with_(workers=2 * parallel, chunk=16 * MiB)),
        Candidate("mmap", base.with_(workers=1, madvise="sequential")),
    ]
    if fits:  # a warm-up pass only makes sense when the whole model stays in the page cache
        grid.insert(7, Candidate("warmup", base.with_(workers=parallel)))
    return grid


def peer_candidates(model: Model, fits: bool, parallel: int) -> tuple[list[Candidate], list[str]]:
    """Installed peer loaders with the settings a user would set; a note for each absent one.

    Peers keep every tensor in RAM, so they are measured only when the model fits.
    """
    if model.format != "safetensors":
        return [], []
    if not fits:
        return [], ["peer loaders were not measured: they load the whole model into RAM"]
    settings = {
        "runai-model-streamer": [
            PeerSettings(
                "runai-model-streamer",
                (("RUNAI_STREAMER_CONCURRENCY", str(n)), ("RUNAI_STREAMER_CHUNK_BYTESIZE", chunk)),
            )
            for n, chunk in ((parallel, str(8 * MiB)), (16, str(8 * MiB)))
        ],
        "fastsafetensors": [PeerSettings("fastsafetensors")],
        "safetensors": [PeerSettings("safetensors")],
    }
    found, absent = [], []
    numpy_types = {"F64", "F32", "F16", "I64", "I32", "I16", "I8", "U8", "BOOL"}
    odd = sorted({e.dtype for e in model.extents} - numpy_types)
    for name, variants in settings.items():
        why = peer_unavailable(name)
        if why is None and name == "safetensors" and odd:  # its numpy path has no such types
            why = f"safetensors (numpy) was not measured: it cannot load {', '.join(odd)} tensors"
        if why is not None:
            absent.append(why)
            continue
        unique = list(dict.fromkeys(variants))
        found += [Candidate(name, LoadOptions(), role="peer", peer=s) for s in unique]
    return found, absent


def ruled_out_by(facts: StorageFacts, candidate: Candidate) -> str | None:
    """Why the storage rules ``candidate`` out, or None."""
    if candidate.strategy != "mmap-shared-fd" or not (facts.is_fuse or facts.is_network):
        return None
    kind = "FUSE" if facts.is_fuse else "network"
    workers, threads = candidate.options.workers, candidate.options.threads
    who = f"{workers} workers" + (f" × {threads} threads" if threads > 1 else "")
    return (
        f"ruled out by storage: {who} sharing one descriptor on a {kind} mount "
        f"({facts.fs_type}) serialise on it: measured once, as the failure mode"
    )


def finals_reserve(race: Race, pool: list[Candidate]) -> float:
    """Budget kept for ``PAIRS`` pairs of the two leaders so far, at their own paces."""
    own, rival = finalists(pool)
    paces = [race.pace(c) for c in (own, rival) if c is not None]
    paces += [race.leader_pace_s] * (2 - len(paces))
    return PAIRS * sum(paces)


def leaders(pool: list[Candidate], count: int) -> list[Candidate]:
    eligible = [c for c in pool if c.results and c.ended == "finished" and c.role != "failure mode"]
    return sorted(eligible, key=lambda c: c.median_mbps, reverse=True)[:count]


def semis_reserve(race: Race, pool: list[Candidate]) -> float:
    """Budget kept for one more run of each of the ``SEMIFINALISTS`` leaders so far."""
    runs = leaders(pool, SEMIFINALISTS)
    return sum(race.pace(c) for c in runs) + race.leader_pace_s * (SEMIFINALISTS - len(runs))


def semifinal(race: Race, pool: list[Candidate]) -> None:
    """One more run of each leader: finalists chosen on one run each are chosen by the noise
    (on a shared machine a lucky run is 2× the next one), on two they are not as easily."""
    for candidate in leaders(pool, SEMIFINALISTS):
        keep = finals_reserve(race, pool)
        if race.left() - keep < race.pace(candidate):
            break
        race.run(candidate, keep_s=keep)


def screening_order(own: list[Candidate], rivals: list[Candidate]) -> list[Candidate]:
    """modelmon's first candidates, then its others and the peers in turn: a peer's run costs
    a process start and its imports, and four peers in a row once used all of the screening
    a short budget left, so that none of modelmon's other candidates ran."""
    rest, order = own[SCREEN_FIRST:], list(own[:SCREEN_FIRST])
    for index in range(max(len(rest), len(rivals))):
        order += rest[index : index + 1] + rivals[index : index + 1]
    return order


def screen(race: Race, order: list[Candidate], facts: StorageFacts, later_runs: int = 0) -> None:
    """Each candidate once, while the budget keeps room for the semifinal, the finals and
    ``later_runs`` more runs at the leader's pace (the readahead round)."""
    screened = 0
    # The later rounds may keep at most this share of what screening starts with: planned
    # at full size (14 runs with the readahead round) they once took the whole of a 45 s
    # budget on a fast disk, and 15 of 17 candidates were never run. They adapt to what is
    # left (fewer pairs, fewer readahead values), a candidate never run cannot.
    cap = LATER_SHARE * race.left()
    for candidate in order:
        reserve = finals_reserve(race, order) + semis_reserve(race, order)
        reserve += later_runs * race.leader_pace_s
        keep = min(reserve, cap) if screened >= SCREEN_FIRST else 0.0
        first = race.leader is None and not any(c.wall_seconds for c in order)
        if race.left() - keep < race.pace(candidate) and not first:
            candidate.ended, candidate.reason = "not measured", "not measured: no budget left"
            continue
        race.run(candidate, first=first, keep_s=keep)  # a slow one is stopped short of it
        screened += 1
        why = ruled_out_by(facts, candidate)
        if why is not None:
            candidate.ended, candidate.reason = "ruled out", why


def readahead_round(race: Race, pool: list[Candidate], paths: list[str]) -> None:
    """The leading strategy again with each of ``READAHEAD_KIB`` set on the device (not the
    value it has now: the leader ran with that), once each while the budget keeps the
    semifinal's and finals' reserve; they join ``pool`` and go on like any candidate. Only
    where readahead can be set (the caller checks)."""
    own, _ = finalists(pool)
    if own is None or own.strategy == "direct" or own.options.readahead is not None:
        return  # O_DIRECT bypasses readahead
    current = {knob.read_kb() for knob in readahead.knobs_of(paths)}
    for kb in READAHEAD_KIB:
        if current == {kb}:
            continue
        candidate = Candidate(own.strategy, own.options.with_(readahead=kb))
        pool.append(candidate)
        keep = finals_reserve(race, pool) + semis_reserve(race, pool)
        if race.left() - keep < race.pace(candidate):
            candidate.ended, candidate.reason = "not measured", "not measured: no budget left"
            continue
        try:
            race.run(candidate, keep_s=keep)
        except ReadaheadError as exc:  # e.g. another modelmon run started on the device
            candidate.ended, candidate.reason = "failed", f"failed: {exc}"


def finalists(pool: list[Candidate]) -> tuple[Candidate | None, Candidate | None]:
    """The best modelmon candidate and its strongest rival (modelmon or peer)."""
    eligible = [c for c in pool if c.results and c.ended == "finished" and c.role != "failure mode"]
    eligible.sort(key=lambda c: c.median_mbps, reverse=True)
    own = next((c for c in eligible if c.peer is None), None)
    rival = next((c for c in eligible if c is not own), None)
    if own is not None and own.options.readahead is not None:
        # A changed readahead is a change of the machine: it must beat the same configuration
        # with the device as it is, in pairs, or the device is left alone (within noise, the
        # more robust one wins). Screening medians alone once recommended 16 MiB at 1282 MB/s
        # against 1287 with the device's own value.
        base = own.options.with_(readahead=None)
        rival = next(
            (
                c
                for c in eligible
                if c.peer is None and c.strategy == own.strategy and c.options == base
            ),
            rival,
        )
    return own, rival


def finals(race: Race, a: Candidate, b: Candidate) -> list[float]:
    """A and B alternately, cold, until another pair would overrun the budget; B/A ratios."""
    ratios: list[float] = []
    while race.left() >= race.pace(a) + race.pace(b):
        first, second = (a, b) if len(ratios) % 2 == 0 else (b, a)  # alternate who starts
        one = race.run(first, race=False)
        if one is None or race.left() < race.pace(second):
            break
        two = race.run(second, race=False)
        if two is None:
            break
        ra, rb = (one, two) if first is a else (two, one)
        ratios.append(rb.mbps / ra.mbps)
    return ratios


def decide(
    own: Candidate, rival: Candidate, ratios: list[float]
) -> tuple[Candidate, Candidate, Verdict, bool]:
    """From the finals' rival/own ratios: (pick, the other, its verdict vs the pick, tie).

    Judged as an A/B (``ab.judge``: every pair agrees and the gain is beyond the noise);
    within noise the more robust one (``Candidate.robustness``) is picked.
    """
    verdict = judge(ratios)
    # One pair has no estimate of the noise (judge says so in its note): not a verdict.
    tie = verdict.text == "within noise" or len(ratios) < MIN_PAIRS
    rival_wins = rival.robustness() < own.robustness() if tie else verdict.text == "B faster"
    if rival_wins:
        best, other, ratios = rival, own, [1 / r for r in ratios]
    else:
        best, other = own, rival
    return best, other, judge(ratios), tie  # other / best: "A faster" = the pick is faster


def settle(
    race: Race, own: Candidate, rival: Candidate | None
) -> tuple[Candidate, Candidate | None, Verdict | None, bool, int]:
    """The finals: (pick, the other finalist, its paired verdict vs the pick, within noise,
    pairs run). The pick may be a peer; ``own`` stays the config's."""
    if rival is None:
        fill(race, own)
        return own, None, None, False, 0
    ratios = finals(race, own, rival)  # rival / own
    if not ratios:  # no pair fitted the budget: the screening medians decide, undecided
        best, other = sorted((own, rival), key=lambda c: c.median_mbps, reverse=True)
        return best, other, None, False, 0
    best, other, verdict, tie = decide(own, rival, ratios)
    other.verdict = verdict
    fill(race, best)
    return best, other, verdict, tie, len(ratios)


NEEDED_CEILINGS = ("sequential_read", "parallel_read", "memcpy")


def _first_pace(model: Model, ceilings: Ceilings) -> float:
    """A run's wall time before any candidate ran: the parallel-read ceiling's (whose wall
    time includes starting its workers), else its bytes at its rate."""
    parallel = ceilings.get("parallel_read")
    if parallel is None or parallel.mbps <= 0:  # cancelled before it was measured
        return 0.0
    return parallel.wall_s or model.file_bytes / (parallel.mbps * 1e6)


def fill(race: Race, best: Candidate) -> None:
    """Spend what is left of the budget, too little for a pair, on more runs of the pick."""
    while race.left() >= race.pace(best) and race.run(best, race=False) is not None:
        pass


def recommend(
    model: Model,
    budget_s: float = 120.0,
    *,
    memory_limit: int | None = None,
    workers: int | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
    pool: list[Candidate] | None = None,
    peers: bool = True,
    ceilings: Ceilings | None = None,
) -> Recommendation:
    """Measure and pick. ``pool`` replaces the built-in search space; ``peers`` False leaves
    other loaders out. ``ceilings``: measured on this model in this session (the window's):
    reused, so that one set of ceilings stands for the model; those missing are measured."""
    say = progress or (lambda _: None)
    started = time.monotonic()
    usable = memory_facts().usable if memory_limit is None else memory_limit
    fits = model.total_bytes <= usable
    parallel = workers or default_parallelism()
    facts = storage_facts(model.files[0].path)
    known = ceilings if ceilings is not None else Ceilings(model.path, ())
    missing = tuple(name for name in NEEDED_CEILINGS if known.get(name) is None)
    if missing:
        say("measuring the ceilings of this storage (cold sequential and parallel reads, memcpy)")
    else:
        say("using the ceilings already measured on this model in this session")
    ceilings = known.merged(
        measure_ceilings(model, missing, repeats=1, workers=parallel, cancel=cancel)
    )
    race = Race(model, started + budget_s, _first_pace(model, ceilings), say, cancel)
    race.check_cancel()
    own = candidates(model, fits, parallel) if pool is None else pool
    rivals, absent = peer_candidates(model, fits, parallel) if peers else ([], [])
    for note in absent:
        say(note)
    order = screening_order(own, rivals)
    paths = [f.path for f in model.files]
    settable = pool is None and readahead.unavailable(paths) is None
    screen(race, order, facts, len(READAHEAD_KIB) if settable else 0)
    if settable:
        readahead_round(race, order, paths)
    semifinal(race, order)
    winner, rival = finalists(order)
    if winner is None:
        raise LoadError("no candidate load completed: nothing to recommend")
    best, runner_up, verdict, tie, pairs = settle(race, winner, rival)
    pick = None
    if best.peer is None:
        winner = best
    else:  # a peer beat modelmon's best, which the config file still holds
        pick = best
    measured = [c for c in order if c.results or c.stopped_below_mbps is not None]
    ranked = tuple(
        sorted((c for c in measured if c.peer is None), key=lambda c: c.median_mbps, reverse=True)
    )
    measured_peers = tuple(c for c in order if c.peer is not None and c.ended != "not measured")
    unranked = tuple(c for c in order if c.ended in ("not measured", "failed") and c.peer is None)
    rec = Recommendation(
        model,
        winner,
        ranked,
        ceilings,
        not fits,
        usable,
        budget_s,
        0.0,
        (),
        runner_up,
        verdict,
        tie,
        pick,
        measured_peers,
        tuple(absent),
        unranked,
        pairs,
    )
    text = explain(rec, facts)
    return _finished(rec, time.monotonic() - started, text)


def _finished(rec: Recommendation, elapsed: float, text: list[str]) -> Recommendation:
    return dataclasses.replace(rec, elapsed_s=elapsed, explanation=tuple(text))
