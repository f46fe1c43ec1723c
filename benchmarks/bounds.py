"""The bounds against the loads they judge, on each storage:
``python -m benchmarks.bounds [--envs local,hdd,fuse] [--rounds 3] [--gib 1.0] [--out FILE]``.

For each storage, a model of about ``--gib`` GiB; every round measures the storage and the
memory-fill bounds (plain code, ``core/measuring/bounds.py``), then runs each configuration
once, cold, in an order rotated each round, the engine (the safetensors library, as users
run it) among them. Each configuration's rate is divided by its own bound of the same round
(a load that keeps its bytes: the lower of storage and memory fill; one that discards them
or maps them: the storage), and the median of those ratios is reported against the bound's
spread: a configuration above ``1 + spread`` is a bound that does not bound.

On ``hdd`` the rounds run in a child inside the throttling cgroup (its plain readers and the
loads' workers alike), as the bench's hdd jobs do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.envs import fuse_mount, throttled_disk
from modelmon.core import (
    Configuration,
    StrategyConfig,
    measure_ceilings,
    open_model,
    parse_configuration,
    run_for,
    write_safetensors_model,
)
from modelmon.core.measuring import allowed_ratio, keeps_bytes
from modelmon.core.options import LoadOptions

MiB = 1 << 20
BASE = LoadOptions(cache="cold", threads=1)
# (label, configuration): modelmon's ways of loading and the library's.
CONFIGS: tuple[tuple[str, Configuration], ...] = (
    ("sequential ×4", StrategyConfig("sequential", BASE.with_(workers=4, chunk=16 * MiB))),
    ("pread ×4", StrategyConfig("pread", BASE.with_(workers=4))),
    ("mmap-view ×4", StrategyConfig("mmap-view", BASE.with_(workers=4))),
    ("library", StrategyConfig("library", BASE)),
    (
        "sequential ×4 discard",
        StrategyConfig("sequential", BASE.with_(workers=4, chunk=16 * MiB, discard=True)),
    ),
    ("engine: safetensors", parse_configuration("engine: safetensors")),
)


def keeps(config: Configuration) -> bool:
    """Whether its runs keep the model's bytes in memory (a program's always do)."""
    if isinstance(config, StrategyConfig):
        return keeps_bytes(config.strategy, config.options.discard)
    return True


def one_run(model: Any, config: Configuration) -> tuple[float, bool]:
    """One cold run: (MB/s, verified cold)."""
    result = run_for(model, config, "cold", monitor=False).run().result
    if result.status != "ok":
        raise SystemExit(f"{config.spec}: {result.status}: {result.error}")
    return result.mbps, result.cache.cold


def rounds_here(path: str, rounds: int) -> dict[str, Any]:
    """The rounds, in this process: every figure of each, by round."""
    model = open_model(path)
    out: dict[str, Any] = {"storage": [], "memory_fill": [], "runs": {c[0]: [] for c in CONFIGS}}
    for index in range(rounds):
        bounds = measure_ceilings(model, ("storage", "memory_fill"), repeats=1)
        for name in ("storage", "memory_fill"):
            found = bounds.get(name)
            out[name].append(found.mbps if found else 0.0)
            out[f"{name}_spec"] = found.spec if found else ""
            out[f"{name}_slack"] = max(out.get(f"{name}_slack", 0.0), found.slack if found else 0)
        order = CONFIGS[index % len(CONFIGS) :] + CONFIGS[: index % len(CONFIGS)]
        for label, config in order:
            mbps, cold = one_run(model, config)
            out["runs"][label].append({"round": index, "mbps": mbps, "cold": cold})
            print(f"  round {index + 1}: {label}: {mbps:.0f} MB/s", file=sys.stderr, flush=True)
    return out


def judged(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Each configuration's median ratio to its bound, round by round, and the spread."""
    storage, fill = data["storage"], data["memory_fill"]
    rows = []
    for label, config in CONFIGS:
        kept = keeps(config)
        bounds = [min(s, f) if kept else s for s, f in zip(storage, fill, strict=True)]
        median = statistics.median(bounds)
        # The storage's slack (a throttle's slice) counts where the storage is the bound.
        by_storage = not kept or statistics.median(storage) <= statistics.median(fill)
        allowed = allowed_ratio(bounds, data.get("storage_slack", 0.0) if by_storage else 0.0)
        runs = data["runs"][label]
        ratios = [run["mbps"] / bounds[run["round"]] for run in runs]
        ratio = statistics.median(ratios)
        rows.append(
            {
                "configuration": label,
                "mbps": statistics.median(run["mbps"] for run in runs),
                "bound": "lower of storage, memory fill" if kept else "storage",
                "bound_mbps": median,
                "ratio": ratio,
                "spread": allowed - 1,
                "within": ratio <= allowed,
                "all_cold": all(run["cold"] for run in runs),
            }
        )
    return rows


@contextmanager
def storage(env: str, scratch: Path, gib: float) -> Iterator[tuple[str, list[str]]]:
    """(the model's path on ``env``, the command prefix its rounds run under)."""
    source = scratch / "source"
    if not source.exists():
        layers = max(1, int(gib * (1 << 30) / (4 * 1024 * 4096 * 2 + 1)))
        write_safetensors_model(
            source, layers=layers, hidden=1024, intermediate=4096, vocab=4096, seed=3
        )
    model = next(source.glob("*.safetensors"))
    if env == "local":
        yield str(model), []
    elif env == "hdd":
        with throttled_disk(source) as throttle:
            yield str(model), throttle.command([])
    else:
        mount = scratch / "mnt"
        mount.mkdir(exist_ok=True)
        with fuse_mount(source, mount):
            yield str(mount / model.name), []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="local,hdd,fuse")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--scratch", type=Path, default=Path("tmp/bounds"))
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    parser.add_argument("--inside", help=argparse.SUPPRESS)  # MODEL: the rounds, in this process
    args = parser.parse_args(argv)
    if args.inside:
        json.dump(rounds_here(args.inside, args.rounds), sys.stdout)
        return 0
    args.scratch.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {}
    for env in args.envs.split(","):
        print(f"{env}:", file=sys.stderr, flush=True)
        with (
            storage(env, args.scratch, args.gib) as (path, prefix),
            tempfile.TemporaryFile() as out,
        ):
            child = [sys.executable, "-m", "benchmarks.bounds", "--inside", path]
            child += ["--rounds", str(args.rounds)]
            subprocess.run([*prefix, *child], stdout=out, check=True, stdin=subprocess.DEVNULL)
            out.seek(0)
            data = json.load(out)
        found[env] = {"rounds": data, "judged": judged(data)}
        print(f"| {env} | bound | MB/s | bound MB/s | × bound (by round) | spread | within |")
        for row in found[env]["judged"]:
            print(
                f"| {row['configuration']} | {row['bound']} | {row['mbps']:.0f} | "
                f"{row['bound_mbps']:.0f} | {row['ratio']:.2f}× | ±{row['spread']:.0%} | "
                f"{'✓' if row['within'] else '✗'}{'' if row['all_cold'] else ' (not all cold)'} |",
                flush=True,
            )
    if args.out:
        args.out.write_text(json.dumps(found, indent=1))
    return 0 if all(r["within"] for e in found.values() for r in e["judged"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
