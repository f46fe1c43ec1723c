"""Run every benchmark and write docs/benchmarks.md (+ PNG plots and results.json).

    ./dev bench [ARGS]                      # set up, install the bench extra and peers, run
    .venv/bin/python -m benchmarks.run [--envs local,hdd,fuse] [--repeats 3] [--keep-models]

Environments it cannot make here (no root for cgroups, no FUSE) are skipped with the reason.
Every mount, cgroup and process it makes is removed or ended, also on Ctrl+C or an error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from benchmarks import engines, extras, knobs, memory, plots, report, servers, suite, watch
from benchmarks.codec import from_json, to_json
from benchmarks.envs import EnvUnavailable
from benchmarks.jobs import PEER_ENGINES
from benchmarks.machine import facts
from benchmarks.models import (
    GGUF_Q4K_LARGE,
    MEDIUM,
    SMALL,
    TINY,
    describe,
    ensure_model,
)
from benchmarks.peers import peer_unavailable
from benchmarks.records import BenchResults
from benchmarks.summary import peer_memory
from modelmon.core.limits import LOADER_MAX_ROUNDS

ROOT = Path(__file__).resolve().parents[1]
REPRODUCE = "./dev bench        # = .venv/bin/python -m benchmarks.run, after installing the peers"
T = TypeVar("T")


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def _guarded(results: BenchResults, name: str, work: Callable[[], T]) -> T | None:
    """A side section that fails says why in the report instead of losing the whole run."""
    try:
        return work()
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:
        traceback.print_exc()
        results.skipped[name] = f"{name} failed: {type(exc).__name__}: {exc}"
        return None


def _sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: mounts, cgroups, children


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "benchmarks.md",
        help="the markdown to write; PNGs and results.json go to OUT_DIR/"
        "benchmarks/ (default docs/benchmarks.md)",
    )
    parser.add_argument(
        "--scratch",
        type=Path,
        default=ROOT / "tmp" / "bench",
        help="where models are generated and mounts made (default tmp/bench, "
        "on the disk under test)",
    )
    parser.add_argument(
        "--keep-models",
        action="store_true",
        help="keep the scratch folder (models are reused by the next run)",
    )
    parser.add_argument(
        "--envs",
        help="comma-separated subset of local,hdd,fuse,servers (default all; --smoke: "
        "local); servers: a real vLLM (CPU) server's cold start, A/B'd and recommended",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        help="rounds of each job (default 3; --smoke: 1): fewer for a trial (outside --smoke, "
        f"the engines applied again run at least {ENGINE_ROUNDS})",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny model, few configurations, local only: checks the machinery",
    )
    parser.add_argument(
        "--render",
        type=Path,
        metavar="RESULTS_JSON",
        help="run nothing: write the markdown and plots again from the "
        "results.json of an earlier run (same numbers, current text)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.render:
        results = from_json(BenchResults, json.loads(args.render.read_text()))
        results.rendered_again = shlex.join(
            ["python", "-m", "benchmarks.run", *(sys.argv[1:] if argv is None else argv)]
        )
        _write(results, args.out)
        say(f"rendered {args.out} again from {args.render}")
        return 0
    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        results = run(args)
    finally:
        signal.signal(signal.SIGTERM, previous)
    say(f"done in {results.wall_s / 60:.1f} min: {args.out}")
    return 0


def run(args: argparse.Namespace) -> BenchResults:
    started = time.monotonic()
    profile = suite.smoke_profile() if args.smoke else suite.full_profile()
    if args.repeats:
        profile = dataclasses.replace(profile, repeats=args.repeats)
    chosen = args.envs or ("local" if args.smoke else "local,hdd,fuse,servers")
    envs = [e.strip() for e in chosen.split(",") if e.strip()]
    scratch = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    command = os.environ.get("MODELMON_BENCH_COMMAND") or shlex.join(
        ["python", "-m", "benchmarks.run", *sys.argv[1:]]
    )
    results = BenchResults(command, REPRODUCE, facts(scratch), notes=list(profile.notes))
    try:
        say("checking which peers import here")
        wanted = {p for spec in profile.peers.values() for p in spec}
        results.peers = {name: peer_unavailable(name) for name in PEER_ENGINES if name in wanted}
        for name, why in results.peers.items():
            if why:
                say(f"peer {name} skipped: {why}")
        paths: dict[str, Path] = {}
        for spec in profile.models:
            path, seconds = ensure_model(spec, scratch)
            paths[spec.key] = path
            say(
                f"model {spec.key}: {path}"
                + (f" (generated in {seconds:.0f} s)" if seconds else " (reused)")
            )
        results.models = {spec.key: describe(spec, paths[spec.key]) for spec in profile.models}
        available = {n for n, why in results.peers.items() if why is None}
        suite.run_environments(profile, envs, paths, available, scratch, results, say)
        _extras(profile, paths, scratch, results, args.smoke)
        _engines(paths, envs, scratch, args.smoke, profile.repeats, results)
        _watch(profile, paths, envs, scratch, args.smoke, results)
        _objects(scratch, args.smoke, profile.repeats, results)
        _limits(paths, scratch, args.smoke, profile.repeats, results)
        if "servers" in envs:
            _servers(scratch, profile.repeats, results)
        if not args.smoke and "hdd" in envs:  # the disk's own knobs (benchmarks/knobs.py)
            small = paths[SMALL.key]
            results.knobs = _guarded(
                results,
                "knobs",
                lambda: knobs.run(small, scratch, repeats=profile.repeats, say=say),
            )
    finally:
        if not args.keep_models:
            shutil.rmtree(scratch, ignore_errors=True)
    results.wall_s = time.monotonic() - started
    _write(results, args.out)
    return results


SERVER_BUDGET_S = 1500.0  # recommend --server: vLLM's starts take a minute each here


def _servers(scratch: Path, repeats: int, results: BenchResults) -> None:
    """A real serving engine end to end (benchmarks/servers.py), where vLLM's CPU build
    runs here."""
    why = servers.unavailable()
    if why is not None:
        results.skipped["servers"] = why
        say(f"servers skipped: {why}")
        return
    model, _ = ensure_model(servers.MODEL, scratch)
    small, _ = ensure_model(servers.COMPILE_MODEL, scratch)
    results.servers = _guarded(
        results,
        "servers",
        lambda: servers.run(model, small, max(1, repeats), SERVER_BUDGET_S, say),
    )


ENGINE_BUDGET_S = 60.0  # recommend --engine: half for modelmon's search, half for the loader
# Rounds of each engine applied again: the row checks recommend's figure against them, and the
# median of five outlasts the odd slow run a VM's disk gives a short load; they go on, as
# recommend's own rounds do, while that median is known less finely than LOADER_MEDIAN_ERROR.
ENGINE_ROUNDS = 5


def _engines(
    paths: dict[str, Path],
    envs: list[str],
    scratch: Path,
    smoke: bool,
    repeats: int,
    results: BenchResults,
) -> None:
    """Users' own loaders (benchmarks/engines.py) on the throttled disk and the FUSE mount;
    in --smoke, the safetensors library on the tiny model, once, in each environment asked."""
    if smoke:
        say(f"engines: the safetensors library as users run it (smoke: {', '.join(envs)})")
        folder = paths[TINY.key].parent
        results.engines = _guarded(
            results,
            "engines",
            lambda: engines.run_section(
                {env: {"safetensors": folder} for env in envs},
                scratch,
                say,
                budget_s=5.0,
                repeats=1,
                engines=("safetensors",),
            ),
        )
        return
    wanted: list[str] = [env for env in ("hdd", "fuse") if env in envs]
    if not wanted or MEDIUM.key not in paths:
        results.skipped["engines"] = "runs on the hdd and fuse environments only"
        return
    say(f"engines: users' loaders on {', '.join(wanted)}")
    results.engines = _guarded(
        results,
        "engines",
        lambda: engines.run_section(
            {env: _engine_models(paths) for env in wanted},
            scratch,
            say,
            budget_s=ENGINE_BUDGET_S,
            repeats=max(repeats, ENGINE_ROUNDS),
            most_repeats=max(repeats, LOADER_MAX_ROUNDS),
        ),
    )


def _engine_models(paths: dict[str, Path]) -> dict[str, Path]:
    """engine -> its {path}, the models of a GB and more in every environment. A load of
    two seconds (the small ones on the throttled disk) is timed in 5 % steps by the watch's
    0.1 s samples, and a mapping loader's first faults, whose request sizes vary from run to
    run, weigh on it; the loader's median then moves by more than the change it judges."""
    safetensors, gguf = MEDIUM, GGUF_Q4K_LARGE
    found = {}
    if safetensors.key in paths:  # the folder, with its config.json: transformers loads it
        found["safetensors"] = found["transformers"] = paths[safetensors.key].parent
    if gguf.key in paths:
        found["llamacpp"] = paths[gguf.key]
    return found


