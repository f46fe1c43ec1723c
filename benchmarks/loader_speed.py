"""How fast modelmon's own loaders are, as a fraction of a plain parallel read of the same files.

Every repeat measures, in an order rotated from repeat to repeat (so drift and neighbours'
load spread evenly over the configurations):
- ``ceiling``: N threads, each with its OWN descriptor, reading one contiguous share of the
  model's bytes front to back in 16 MiB preads into a reused buffer (no destination arrays);
- ``load:SPEC``: ``modelmon.core.load`` (threads), in a fresh child process as a user's first
  load would run (a process that loaded before reuses memory its allocator kept, which hides
  the page faults of fresh arrays), timed around the call after a verified-cold start
  (``prepare_cache(paths, "cold")``; the resident fraction is printed);
- ``measure:SPEC``: ``modelmon.core.measure`` (worker processes), its own go-to-done time.

Each configuration's ratio is computed against the ceiling of the same repeat; the report gives
the median MB/s and the median ratio. The machine is shared, so the load average is printed
before and after: absolute numbers move, ratios much less.

    .venv/bin/python -m benchmarks.loader_speed --env local --repeats 3
    .venv/bin/python -m benchmarks.loader_speed --env fuse --repeats 3 \
        --config "load:sequential workers=1 threads=4" --config "measure:pread workers=4"

Before/after in one run: check the older commit out beside this one (``git worktree add
/tmp/before COMMIT``, then ``./dev test -q -x tests/test_boundaries.py`` there to make its
``.venv``), copy this file and ``envs.py`` into its ``benchmarks/``, and add ``--baseline
/tmp/before`` with ``base-load:SPEC`` / ``base-measure:SPEC`` entries: they run that code.
Spell ``threads=`` out in SPECs compared across versions (the default changed from 1 to 4).

On ``fuse`` the model is served by ``rclone serve http`` from local disk and mounted with
``rclone mount`` (no VFS cache); "cold" then evicts both the mounted files and the local files
behind the server, so every byte comes from the disk through HTTP and FUSE.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import modelmon.core
from benchmarks.codec import to_json
from benchmarks.envs import fuse_mount
from modelmon.core import Model, open_model, write_safetensors_model
from modelmon.core.options import parse_spec
from modelmon.core.system import prepare_cache

MiB = 1 << 20
CEILING_CHUNK = 16 * MiB
# TinyLlama-1.1B's shapes, fp16, two shards: 2.5 GB.
MODEL_SHAPE = {"layers": 22, "hidden": 2048, "intermediate": 5632, "vocab": 32000, "shards": 2}
DEFAULT_CONFIGS = (
    "ceiling",
    "load:sequential",
    "measure:sequential",
    "load:sequential workers=4",
    "load:sequential workers=1 threads=4",
    "load:pread workers=4",
    "load:direct workers=4",
    "measure:sequential workers=4",
)


@dataclass(frozen=True)
class ConfigRun:
    mbps: float
    resident: float  # the largest resident fraction left before it ran


@dataclass(frozen=True)
class ConfigSummary:
    median_mbps: float
    median_ratio: float  # to the ceiling of the same repeat
    runs_mbps: list[int]
    worst_resident_before: float


def parallel_read(paths: list[str], readers: int, chunk: int = CEILING_CHUNK) -> int:
    """Read the files' bytes with ``readers`` threads, each with its own descriptors."""
    sizes = [os.path.getsize(p) for p in paths]
    total = sum(sizes)
    bounds = [total * r // readers for r in range(readers + 1)]

    def read_share(begin: int, end: int) -> None:
        buffer = memoryview(bytearray(chunk))
        base = 0
        for path, size in zip(paths, sizes, strict=True):
            lo, hi = max(begin, base), min(end, base + size)
            if lo < hi:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    position = lo - base
                    while position < hi - base:
                        want = min(chunk, hi - base - position)
                        got = os.preadv(fd, [buffer[:want]], position)
                        if got <= 0:
                            raise OSError(f"{path}: short read at {position}")
                        position += got
                finally:
                    os.close(fd)
            base += size

    threads = [
        threading.Thread(target=read_share, args=(bounds[r], bounds[r + 1])) for r in range(readers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return total


def make_cold(paths: list[str]) -> float:
    """Evict every path; return the largest resident fraction left (should be ≤ 0.01)."""
    worst = 0.0
    for group in paths:
        state = prepare_cache([group], "cold")
        worst = max(worst, state.resident_before)
    return worst


def timed(run: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    done = run()
    return time.perf_counter() - started, done


def run_config(
    config: str, model: Model, evict: list[str], readers: int, baseline: Path | None
) -> ConfigRun:
    paths = [f.path for f in model.files]
    resident = make_cold(evict)
    if config == "ceiling":
        seconds, nbytes = timed(lambda: parallel_read(paths, readers))
        return ConfigRun(nbytes / seconds / 1e6, resident)
    kind, _, spec = config.partition(":")
    python, cwd = sys.executable, None
    if kind.startswith("base-"):  # the same entry, run by the baseline checkout's code
        if baseline is None:
            raise SystemExit(f"{config}: needs --baseline CHECKOUT")
        kind, python, cwd = kind[5:], str(baseline / ".venv/bin/python"), baseline
        if not (baseline / "benchmarks/loader_speed.py").exists():
            raise SystemExit(f"copy benchmarks/loader_speed.py into {baseline} first")
    if kind not in ("load", "measure"):
        raise SystemExit(f"unknown config {config!r} (ceiling, [base-]load:, [base-]measure:)")
    command = [python, "-m", "benchmarks.loader_speed", "--child", kind, spec, model.path]
    output = subprocess.run(command, check=True, capture_output=True, text=True, cwd=cwd)
    mbps, child_resident = json.loads(output.stdout.splitlines()[-1])
    return ConfigRun(float(mbps), max(resident, float(child_resident)))


def child(kind: str, spec: str, path: str) -> None:
    """In a fresh process: one ``core.load`` (timed around the call, from the cache state the
    parent left) or one ``core.measure`` (its own timing, its own verified cold start)."""
    strategy, options = parse_spec(spec)
    changed = {k: v for k, v in options.to_dict().items() if k != "cache"}
    model = open_model(path)
    if kind == "measure":
        result = modelmon.core.measure(model, strategy, **{**changed, "cache": "cold"})
        if result.status != "ok":
            raise SystemExit(f"{spec}: {result.status}: {result.error}")
        print(json.dumps([result.mbps, result.cache.resident_before]))
        return

    def load() -> int:
        tensors = modelmon.core.load(model, strategy, cache="keep", **changed)
        return sum(a.nbytes for a in tensors.values())

    seconds, nbytes = timed(load)
    print(json.dumps([nbytes / seconds / 1e6, 0.0]))


def bench(
    model: Model,
    evict: list[str],
    configs: list[str],
    repeats: int,
    readers: int,
    baseline: Path | None,
) -> dict[str, ConfigSummary]:
    runs: dict[str, list[tuple[ConfigRun, float]]] = {c: [] for c in configs}  # (run, ratio)
    for repeat in range(repeats):
        shift = repeat % len(configs)
        order = configs[shift:] + configs[:shift]
        done: dict[str, ConfigRun] = {}
        for config in order:
            entry = run_config(config, model, evict, readers, baseline)
            done[config] = entry
            print(f"  repeat {repeat + 1} {config:45s} {entry.mbps:8.0f} MB/s", flush=True)
        ceiling_mbps = done["ceiling"].mbps
        for config, entry in done.items():
            runs[config].append((entry, entry.mbps / ceiling_mbps))
    return {
        config: ConfigSummary(
            statistics.median(e.mbps for e, _ in entries),
            statistics.median(ratio for _, ratio in entries),
            [round(e.mbps) for e, _ in entries],
            max(e.resident for e, _ in entries),
        )
        for config, entries in runs.items()
    }


def ensure_model(folder: Path, layers: int) -> Path:
    index = folder / "model.safetensors.index.json"
    if not index.exists():
        write_safetensors_model(folder, dtype="F16", **{**MODEL_SHAPE, "layers": layers})
    return index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=("local", "fuse"), default="local")
    parser.add_argument("--scratch", type=Path, default=Path("tmp/loader-speed"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--layers", type=int, default=MODEL_SHAPE["layers"], help="fewer for a smaller model"
    )
    parser.add_argument("--readers", type=int, default=4, help="threads of the ceiling")
    parser.add_argument("--config", action="append", help="ceiling | load:SPEC | measure:SPEC")
    parser.add_argument("--json", type=Path, help="write the summary here too")
    parser.add_argument("--keep-model", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout (with its .venv) whose code runs the base-load:/base-measure: entries",
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    configs = list(dict.fromkeys(["ceiling", *(args.config or DEFAULT_CONFIGS)]))
    folder = args.scratch / ("model" if args.layers == MODEL_SHAPE["layers"] else f"l{args.layers}")
    index = ensure_model(folder, args.layers)
    local_files = [f.path for f in open_model(index).files]
    before = os.getloadavg()
    try:
        if args.env == "fuse":
            with fuse_mount(folder, args.scratch.resolve() / "mnt") as mounted:
                model = open_model(mounted / index.name)
                paths = [f.path for f in model.files]
                summary = bench(
                    model, paths + local_files, configs, args.repeats, args.readers, args.baseline
                )
        else:
            model = open_model(index)
            summary = bench(model, local_files, configs, args.repeats, args.readers, args.baseline)
    finally:
        if not args.keep_model:
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()
    after = os.getloadavg()
    size = model.total_bytes
    print(
        f"\n{args.env}: {size / 1e9:.2f} GB in {len(model.files)} files, {args.repeats} repeats; "
        f"load average {before[0]:.1f} before, {after[0]:.1f} after ({os.cpu_count()} cores)"
    )
    print(f"{'configuration':45s} {'MB/s':>8s} {'× ceiling':>10s}  runs")
    for config, row in summary.items():
        print(
            f"{config:45s} {row.median_mbps:8.0f} {row.median_ratio:10.2f}  "
            f"{row.runs_mbps}  (resident before ≤ {row.worst_resident_before:.1%})"
        )
    if args.json:
        payload = {
            "env": args.env,
            "bytes": size,
            "load_average": [before, after],
            "configs": to_json(summary),
        }
        args.json.write_text(json.dumps(payload, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
