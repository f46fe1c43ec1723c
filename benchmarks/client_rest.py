"""How long a FUSE mount's client keeps what a run left it: the figure behind
``STORAGE_REST_S`` (the rest before each run of the user's loader's rounds and of an A/B).

    .venv/bin/python -m benchmarks.client_rest [--rounds 3] [--scratch tmp/bench]

On an rclone mount (``rclone serve http`` + ``rclone mount``, as the bench's ``fuse``
environment) of a ≥ 1 GB safetensors model, one measured run is a one-stream read of the
whole file as a user's loader does it (``engine: safetensors backend=read``), cold, watched,
judged by the bytes that arrived. Each run comes after one of these, in rounds, the order
rotated each round, medians:

- a four-stream read of the whole file (four readers of a quarter each, as modelmon's
  parallel best reads it), then a rest of 0, 5, 10 or 20 s;
- a one-stream read of the whole file, then no rest.

Every measured run first drops the mount's page cache and primes free memory (about 3 s), so
"rest 0 s" starts about 3 s after the read before it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.envs import fuse_mount
from benchmarks.models import MEDIUM, ensure_model
from modelmon.core import open_model, run_program
from modelmon.core.configuration import parse_program
from modelmon.core.limits import STORAGE_REST_S

ROOT = Path(__file__).resolve().parents[1]
MEASURED = "engine: safetensors backend=read"
RESTS_S = (0, 5, 10, 20)
STREAMS = 4
READ_BLOCK = 16 << 20


def read_streams(path: Path, streams: int) -> None:
    """Read ``path`` whole with ``streams`` readers at once, a contiguous share each."""
    share = -(-path.stat().st_size // streams)
    blocks = -(-share // READ_BLOCK)
    dd = ["dd", f"if={path}", "of=/dev/null", f"bs={READ_BLOCK}", f"count={blocks}", "status=none"]
    readers = [subprocess.Popen([*dd, f"skip={i * blocks}"]) for i in range(streams)]
    for reader in readers:
        reader.wait()


def conditions(weights: Path) -> dict[str, Callable[[], None]]:
    """What runs before each measured run, by the row it is reported in."""
    out: dict[str, Callable[[], None]] = {}
    for rest in RESTS_S:

        def after_streams(rest: int = rest) -> None:
            read_streams(weights, STREAMS)
            time.sleep(rest)

        out[f"{STREAMS}-stream read, then {rest} s"] = after_streams
    out["1-stream read, then 0 s"] = lambda: read_streams(weights, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scratch", type=Path, default=ROOT / "tmp" / "bench")
    args = parser.parse_args(argv)
    made = ensure_model(MEDIUM, args.scratch)[0]
    folder = made if made.is_dir() else made.parent
    rates: dict[str, list[float]] = {}
    with fuse_mount(folder, args.scratch / "mnt-client-rest") as mounted:
        model = open_model(str(mounted))
        weights = Path(model.files[0].path)
        before = conditions(weights)
        names = list(before)
        program = parse_program(MEASURED)
        for number in range(args.rounds):
            shift = number % len(names)
            for name in names[shift:] + names[:shift]:
                before[name]()
                outcome = run_program(model, program, path=str(mounted)).result
                if outcome.status != "ok" or not outcome.cache.cold:
                    print(f"{name}: not counted ({outcome.error or 'not cold'})", file=sys.stderr)
                    continue
                rates.setdefault(name, []).append(outcome.mbps)
                print(f"round {number + 1} · {name}: {outcome.mbps:.0f} MB/s", file=sys.stderr)
    size = model.total_bytes / 1e9
    print(
        f"`{MEASURED}` on an rclone FUSE mount of {MEDIUM.key} ({size:.2f} GB), cold, watched; "
        f"{args.rounds} rounds, the order rotated each round. modelmon rests {STORAGE_REST_S:g} s "
        "before each compared run.\n"
    )
    print("| before the run | MB/s (median) | runs |")
    print("| --- | ---: | --- |")
    for name in names:
        runs = rates.get(name, [])
        median = f"{statistics.median(runs):.0f}" if runs else "–"
        print(f"| {name} | {median} | {', '.join(f'{r:.0f}' for r in runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