def _watch(
    profile: suite.Profile,
    paths: dict[str, Path],
    envs: list[str],
    scratch: Path,
    smoke: bool,
    results: BenchResults,
) -> None:
    """Other loaders watched (benchmarks/watch.py) on the FUSE mount, with the largest file
    of the model the fuse jobs load (in --smoke without fuse: on the local disk)."""
    chosen = [name for name in (("fuse", "local") if smoke else ("fuse",)) if name in envs]
    plan = next((p for p in profile.plans if chosen and p.env == chosen[0]), None)
    if plan is None:
        results.skipped["watch"] = "runs on the fuse environment only"
        return
    env = plan.env
    source = watch.largest_file(paths[plan.model])
    say(f"watch: other loaders on {env}, {source.name} of {plan.model}")

    def section() -> watch.WatchReport | None:
        try:
            return watch.run_section(
                env,
                source,
                plan.model,
                scratch,
                say,
                pairs=profile.watch_pairs,
                time_limit_s=profile.watch_time_limit_s,
            )
        except EnvUnavailable as exc:  # no FUSE here: said, like a skipped environment
            results.skipped["watch"] = str(exc)
            say(f"watch skipped: {exc}")
            return None

    results.watch = _guarded(results, "watch", section)


# The object-storage section's network profiles: loopback as it is, then a bucket as S3
# serves one (time to first byte, about 100 MB/s per connection) behind a 4 Gbit/s link.
OBJECT_PROFILES: tuple[tuple[str, ...], ...] = (
    (),
    ("--rate-mbit", "4000", "--latency-ms", "20", "--connection-mbps", "100"),
)


