"""What a user applies, measured inside a job's rounds (``matrix.py``), and ranks on one node.

- ``load`` entries: ``modelmon.core.load(path, config=FILE)`` in a fresh process
  (``regret.run_config``), FILE being the config ``recommend`` wrote for the pick, or a
  config holding just the entry's options. The same rounds measure the same configurations
  in worker processes (``strategy`` entries), the ceilings and the peers, so one set of runs
  feeds the environment table, the core.load-vs-measure table and the regret table.
- ``recommended``: recommend's pick and its strong alternatives (``regret.contenders``) as
  entries, and what the report needs about the search (evidence runs, budget kept).
- ``ranks``: the pick as N replica ranks at one barrier against 1 rank (``RanksRun``).
"""

from __future__ import annotations

import statistics
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.regret import contenders, run_config
from modelmon.core.measuring.ranks import RanksRun
from modelmon.core.options import LoadOptions
from modelmon.core.output.config import FORMAT_VERSION, recommendation_document, write_config

if TYPE_CHECKING:
    from benchmarks.matrix import Entry
    from modelmon.core.measuring.recommend import Recommendation
    from modelmon.core.model.records import Model

STANDARD_LOADS = (  # what #10 compares in both forms: the 4-reader strategies, threads=4
    ("sequential", {"workers": 4, "threads": 1, "chunk": 16 << 20}),
    ("pread", {"workers": 4, "threads": 1}),
    ("direct", {"workers": 4, "threads": 1, "chunk": 16 << 20}),
    ("sequential", {"workers": 1, "threads": 4, "chunk": 16 << 20}),
)


def options_of(options: LoadOptions) -> dict[str, Any]:
    return {k: v for k, v in options.to_dict().items() if k != "cache"}


def recommended(rec: Recommendation, folder: Path) -> tuple[list[Entry], dict[str, Any]]:
    """Entries for the pick (as measured and as applied with the written config) and its
    strong alternatives (as applied); the recommendation's record for the report."""
    from benchmarks.matrix import Entry

    config = write_config(folder / "recommended.toml", recommendation_document(rec, "rec.toml"))
    winner = rec.winner
    entries = [
        Entry("strategy", winner.strategy, options_of(winner.options), "recommended"),
        Entry("load", winner.strategy, options_of(winner.options), "recommended"),
    ]
    for rival in contenders(rec)[1:]:
        if rival.peer is None and rival.spec != winner.spec:
            entries.append(Entry("load", rival.strategy, options_of(rival.options), "alternative"))
    used = rec.used
    if used.peer is not None:  # a peer won: the rounds run it with the settings it won with
        env = [[key, value] for key, value in used.peer.env]
        entries.append(Entry("peer", used.strategy, {"env": env}, "recommended"))
    record = {
        "spec": winner.spec,
        "pick": used.spec,
        "pick_is_peer": used.peer is not None,
        "config": str(config),
        "budget_s": rec.budget_s,
        "elapsed_s": rec.elapsed_s,
        "evidence_runs": len(used.results),
        "tie": rec.tie,
        "explanation": list(rec.explanation),
        "ranked": [
            {"spec": c.spec, "median_mbps": c.median_mbps, "role": c.role, "runs": len(c.results)}
            for c in (*rec.ranked, *rec.peers)
        ],
        "candidates": rec.table(),
    }
    return entries, record


def config_for(entry: Entry, folder: Path, recommended_config: str | None) -> str:
    """The config file a user would apply for ``entry``: recommend's own for its pick."""
    if entry.role == "recommended" and recommended_config:
        return recommended_config
    name = f"load-{abs(hash(entry.label)):x}.toml"
    document = {
        "format_version": FORMAT_VERSION,
        "recommended": {"strategy": entry.name, **entry.loaded.to_dict()},
    }
    return str(write_config(folder / name, document))


def load_run(
    model: Model, entry: Entry, cache: str, config: str, limit: float | None
) -> dict[str, Any]:
    files = [f.path for f in model.files]
    run = run_config(model.path, config, files, cache, limit)
    return {
        **run,
        "worker_seconds": [],
        "notes": [],
        "resident_after": None,
    }


def ranks(
    model: Model,
    entry: Entry,
    replicas: int,
    repeats: int,
    say: Any,
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """``entry``'s configuration as 1 rank and as ``replicas`` replica ranks, alternately,
    cold, in discard mode (N copies of the model would not fit in RAM beside the rest).
    Each run is cancelled at ``time_limit_s`` × its ranks (a pick that crawls here, like the
    library on FUSE once, would otherwise hold the bench for many minutes)."""
    options = LoadOptions(**entry.options).with_(cache="cold", discard=True)
    runs: dict[int, list[dict[str, Any]]] = {1: [], replicas: []}
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
            row = {
                "status": result.status,
                "error": result.error,
                "mbps": result.mbps,
                "seconds": result.seconds,
                "cold": result.cache.cold,
                "rank_mbps": [r.result.mbps for r in result.ranks],
                "straggler": None if straggler is None else straggler.ratio,
            }
            runs[count].append(row)
            say(f"ranks={count}: {result.status} {result.mbps:.0f} MB/s aggregate")

    def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
        good = [r for r in rows if r["status"] == "ok"]
        return {
            "runs": rows,
            "ok": len(good),
            "median_mbps": statistics.median(r["mbps"] for r in good) if good else None,
            "median_straggler": (
                statistics.median(r["straggler"] for r in good if r["straggler"]) if good else None
            ),
            "all_cold": all(r["cold"] for r in rows),
        }

    return {
        "spec": entry.spec,
        "replicas": replicas,
        "one": summary(runs[1]),
        "many": summary(runs[replicas]),
    }
