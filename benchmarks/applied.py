"""What a user applies, measured inside a job's rounds (``matrix.py``), and ranks on one node.

- ``load`` entries: ``modelmon.core.load(path, config=FILE)`` in a fresh process, through the
  engine's ready/go harness (``run_fresh``; the child is ``python -m benchmarks.applied MODEL
  CONFIG``), FILE being the config ``recommend`` wrote for the pick, or a config holding just
  the entry's options. The same rounds measure the same configurations in worker processes
  (``strategy`` entries), the ceilings and the peers, so one set of runs feeds the
  environment table, the core.load-vs-measure table and the regret table.
- ``recommended``: recommend's pick and its strong alternatives (``contenders``) as entries,
  and what the report needs about the search (evidence runs, budget kept).
- ``ranks``: the pick as N replica ranks at one barrier against 1 rank (``RanksRun``).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.jobs import Cache, Entry
from benchmarks.records import (
    CandidateRow,
    RankRound,
    RanksRecord,
    RanksSide,
    RecommendationRecord,
    Run,
    fresh_run,
)
from modelmon.core import Candidate, Model, RanksRun, Recommendation, read_config
from modelmon.core.options import LoadOptions
from modelmon.core.output import explain_recommendation as explain
from modelmon.core.output import recommendation_document, write_config
from modelmon.core.runs import FORMAT_VERSION, get_strategy, run_fresh
from modelmon.core.system import own_status_bytes

ROOT = Path(__file__).resolve().parents[1]
# Compared in both forms (core.load and measure): the 4-reader strategies, and threads=4.
STANDARD_LOADS = (
    ("sequential", LoadOptions(workers=4, threads=1, chunk=16 << 20)),
    ("pread", LoadOptions(workers=4, threads=1)),
    ("direct", LoadOptions(workers=4, threads=1, chunk=16 << 20)),
    ("sequential", LoadOptions(workers=1, threads=4, chunk=16 << 20)),
)
STRONG = 0.5  # alternatives at least this share of the pick's median are measured again
MAX_ALTERNATIVES = 4


def candidate_row(c: Candidate) -> CandidateRow:
    spread = c.spread_mbps
    low, high = spread if spread else (None, None)
    return CandidateRow(
        c.spec,
        c.role,
        c.program is not None,
        len(c.results),
        c.median_mbps,
        low,
        high,
        c.ended,
        c.reason,
    )


def recommended(rec: Recommendation, folder: Path) -> tuple[list[Entry], RecommendationRecord]:
    """Entries for the pick (as measured and as applied with the written config) and its
    strong alternatives (as applied); the recommendation's record for the report."""
    config = write_config(folder / "recommended.toml", recommendation_document(rec, "rec.toml"))
    winner = rec.winner
    entries = [
        Entry("strategy", winner.strategy, winner.options, role="recommended"),
        Entry("load", winner.strategy, winner.options, role="recommended"),
    ]
    for rival in contenders(rec)[1:]:
        if rival.own is not None and rival.spec != winner.spec:
            entries.append(Entry("load", rival.strategy, rival.options, role="alternative"))
    used = rec.used
    program = used.program
    if program is not None and program.engine is not None:  # another loader won: the rounds
        # run it with the settings it won with
        entries.append(Entry("peer", program.engine, knobs=program.knobs, role="recommended"))
    measured = sorted((*rec.ranked, *rec.peers), key=lambda c: c.median_mbps, reverse=True)
    record = RecommendationRecord(
        spec=winner.spec,
        pick=used.spec,
        pick_is_peer=used.program is not None,
        config=str(config),
        budget_s=rec.budget.given_s,
        elapsed_s=rec.budget.elapsed_s,
        evidence_runs=len(used.results),
        tie=rec.duel is not None and rec.duel.tie,
        explanation=tuple(explain(rec)),
        candidates=tuple(candidate_row(c) for c in (*measured, *rec.unranked)),
    )
    return entries, record


def config_for(entry: Entry, folder: Path, recommended_config: str | None) -> str:
    """The config file a user would apply for ``entry``: recommend's own for its pick."""
    if entry.role == "recommended" and recommended_config:
        return recommended_config
    name = f"load-{abs(hash(entry.label)):x}.toml"
    document = {
        "format_version": FORMAT_VERSION,
        "recommended": {"strategy": entry.name, **entry.options.to_dict()},
    }
    return str(write_config(folder / name, document))


