"""N ranks on this node, each way they may get their weights, from a file and from a bucket:
``python -m benchmarks.ranks [--model PATH] [--ranks 4] [--rounds 3] [--bucket] [--out F]``.

A tensor-parallel server's cold start is its slowest rank's: every rank has its weights when
the server can answer. For each way (modelmon's ``whole``, ``slice`` and ``one-reader``, and
Run:ai's streamer in each rank, reading all, and distributed: one reads, the ranks get it
over torch.distributed), ``--rounds`` alternating rounds from a verified cold cache measure
its slowest rank's time and the node's peak memory (one memory cgroup holds every rank's
processes: measured, not summed). The model is the bench's TinyLlama-shaped 2.2 GB one
unless ``--model`` names another; ``--bucket`` also serves it from ``rclone serve s3`` on
loopback (there nothing is cached: the server holds it warm, which is said).

Reported: each way's median slowest-rank time, its node peak against the model's bytes,
its bytes read from storage in all; the pick ``recommend --ranks`` would make (the fastest
within 5 %, else the leaner) against the best.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.models import TINYLLAMA, ensure_model
from modelmon.core import RanksRun, open_model, run_for
from modelmon.core.configuration import parse_engine
from modelmon.core.options import LoadOptions

MODES = ("whole", "slice", "one-reader")
RUNAI = {
    "runai (every rank reads all)": "engine: runai ranks={ranks} RUNAI_STREAMER_DIST=0",
    "runai distributed": "engine: runai ranks={ranks} RUNAI_STREAMER_DIST=1",
}
NOISE = 0.05


@dataclass
class Way:
    name: str
    seconds: list[float] = field(default_factory=list)  # its slowest rank, per round
    peaks: list[int] = field(default_factory=list)  # the node's, per round
    read: list[int] = field(default_factory=list)  # bytes from storage in all, per round
    failures: list[str] = field(default_factory=list)

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def peak(self) -> int | None:
        return max(self.peaks) if self.peaks else None


def run_mode(model: Any, mode: str, ranks: int, strategy: str, way: Way) -> None:
    options = LoadOptions(cache="cold" if "://" not in model.path else "keep", threads=4)
    result = RanksRun(model, strategy, options, ranks, mode).run()  # type: ignore[arg-type]
    if result.status != "ok":
        way.failures.append(result.error or result.status)
        return
    way.seconds.append(result.seconds)
    if result.node is not None:
        way.peaks.append(result.node.peak_bytes)
    way.read.append(result.read_bytes)


def run_runai(model: Any, spec: str, way: Way) -> None:
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    run = run_for(model, parse_engine(spec), "cold", memory_limit=total, monitor=False)
    outcome = run.run()
    result = outcome.result
    if result.status != "ok":
        way.failures.append(result.error or result.status)
        return
    way.seconds.append(result.seconds)
    watched = getattr(outcome, "watch", None)
    limit = watched.memory_limit if watched is not None else None
    if limit is not None:
        way.peaks.append(limit.peak_bytes)
    way.read.append(result.bytes)


def section(path: str, ranks: int, rounds: int, where: str) -> dict[str, Any]:
    model = open_model(path)
    strategy = "ranged" if "://" in path else "sequential"
    ways = {f"modelmon {mode}": Way(f"modelmon {mode}") for mode in MODES}
    runai = {name: Way(name) for name in RUNAI}
    order = [*ways, *runai]
    for number in range(rounds):
        for name in order if number % 2 == 0 else list(reversed(order)):
            print(f"[ranks {where}] round {number + 1}: {name}", file=sys.stderr, flush=True)
            if name in ways:
                run_mode(model, name.removeprefix("modelmon "), ranks, strategy, ways[name])
            else:
                try:
                    run_runai(model, RUNAI[name].format(ranks=ranks), runai[name])
                except Exception as exc:  # an engine that cannot run here says why
                    runai[name].failures.append(f"{type(exc).__name__}: {exc}")
    every = {**ways, **runai}
    timed = {n: w for n, w in ways.items() if w.median_s is not None}
    best = min((w.median_s or 0.0 for w in timed.values()), default=None)
    pick = None
    if best is not None:
        close = [w for w in timed.values() if (w.median_s or 0.0) <= best * (1 + NOISE)]
        pick = min(close, key=lambda w: (w.peak or 0, w.median_s or 0.0)).name
    return {
        "where": where,
        "model": path,
        "model_bytes": model.total_bytes,
        "ranks": ranks,
        "rounds": rounds,
        "ways": {
            n: {**asdict(w), "median_s": w.median_s, "peak": w.peak} for n, w in every.items()
        },
        "pick": pick,
        "best_s": best,
    }


def markdown(found: dict[str, Any]) -> str:
    size = found["model_bytes"]
    lines = [
        f"### Ranks · {found['where']}: {found['ranks']} ranks of {size / 1e9:.2f} GB, "
        f"{found['rounds']} alternating rounds",
        "",
        "| way | slowest rank (median s) | node peak | × the model | read in all |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, way in found["ways"].items():
        if way["median_s"] is None:
            why = way["failures"][0] if way["failures"] else "not run"
            lines.append(f"| {name} | – ({why[:80]}) | | | |")
            continue
        peak = way["peak"]
        read = statistics.median(way["read"]) if way["read"] else 0
        lines.append(
            f"| {name} | {way['median_s']:.2f} | "
            + (f"{peak / 1e9:.2f} GB | {peak / size:.1f} |" if peak else "– | – |")
            + f" {read / 1e9:.2f} GB |"
        )
    pick, best = found["pick"], found["best_s"]
    if pick is not None and best:
        chosen = found["ways"][pick]["median_s"]
        lines += [
            "",
            f"The pick (the fastest within 5 %, else the leaner): **{pick}**, its slowest rank "
            f"{chosen / best:.2f}× the best way's.",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model path (default: the bench's 2.2 GB one)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bucket", action="store_true", help="also from a bucket on loopback")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="modelmon-ranks-") as scratch:
        path = args.model or str(ensure_model(TINYLLAMA, Path(scratch))[0])
        found = [section(path, args.ranks, args.rounds, "local file")]
        if args.bucket:
            from benchmarks.objects_env import s3_server

            model = open_model(path)
            root = Path(scratch) / "served"
            (root / "models").mkdir(parents=True)
            shard = model.files[0].path  # one object: a bucket model is one file here
            os.link(shard, root / "models" / "model.safetensors")
            with s3_server(root):
                found.append(
                    section(
                        "s3://models/model.safetensors",
                        args.ranks,
                        args.rounds,
                        "bucket on loopback (rclone serve s3, the object warm on the server)",
                    )
                )
    for part in found:
        print(markdown(part))
        print()
    if args.out:
        args.out.write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
