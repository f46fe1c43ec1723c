"""recommend's pick against the bound its own answer reports, as a user reads it:
``python -m benchmarks.pick_bound [--runs 3] [--storage fuse local bucket] [--out F.json]``.

On each storage, ``modelmon recommend MODEL --json`` (its default budget) ``--runs`` times,
alone on the machine: the pick's median MB/s over the bound the answer names
(``fraction_of_ceiling``), and the plain readers that keep their bytes in fresh memory
(``keeping_read``) over the same bound, with the pick over them: where a pick stays under
its bound, whether plain code that keeps its bytes does too.

Then each answer's pick applied again as the bench of record applies one (``core.load(path,
config=FILE)`` in a fresh process, from a verified cold cache, timed by the child:
``benchmarks.applied``), in a round with its bound measured again by the same plain code
(storage and memory fill, the lower of them: the pick keeps its bytes), the order alternated
by round: whether the answer's figure and the bench's agree within their spread.

- fuse: the 1.06 GB medium model through ``rclone serve http`` + ``rclone mount``;
- local: the 2.5 GB TinyLlama-shaped model (two shards) on the local disk;
- bucket: the medium model in a loopback ``rclone serve s3`` bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.envs import fuse_mount
from benchmarks.models import MEDIUM, TINYLLAMA, ensure_model
from benchmarks.objects_env import s3_server
from modelmon.core import measure_ceilings, open_model
from modelmon.core.runs import run_fresh

MODELMON = [sys.executable, "-m", "modelmon"]
ROOT = Path(__file__).resolve().parents[1]
STORAGES = ("fuse", "local", "bucket")


@contextlib.contextmanager
def model_on(storage: str, scratch: Path) -> Iterator[str]:
    """The model's path (or URL) on ``storage``, for as long as the block lasts."""
    if storage == "local":
        path, _ = ensure_model(TINYLLAMA, scratch)
        yield str(path)
        return
    medium, _ = ensure_model(MEDIUM, scratch)
    if storage == "fuse":
        with fuse_mount(medium.parent, scratch / "mnt") as mount:
            yield str(mount / medium.name)
        return
    root = scratch / "s3"
    (root / "models").mkdir(parents=True, exist_ok=True)
    linked = root / "models" / medium.name
    if not linked.exists():
        os.link(medium, linked)
    with s3_server(root):
        yield f"s3://models/{medium.name}"


def one_answer(target: str, config: Path) -> dict[str, Any]:
    """One ``recommend --json -o CONFIG``: the pick, its median, its bound, the keeping
    read."""
    done = subprocess.run(
        [*MODELMON, "recommend", target, "--json", "-o", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"failed": last[0]}
    report = json.loads(done.stdout)
    evidence = report["evidence"]
    bound = evidence.get("bound", {})
    pick = report["recommendation"]["median_mbps"]
    keeping = bound.get("keeping_read_mbps")
    return {
        "pick": report["recommendation"]["pick"],
        "pick_mbps": pick,
        "bound": bound.get("bound"),
        "bound_mbps": bound.get("bound_mbps"),
        "fraction": evidence.get("fraction_of_ceiling"),
        "keeping_mbps": keeping,
        "keeping_fraction": keeping / bound["bound_mbps"] if keeping else None,
        "pick_over_keeping": pick / keeping if keeping else None,
        "storage_measured_with": bound.get("storage_measured_with"),
    }


def applied_round(target: str, config: Path, number: int) -> dict[str, Any]:
    """The pick of ``config`` applied in a fresh process and its bound measured again, in
    the order the round's number gives: the applied MB/s over the bound of this round."""
    model = open_model(target)
    remote = any(f.remote is not None for f in model.files)
    files = [] if remote else [f.path for f in model.files]  # a bucket's: no page cache
    found: dict[str, Any] = {}

    def bound() -> None:
        ceilings = measure_ceilings(model, ("storage", "memory_fill"), repeats=1)
        rates = [c.mbps for c in (ceilings.get("storage"), ceilings.get("memory_fill")) if c]
        found["round_bound_mbps"] = min(rates) if rates else None

    def applied() -> None:
        result = run_fresh(
            [sys.executable, "-m", "benchmarks.applied", target, str(config)],
            files,
            "keep" if remote else "cold",  # a bucket has no page cache to make cold
            cwd=str(ROOT),
        )
        found["applied_mbps"] = result.mbps if result.status == "ok" else None
        found["applied_cold"] = result.cold
        found["applied_error"] = result.error

    for step in (bound, applied) if number % 2 == 0 else (applied, bound):
        step()
    if found.get("applied_mbps") and found.get("round_bound_mbps"):
        found["applied_fraction"] = found["applied_mbps"] / found["round_bound_mbps"]
    return found


def summary(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    def median(key: str) -> float | None:
        values = [run[key] for run in runs if run.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    keys = ("fraction", "keeping_fraction", "pick_over_keeping", "applied_fraction")
    found = {key: median(key) for key in keys}
    for key in ("fraction", "applied_fraction"):
        values = [run[key] for run in runs if run.get(key) is not None]
        found[f"{key}_min"] = round(min(values), 3) if values else None
        found[f"{key}_max"] = round(max(values), 3) if values else None
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--storage", nargs="+", choices=STORAGES, default=list(STORAGES))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/modelmon-pick-bound"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    found: dict[str, Any] = {}
    for storage in args.storage:
        with model_on(storage, args.scratch) as target:
            runs = []
            for number in range(args.runs):
                config = args.scratch / f"pick-{storage}-{number}.toml"
                runs.append(one_answer(target, config))
                print(storage, number, json.dumps(runs[-1]), flush=True)
            for number, run in enumerate(runs):
                if "failed" not in run:
                    config = args.scratch / f"pick-{storage}-{number}.toml"
                    run.update(applied_round(target, config, number))
                    print(storage, "applied", number, json.dumps(run), flush=True)
        found[storage] = {"runs": runs, "medians": summary(runs)}
        print(storage, "medians", found[storage]["medians"], flush=True)
        if args.out is not None:  # each storage's as it ends: a later one may fail
            args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