def _objects(scratch: Path, smoke: bool, repeats: int, results: BenchResults) -> None:
    """A model in a bucket (benchmarks/objects.py), each profile in a child of its own (a
    shaped one runs in a network namespace)."""
    size = ("--gib", "0.02", "--budget", "5") if smoke else ("--gib", "1", "--budget", "60")
    for shaping in OBJECT_PROFILES[:1] if smoke else OBJECT_PROFILES:
        say(f"object storage: {' '.join(shaping) or 'loopback as it is'}")
        out = scratch / "objects.json"
        argv = [sys.executable, "-m", "benchmarks.objects", *size, "--rounds", str(repeats)]
        argv += [*shaping, "--scratch", str(scratch / "objects"), "--out", str(out)]

        def section(argv: list[str] = argv, out: Path = out) -> dict[str, Any]:
            quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
            subprocess.run(argv, check=True, **quiet)
            return dict(json.loads(out.read_text()))

        found = _guarded(results, "objects", section)
        if found is not None:
            results.objects.append(found)


def _limits(
    paths: dict[str, Path], scratch: Path, smoke: bool, repeats: int, results: BenchResults
) -> None:
    """Each way of loading under memory limits of the model's size and less
    (benchmarks/limits.py), in a child of its own, on the local disk."""
    if smoke or MEDIUM.key not in paths:
        results.skipped["limits"] = "not run in --smoke" if smoke else "no model for it"
        return
    say("under a memory limit")
    out = scratch / "limits.json"
    argv = [sys.executable, "-m", "benchmarks.limits", "--model", str(paths[MEDIUM.key])]
    argv += ["--rounds", str(repeats), "--out", str(out)]

    def section() -> dict[str, Any]:
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
        subprocess.run(argv, check=True, **quiet)
        return dict(json.loads(out.read_text()))

    results.limits = _guarded(results, "limits", section)


def _extras(
    profile: suite.Profile,
    paths: dict[str, Path],
    scratch: Path,
    results: BenchResults,
    smoke: bool,
) -> None:
    big = paths[profile.memory_model]
    say("monitoring overhead")
    over = _guarded(results, "overhead", lambda: extras.overhead(big, profile.overhead_pairs))
    if over is not None:
        results.overhead = dataclasses.replace(over, model_key=profile.memory_model)
    say("peak memory (in a fresh process)")
    cold = next(
        (
            j
            for j in results.jobs
            if j.env == "local" and j.cache == "cold" and j.model_key == profile.memory_model
        ),
        None,
    )
    probe = _guarded(
        results,
        "memory",
        lambda: memory.measure_in_fresh_process(
            big, scratch / "memory.json", profile.discard_repeats
        ),
    )
    if probe is not None:
        peers = tuple(peer_memory(cold)) if cold else ()
        results.memory = dataclasses.replace(probe, model_key=profile.memory_model, peers=peers)
    say("plan time")
    results.plan = _guarded(
        results, "plan", lambda: extras.plan_time(scratch, profile.plan_tensors)
    )
    say("GUI tick latency")
    if smoke:
        results.skipped["gui_tick"] = "not run in --smoke"
    else:
        results.gui_tick = _guarded(results, "gui_tick", extras.gui_tick)


def _write(results: BenchResults, out: Path) -> None:
    folder = out.parent / "benchmarks"
    folder.mkdir(parents=True, exist_ok=True)
    raw = folder / "results.json"
    raw.write_text(json.dumps(to_json(results), indent=1) + "\n")  # first: nothing lost
    missing = plots.matplotlib_missing()
    results.plots = plots.plot_all(results, folder)
    if missing and not any(n.startswith("No plots") for n in results.notes):
        results.notes.append(f"No plots: {missing}.")
    raw.write_text(json.dumps(to_json(results), indent=1) + "\n")
    out.write_text(report.render(results))


if __name__ == "__main__":
    sys.exit(main())
