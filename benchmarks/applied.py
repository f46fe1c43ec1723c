"""What a user applies, measured inside a job's rounds (``matrix.py``), and ranks on one node.

- ``load`` entries: ``modelmon.core.load(path, config=FILE)`` in a fresh process
  (``run_config``; the child is ``python -m benchmarks.applied MODEL CONFIG``), FILE being the
  config ``recommend`` wrote for the pick, or a config holding just the entry's options. The
  same rounds measure the same configurations in worker processes (``strategy`` entries), the
  ceilings and the peers, so one set of runs feeds the environment table, the
  core.load-vs-measure table and the regret table.
- ``recommended``: recommend's pick and its strong alternatives (``contenders``) as entries,
  and what the report needs about the search (evidence runs, budget kept).
- ``ranks``: the pick as N replica ranks at one barrier against 1 rank (``RanksRun``).
"""

from __future__ import annotations

import json
import selectors
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.jobs import Entry
from modelmon.core import (
    FORMAT_VERSION,
    LoadOptions,
    RanksRun,
    explain,
    get_strategy,
    host_reported_bytes,
    host_reported_since,
    note_free_memory,
    own_status_bytes,
    prepare_cache,
    prepare_cache_early,
    read_config,
    recommendation_document,
    stop_child_and_close,
    write_config,
)

if TYPE_CHECKING:
    from modelmon.core import Candidate, Model, Recommendation

# Compared in both forms (core.load and measure): the 4-reader strategies, and threads=4.
STANDARD_LOADS = (
    ("sequential", {"workers": 4, "threads": 1, "chunk": 16 << 20}),
    ("pread", {"workers": 4, "threads": 1}),
    ("direct", {"workers": 4, "threads": 1, "chunk": 16 << 20}),
    ("sequential", {"workers": 1, "threads": 4, "chunk": 16 << 20}),
)

READY_TIMEOUT_S = 120.0  # imports on a busy 2-core machine
STRONG = 0.5  # alternatives at least this share of the pick's median are measured again
MAX_ALTERNATIVES = 4


def options_of(options: LoadOptions) -> dict[str, Any]:
    return {k: v for k, v in options.to_dict().items() if k != "cache"}


def recommended(rec: Recommendation, folder: Path) -> tuple[list[Entry], dict[str, Any]]:
    """Entries for the pick (as measured and as applied with the written config) and its
    strong alternatives (as applied); the recommendation's record for the report."""
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
        "explanation": explain(rec),
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


def child_main(path: str, config: str) -> int:
    """In the fresh process: import, say ready, wait for go, load with the config, report."""
    # Imported before ready, as measure's workers import before go: the first load() of a
    # process imports the engine (0.12 s here, 11% of a 2.5 GB load on the local disk), which
    # a program pays once, not per load.
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


def _line_by(child: subprocess.Popen[str], deadline: float | None) -> str | None:
    """The child's next line, or None when the deadline passes first."""
    assert child.stdout is not None
    if deadline is not None:
        with selectors.DefaultSelector() as selector:
            selector.register(child.stdout, selectors.EVENT_READ)
            if not selector.select(max(0.0, deadline - time.monotonic())):
                return None
    return child.stdout.readline()


def run_config(
    path: str,
    config: str,
    files: list[str],
    mode: str = "cold",
    time_limit_s: float | None = None,
) -> dict[str, Any]:
    """``core.load(path, config=config)`` in a fresh process, timed from go to the last
    tensor after the page cache of ``files`` was put in ``mode``; status "cancelled" when
    ``time_limit_s`` passed first."""
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.applied", path, config],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        prepare_cache_early(files, mode)  # type: ignore[arg-type]  # while the child imports
        assert child.stdin is not None
        if _line_by(child, time.monotonic() + READY_TIMEOUT_S) != "ready\n":
            raise RuntimeError("child did not get ready")
        applied = read_config(config)
        fills = get_strategy(applied.strategy).fills_arrays(applied.options)
        state = prepare_cache(files, mode, arrays=None if fills else 0)  # type: ignore[arg-type]
        reported = host_reported_bytes()
        child.stdin.write("go\n")
        child.stdin.flush()
        went = time.monotonic()
        line = _line_by(child, None if time_limit_s is None else went + time_limit_s)
        facts = {
            "cold": state.cold,
            "warm": state.warm,
            "resident_before": state.resident_before,
            "host_reported": host_reported_since(reported),
        }
        if line is None:
            seconds = time.monotonic() - went
            why = f"stopped at the time limit of {time_limit_s:g} s"
            return {
                "status": "cancelled",
                "error": why,
                "bytes": 0,
                "seconds": seconds,
                "mbps": 0.0,
                "peak_rss": 0,
                "rss_ready": 0,
                **facts,
            }
        if not line.strip():
            raise RuntimeError(f"core.load with {config} failed in the child (see stderr)")
        data = json.loads(line)
        child.wait(60)
        mbps = data["bytes"] / data["seconds"] / 1e6
        return {"status": "ok", "error": None, "mbps": mbps, **facts, **data}
    finally:
        stop_child_and_close(child)
        note_free_memory()  # the child's arrays and interpreter


def contenders(rec: Recommendation) -> list[Candidate]:
    pick = rec.used
    strong = [
        c
        for c in (*rec.ranked, *rec.peers)
        if c is not pick
        and c.results
        and c.ended == "finished"
        and c.role != "failure mode"
        and (c.peer is not None or c.median_mbps >= STRONG * pick.median_mbps)
    ]
    strong.sort(key=lambda c: c.median_mbps, reverse=True)
    own = [c for c in strong if c.peer is None][:MAX_ALTERNATIVES]
    return [pick, *own, *(c for c in strong if c.peer is not None)]


if __name__ == "__main__":
    sys.exit(child_main(*sys.argv[1:]))