def load_run(model: Model, entry: Entry, cache: Cache, config: str, limit: float | None) -> Run:
    """``core.load(path, config=config)`` in a fresh process, timed by the child from go to
    the last tensor after the page cache was put in ``cache``; status "cancelled" when
    ``limit`` passed first."""
    applied = read_config(config)
    fills = get_strategy(applied.strategy).fills_arrays(applied.options)
    files = [f.path for f in model.files]
    result = run_fresh(
        [sys.executable, "-m", "benchmarks.applied", model.path, config],
        files,
        cache,
        cwd=str(ROOT),
        arrays=None if fills else 0,
        time_limit_s=limit,
    )
    return fresh_run(entry, result)


def ranks(
    model: Model,
    entry: Entry,
    replicas: int,
    repeats: int,
    say: Callable[[str], None],
    time_limit_s: float | None = None,
) -> RanksRecord:
    """``entry``'s configuration as 1 rank and as ``replicas`` replica ranks, alternately,
    cold, in discard mode (N copies of the model would not fit in RAM beside the rest).
    Each run is cancelled at ``time_limit_s`` × its ranks: a pick that crawls here would
    otherwise hold the bench for many minutes."""
    options = entry.options.with_(cache="cold", discard=True)
    runs: dict[int, list[RankRound]] = {1: [], replicas: []}
    for repeat in range(repeats):
        order = (1, replicas) if repeat % 2 == 0 else (replicas, 1)
        for count in order:
            cancel = threading.Event()
            timer = threading.Timer((time_limit_s or 0) * count, cancel.set)
            if time_limit_s:
                timer.start()
            try:
                result = RanksRun(model, entry.name, options, ranks=count, cancel=cancel).run()
            finally:
                timer.cancel()
            straggler = result.straggler
            runs[count].append(
                RankRound(
                    result.status,
                    result.error,
                    result.mbps,
                    result.seconds,
                    result.cache.cold,
                    tuple(r.result.mbps for r in result.ranks),
                    None if straggler is None else straggler.ratio,
                )
            )
            say(f"ranks={count}: {result.status} {result.mbps:.0f} MB/s aggregate")

    def side(rounds: list[RankRound]) -> RanksSide:
        good = [r for r in rounds if r.status == "ok"]
        stragglers = [r.straggler for r in good if r.straggler]
        return RanksSide(
            tuple(rounds),
            len(good),
            statistics.median(r.mbps for r in good) if good else None,
            statistics.median(stragglers) if stragglers else None,
            all(r.cold for r in rounds),
        )

    return RanksRecord(entry.spec, replicas, side(runs[1]), side(runs[replicas]))


def child_main(path: str, config: str) -> int:
    """In the fresh process: import, say ready, wait for go, load with the config, report
    (the protocol of ``modelmon.core.runs.run_fresh``)."""
    # Imported before ready, as measure's workers import before go: the first load() of a
    # process imports the engine, which a program pays once, not per load.
    from modelmon.core import load, open_model

    model = open_model(path)
    ready = own_status_bytes("VmRSS:") or 0  # the interpreter, its imports and the parsed model
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    started = time.perf_counter()
    tensors = load(model, config=config)
    seconds = time.perf_counter() - started
    loaded = sum(int(t.nbytes) for t in tensors.values())
    peak = own_status_bytes("VmHWM:") or 0
    report = {"bytes": loaded, "seconds": seconds, "peak_rss": peak, "rss_ready": ready}
    print(json.dumps(report), flush=True)
    return 0


def contenders(rec: Recommendation) -> list[Candidate]:
    """The pick, then modelmon's strong alternatives (at least ``STRONG`` of its median,
    ``MAX_ALTERNATIVES`` at most) and the measured peers, fastest first."""
    pick = rec.used
    strong = [
        c
        for c in (*rec.ranked, *rec.peers)
        if c is not pick
        and c.results
        and c.ended == "finished"
        and c.role != "failure mode"
        and (c.program is not None or c.median_mbps >= STRONG * pick.median_mbps)
    ]
    strong.sort(key=lambda c: c.median_mbps, reverse=True)
    own = [c for c in strong if c.own is not None][:MAX_ALTERNATIVES]
    return [pick, *own, *(c for c in strong if c.program is not None)]


if __name__ == "__main__":
    sys.exit(child_main(*sys.argv[1:]))
