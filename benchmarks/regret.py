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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks import matrix
from benchmarks.codec import to_json
from benchmarks.jobs import PEER_ENGINES, Entry, Job
from benchmarks.peers import peer_unavailable
from benchmarks.records import RecommendationRecord, Run
from benchmarks.regret_tables import regret_of, regret_table
from benchmarks.summary import Row
from modelmon.core import ENGINES, open_model, write_safetensors_model


@dataclass(frozen=True)
class RegretReport:
    model: str
    model_bytes: int
    budget_s: float
    recommend_elapsed_s: float
    pick: str
    best: str | None
    regret: float | None
    pick_mbps: float | None
    pick_runs: int
    rows: list[Row]
    recommendation: RecommendationRecord
    runs: list[Run]
    confirm_runs: list[Run]
    cpus: int
    load_before: str
    load_after: str


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--synth", metavar="DIR", help="write a 1.5 GB F16 model in DIR first")
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--json")
    parser.add_argument("--md")
    args = parser.parse_args(argv)
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
    model = open_model(path)
    peers = [
        Entry("peer", name)
        for name in PEER_ENGINES
        if model.format in ENGINES[name].formats and peer_unavailable(name) is None
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
    measured = matrix.run_job(job, lambda text: print(f"  {text}", file=sys.stderr))
    found = regret_of(measured)
    if found is None or measured.recommendation is None:
        raise SystemExit("the job ran no recommendation")
    rec = measured.recommendation
    report = RegretReport(
        model=str(path),
        model_bytes=measured.model_bytes,
        budget_s=args.budget,
        recommend_elapsed_s=round(rec.elapsed_s, 1),
        pick=rec.pick,
        best=found.best.label if found.best else None,
        regret=None if found.regret is None else round(found.regret, 3),
        pick_mbps=found.pick_mbps,
        pick_runs=found.pick_runs,
        rows=found.rows,
        recommendation=rec,
        runs=measured.runs,
        confirm_runs=measured.confirm_runs,
        cpus=os.cpu_count() or 1,
        load_before=" ".join(f"{x:.1f}" for x in load_before),
        load_after=" ".join(f"{x:.1f}" for x in os.getloadavg()),
    )
    text = json.dumps(to_json(report), indent=2)
    print(text)
    table = "".join(regret_table(measured)) + (
        f"\nLoad average {report.load_before} before, {report.load_after} after, "
        f"{report.cpus} CPUs.\n"
    )
    print(table)
    if args.json:
        Path(args.json).write_text(text + "\n")
    if args.md:
        Path(args.md).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
