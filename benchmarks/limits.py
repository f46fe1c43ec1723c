"""Loads under a memory limit as a container's: each way of loading with no limit and at
100 %, 75 % and 50 % of the model's size as the limit,
``python -m benchmarks.limits --model PATH [--rounds 3] [--out FILE]``.

Every round runs each configuration once at each limit, cold, in an order rotated each
round, in a memory cgroup of that size (as ``--memory-limit`` makes one): modelmon's ways of
loading, and other loaders watched as their users run them (the safetensors library; Run:ai's
streamer where it is installed). Each run keeps its rate, the cgroup's peak and its split,
the bytes read again after reclaim, and an OOM kill. A run is stopped at ``TIME_LIMIT_S``
(reported as slower than the rate that implies).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.bounds import CONFIGS as BOUNDS_CONFIGS
from modelmon.core import Configuration, ProgramConfig, open_model, parse_configuration, run_for
from modelmon.core.errors import LoadError
from modelmon.core.options import MiB
from modelmon.core.output import limit_text as size_text
from modelmon.core.output import ram_text
from modelmon.core.runs import engine_unavailable
from modelmon.core.system import memory_limit_unavailable

FRACTIONS: tuple[float | None, ...] = (None, 1.0, 0.75, 0.5)  # None: no limit
TIME_LIMIT_S = 30.0
# The bounds bench's configurations (modelmon's ways of loading and the library as users run
# it), then Run:ai's streamer.
CONFIGS: tuple[tuple[str, Configuration], ...] = (
    *BOUNDS_CONFIGS,
    ("engine: runai", parse_configuration("engine: runai")),
)


def limit_of(model_bytes: int, fraction: float | None) -> int | None:
    """The limit at ``fraction`` of the model's size, in whole MiB (as a container's),
    rounded up: at 100 % a load that keeps the model is let run."""
    return None if fraction is None else max(1, -(-int(model_bytes * fraction) // MiB)) * MiB


def one_run(model: Any, config: Configuration, limit: int | None) -> dict[str, Any]:
    """One cold run under ``limit``: its figures as JSON values."""
    run = run_for(
        model, config, "cold", monitor=False, time_limit_s=TIME_LIMIT_S, memory_limit=limit
    )
    try:
        result = run.run().result
    except LoadError as exc:  # modelmon refuses a copy larger than the limit before it runs
        return {
            "status": "refused",
            "mbps": None,
            "cold": False,
            "loaded_bytes": 0,
            "error": str(exc),
        }
    limited = result.memory_limit
    out: dict[str, Any] = {
        "status": result.status,
        "mbps": result.mbps if result.status == "ok" else None,
        "cold": bool(result.cache.cold),
        "loaded_bytes": run.loaded_bytes,
        "error": (result.error or "").splitlines()[0] if result.error else "",
    }
    if limited is not None:
        out |= {
            "peak_bytes": limited.peak_bytes,
            "anon_peak_bytes": limited.anon_peak_bytes,
            "cache_peak_bytes": limited.cache_peak_bytes,
            "reread_bytes": limited.reread_bytes,
            "oom_killed": limited.oom_killed,
        }
    return out


def measure(path: str, rounds: int) -> dict[str, Any]:
    """The rounds: every run of every configuration at every limit, by round."""
    model = open_model(path)
    configs = [c for c in CONFIGS if _absent(c[1]) is None]
    data: dict[str, Any] = {
        "model": path,
        "model_bytes": model.total_bytes,
        "rounds": rounds,
        "time_limit_s": TIME_LIMIT_S,
        "limits": [limit_of(model.total_bytes, f) for f in FRACTIONS],
        "fractions": list(FRACTIONS),
        "absent": {c[0]: why for c in CONFIGS if (why := _absent(c[1])) is not None},
        "runs": {label: {str(f): [] for f in FRACTIONS} for label, _ in configs},
    }
    for index in range(rounds):
        for fraction in FRACTIONS:
            limit = limit_of(model.total_bytes, fraction)
            shift = index % len(configs)
            for label, config in configs[shift:] + configs[:shift]:
                run = one_run(model, config, limit)
                data["runs"][label][str(fraction)].append(run)
                where = "no limit" if limit is None else size_text(limit)
                rate = f"{run['mbps']:.0f} MB/s" if run["mbps"] else run["status"]
                print(f"  round {index + 1}, {where}: {label}: {rate}", file=sys.stderr)
    return data


def _absent(config: Configuration) -> str | None:
    if isinstance(config, ProgramConfig) and config.engine is not None:
        return engine_unavailable(config.engine)
    return None


def cell(runs: list[dict[str, Any]], model_bytes: int, time_limit_s: float) -> str:
    """A configuration at one limit: its median rate and what the limit did to it."""
    killed = sum(1 for r in runs if r.get("oom_killed"))
    if runs and all(r["status"] == "refused" for r in runs):
        return "refused before it runs: the model would not fit"
    if killed:
        return f"OOM-killed ({killed} of {len(runs)})"
    done = [r for r in runs if r["status"] == "ok" and r["mbps"]]
    if len(done) < len(runs):
        stopped = [r for r in runs if r["status"] == "cancelled"]
        if stopped:
            below = max(r["loaded_bytes"] for r in stopped) / time_limit_s / 1e6
            return f"stopped at {time_limit_s:.0f} s (< {below:.0f} MB/s)"
        return f"failed: {next(r['error'] for r in runs if r['status'] != 'ok')}"
    words = [f"{statistics.median(r['mbps'] for r in done):,.0f} MB/s"]
    if "peak_bytes" in done[0]:
        words.append(f"peak {ram_text(max(r['peak_bytes'] for r in done))}")
        share = statistics.median(r["reread_bytes"] for r in done) / max(1, model_bytes)
        if share >= 0.01:
            words.append(f"re-read {share:.0%}")
    return ", ".join(words)


def section(data: dict[str, Any] | None, skipped: str | None) -> list[str]:
    """The markdown section of ``data`` (None: not run, ``skipped`` says why)."""
    out = ["## Under a memory limit", ""]
    if data is None or "skipped" in data:
        why = data["skipped"] if data is not None else skipped or "not measured"
        return [*out, f"Not run: {why}.", ""]
    size = data["model_bytes"]
    heads = [
        "no limit" if f is None else f"{f:.0%} ({size_text(limit)})"
        for f, limit in zip(data["fractions"], data["limits"], strict=True)
    ]
    out += [
        f"The model ({size / 1e9:.2f} GB, `{Path(data['model']).name}`) loaded cold under a "
        "memory cgroup of each size, as a container's limit applies; median of "
        f"{data['rounds']} rounds, the order rotated each round; the peak is the cgroup's, "
        "page cache included; re-read: bytes read again after reclaim, as a share of the "
        "model. Engines are other loaders run as their users run them, watched.",
        "",
        "| way of loading | " + " | ".join(heads) + " |",
        "| --- | " + " | ".join("---" for _ in heads) + " |",
    ]
    for label, by_fraction in data["runs"].items():
        cells = [cell(by_fraction[str(f)], size, data["time_limit_s"]) for f in data["fractions"]]
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out += [f"- {label}: not measured ({why})" for label, why in data["absent"].items()]
    return [*out, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a safetensors model on the disk")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    args = parser.parse_args(argv)
    model_bytes = open_model(args.model).total_bytes
    why = memory_limit_unavailable(model_bytes)
    data = {"skipped": why} if why is not None else measure(args.model, args.rounds)
    if args.out:
        args.out.write_text(json.dumps(data, indent=1))
    print("\n".join(section(data, None)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
