"""recommend's pick against the bound its own answer reports, as a user reads it:
``python -m benchmarks.pick_bound [--runs 3] [--storage fuse local bucket] [--out F.json]``.

On each storage, ``modelmon recommend MODEL --json`` (its default budget) ``--runs`` times,
alone on the machine: the pick's median MB/s over the bound the answer names
(``fraction_of_ceiling``), and the plain readers that keep their bytes in fresh memory
(``keeping_read``) over the same bound, with the pick over them: where a pick stays under
its bound, whether plain code that keeps its bytes does too.

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

MODELMON = [sys.executable, "-m", "modelmon"]
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


def one_answer(target: str) -> dict[str, Any]:
    """One ``recommend --json``: the pick, its median, its bound, the keeping read."""
    done = subprocess.run(
        [*MODELMON, "recommend", target, "--json"], capture_output=True, text=True, check=False
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


def summary(runs: list[dict[str, Any]]) -> dict[str, float | None]:
    def median(key: str) -> float | None:
        values = [run[key] for run in runs if run.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    return {key: median(key) for key in ("fraction", "keeping_fraction", "pick_over_keeping")}


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
                runs.append(one_answer(target))
                print(storage, number, json.dumps(runs[-1]), flush=True)
        found[storage] = {"runs": runs, "medians": summary(runs)}
        print(storage, "medians", found[storage]["medians"], flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    main()
