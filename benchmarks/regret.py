"""Regret of ``recommend`` on one model: how much slower is its pick than the best alternative?

    python -m benchmarks.regret MODEL [--budget 120] [--runs 3] [--json out.json] [--md out.md]
    python -m benchmarks.regret --synth DIR ...   # first write a 1.5 GB Llama-shaped model there

One job of ``./dev bench`` (``matrix.run_job``) on this model, here: ``recommend(model,
budget)``, then its pick (measured, and applied through ``modelmon.core.load(path,
config=FILE)`` in a FRESH process with the config it wrote), its strong alternatives (applied
the same way) and the installed peers, round-robin, ≥ 3 rounds, every run from a verified cold
page cache, timed from go to the last tensor; confirmation pairs when an alternative beat the
pick. The regret and its table are the bench's own (``regret_tables``), printed as JSON and as
markdown with the load average (the machine may be shared).

This module also holds the fresh-process child (``run_config``) and ``contenders``, which the
bench's rounds use.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from modelmon.core.loading.strategies.base import get_strategy
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.peers import PEERS, check_import, stop_child_and_close
from modelmon.core.measuring.recommend import Recommendation
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.output.config import read_config
from modelmon.core.system import cache, host_memory
from modelmon.core.system.proc_status import own_status_bytes

READY_TIMEOUT_S = 120.0  # imports on a busy 2-core machine
STRONG = 0.5  # alternatives at least this share of the pick's median are measured again
MAX_ALTERNATIVES = 4


def child_main(path: str, config: str) -> int:
    """In the fresh process: import, say ready, wait for go, load with the config, report."""
    import modelmon.core
    import modelmon.core.api  # what load() imports on first use

    # Imported before ready, as measure's workers import before go: the first load() of a
    # process imports the engine (0.12 s here, 11% of a 2.5 GB load on the local disk), which
    # a program pays once, not per load.
    model = modelmon.core.open_model(path)
    ready = own_status_bytes("VmRSS:") or 0  # the interpreter, its imports and the parsed model
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        return 1
    started = time.perf_counter()
    tensors = modelmon.core.load(model, config=config)
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
        [sys.executable, "-m", "benchmarks.regret", "--child", path, config],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        cache.prepare_early(files, mode)  # type: ignore[arg-type]  # while the child imports
        assert child.stdin is not None
        if _line_by(child, time.monotonic() + READY_TIMEOUT_S) != "ready\n":
            raise RuntimeError("child did not get ready")
        applied = read_config(config)
        fills = get_strategy(applied.strategy).fills_arrays(applied.options)
        state = cache.prepare(files, mode, arrays=None if fills else 0)  # type: ignore[arg-type]
        reported = host_memory.reported_bytes()
        child.stdin.write("go\n")
        child.stdin.flush()
        went = time.monotonic()
        line = _line_by(child, None if time_limit_s is None else went + time_limit_s)
        facts = {
            "cold": state.cold,
            "warm": state.warm,
            "resident_before": state.resident_before,
            "host_reported": host_memory.reported_since(reported),
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
        host_memory.note_free()  # the child's arrays and interpreter


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--synth", metavar="DIR", help="write a 1.5 GB F16 model in DIR first")
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--json")
    parser.add_argument("--md")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child_main(*args.child)
    if args.synth:
        path = write_safetensors_model(
            args.synth, layers=12, hidden=2048, intermediate=5632, vocab=32000, shards=2
        )
    elif args.model:
        path = Path(args.model)
    else:
        parser.error("give a MODEL or --synth DIR")
    if args.runs < 3:
        parser.error("--runs must be ≥ 3")
    from benchmarks.matrix import Entry, Job, run_job
    from benchmarks.regret_tables import regret_of, regret_table

    model = open_model(path)
    peers = [
        Entry("peer", name)
        for name, peer in PEERS.items()
        if model.format in peer.formats and check_import(name) is None
    ]
    job = Job(
        "here",
        Path(path).name,
        str(path),
        "cold",
        args.runs,
        peers,
        [],
        args.budget,
        workers=args.workers,
        diagnose=False,
    )
    load_before = os.getloadavg()
    measured = run_job(job, lambda text: print(f"  {text}", file=sys.stderr))
    found = regret_of(measured)
    assert found is not None  # the job ran recommend()
    result = {
        "model": str(path),
        "model_bytes": measured["model_bytes"],
        "budget_s": args.budget,
        "recommend_elapsed_s": round(measured["recommendation"]["elapsed_s"], 1),
        "pick": measured["recommendation"]["pick"],
        "best": found["best"].label if found["best"] else None,
        "regret": None if found["regret"] is None else round(found["regret"], 3),
        "pick_mbps": found["pick_mbps"],
        "pick_runs": found["pick_runs"],
        "rows": [asdict(row) for row in found["rows"]],
        "recommendation": measured["recommendation"],
        "runs": measured["runs"],
        "confirm_runs": measured.get("confirm_runs", []),
        "cpus": os.cpu_count(),
        "load_before": " ".join(f"{x:.1f}" for x in load_before),
        "load_after": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    text = json.dumps(result, indent=2)
    print(text)
    table = "".join(regret_table(measured)) + (
        f"\nLoad average {result['load_before']} before, {result['load_after']} after, "
        f"{result['cpus']} CPUs.\n"
    )
    print(table)
    if args.json:
        Path(args.json).write_text(text + "\n")
    if args.md:
        Path(args.md).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
