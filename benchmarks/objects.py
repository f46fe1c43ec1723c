"""Object storage, on a real S3 server on loopback:
``python -m benchmarks.objects [--gib 1] [--rounds 3] [--rate-mbit N] [--latency-ms L]
[--budget 60] [--out F]``.

A model of about ``--gib`` GiB in a bucket served by ``rclone serve s3`` (``objects_env``:
with ``--rate-mbit`` the server and every client run in a network namespace whose loopback a
``tbf`` qdisc shapes to that rate; with ``--latency-ms`` a proxy holds each request that
long, as a real bucket's time to first byte, and with ``--connection-mbps`` paces each
connection to that rate, as S3 serves one connection). Then, in one session:

1. ``recommend`` within ``--budget``: its pick;
2. ``--rounds`` alternating rounds, each opened by the bucket's ceiling (the curve of plain
   GETs, connections 1…64 × part sizes, and the memory filled beside them), then, the order
   rotated each round: every configuration
   recommend measured (the regret of its pick is against the best median of these, with
   confirmation pairs where one beat the pick: ``confirm``), Run:ai
   Model Streamer's S3 backend at each concurrency (a fresh child timed by itself, every
   tensor touched), and the same bucket through ``rclone mount`` read by modelmon's file
   strategy from an evicted, verified-cold page cache (mount or stream?).

Reported: the last round's curve; each configuration's median MB/s; modelmon's best against
the ceiling's median over the rounds and against Run:ai's best concurrency; recommend's
regret; mount against stream.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.object_tables import WATCHED_CONCURRENCY, judged, markdown, regret_medians
from benchmarks.objects_env import bucket_mount, in_shaped_namespace, latency_proxy, s3_server
from benchmarks.regret_tables import CONFIRM_PAIRS, CONFIRM_RIVALS
from modelmon.core import (
    LoadRun,
    Watch,
    measure_ceilings,
    open_model,
    parse_engine,
    recommend,
    run_for,
    run_fresh,
)
from modelmon.core.options import LoadOptions

MiB = 1 << 20
BUCKET = "models"
RUNAI_CONCURRENCY = (4, 16, 64)
MOUNT_CONFIG = ("sequential", {"workers": 4, "threads": 1, "chunk": 16 * MiB})


def write_model(root: Path, gib: float) -> Path:
    from modelmon.core import write_safetensors_model

    folder = root / BUCKET / "bench"
    if not any(folder.glob("*.safetensors")):
        layers = max(1, int(gib * (1 << 30) / (4 * 1024 * 4096 * 2 + 1)))
        write_safetensors_model(
            folder, layers=layers, hidden=1024, intermediate=4096, vocab=4096, seed=5
        )
    return folder


def runai_run(urls: list[str], concurrency: int) -> float:
    """One load by Run:ai Model Streamer's S3 backend in a fresh child, timed by itself."""
    env = dict(os.environ)
    env["RUNAI_STREAMER_CONCURRENCY"] = str(concurrency)
    env["RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING"] = "0"
    child = [sys.executable, "-m", "benchmarks.runai_s3", *urls]
    result = run_fresh(child, [], "keep", env=env, time_limit_s=600, who="Run:ai Model Streamer")
    if result.status != "ok":
        raise SystemExit(f"runai concurrency={concurrency}: {result.status}: {result.error}")
    return result.mbps


def watched_program(model: Any, rounds: int) -> list[dict[str, float]]:
    """A program that times its own GETs (``stream_program``), watched from outside: the
    watch's MB/s (the bytes its connections received, first to last) against its own, and
    the connections the watch saw against the ones it opened."""
    (only,) = model.files
    bucket, key = only.path.removeprefix("s3://").split("/", 1)
    found = []
    for _ in range(rounds):
        argv = [sys.executable, "-m", "benchmarks.stream_program", bucket, key]
        argv += [str(only.size), str(WATCHED_CONCURRENCY), str(16 * MiB)]
        with tempfile.TemporaryFile() as out:
            result = Watch(argv, model=model.path, stdout=out.fileno()).run()
            out.seek(0)
            own = json.loads(out.read().decode().strip().splitlines()[-1])
        if result.status != "exited" or result.mbps is None or result.connections is None:
            raise SystemExit(f"watched program: {result.status}: {result.notes}")
        own_mbps = own["bytes"] / own["seconds"] / 1e6
        found.append(_watched_row("program", result.mbps, own_mbps, result.connections))
    return found


def watch_check(model: Any, rounds: int) -> list[dict[str, float]]:
    """Run:ai's S3 streamer run as an engine side (``engine: runai``), watched from outside:
    the watch's MB/s (the bytes its connections received, first to last) against the
    program's own clock (its setup and touch of every byte included), and the connections
    it held."""
    if importlib.util.find_spec("runai_model_streamer_s3") is None:
        return []
    engine = parse_engine(f"runai RUNAI_STREAMER_CONCURRENCY={WATCHED_CONCURRENCY}")
    found = []
    for _ in range(rounds):
        outcome = run_for(model, engine, "cold").run()
        result, watch = outcome.result, outcome.watch
        if result.status != "ok" or watch is None or watch.connections is None:
            raise SystemExit(f"watched runai: {result.status}: {result.error}")
        own = result.bytes / result.own_seconds / 1e6 if result.own_seconds else 0.0
        found.append(_watched_row("runai", result.mbps, own, watch.connections))
    return found


def _watched_row(
    name: str, seen_mbps: float, own_mbps: float, connections: Any
) -> dict[str, float]:
    """One watched run: the watch's MB/s beside the program's own, and the connections seen."""
    say(f"  watched {name}: {seen_mbps:.0f} MB/s seen, {own_mbps:.0f} by its own clock")
    return {
        "watch_mbps": seen_mbps,
        "own_mbps": own_mbps,
        "peak_connections": connections.peak_open,
        "received_bytes": connections.received_bytes,
    }


def contenders(model: Any, mount_path: str, urls: list[str], specs: list[tuple[str, LoadOptions]]):  # type: ignore[no-untyped-def]
    """(label, one run → MB/s) of every configuration of the rounds."""
    runs: list[tuple[str, Callable[[], float]]] = []
    for strategy, options in specs:
        label = f"{strategy} {options.threads}×{options.chunk // MiB} MiB"

        def own(strategy: str = strategy, options: LoadOptions = options) -> float:
            result = LoadRun(model, strategy, options).run()
            if result.status != "ok":
                raise SystemExit(f"{strategy}: {result.status}: {result.error}")
            return result.mbps

        runs.append((label, own))
    if importlib.util.find_spec("runai_model_streamer_s3") is not None:
        for concurrency in RUNAI_CONCURRENCY:
            label = f"runai concurrency={concurrency}"
            runs.append((label, lambda c=concurrency: runai_run(urls, c)))
    else:
        say("Run:ai Model Streamer's S3 backend is not installed (./dev bench installs it)")
    strategy, knobs = MOUNT_CONFIG

    def mounted() -> float:
        result = LoadRun(mount_path, strategy, LoadOptions(cache="cold", **knobs)).run()
        if result.status != "ok" or not result.cache.cold:
            raise SystemExit(f"mount: {result.status}: {result.error or result.cache.note}")
        return result.mbps

    runs.append(("mount: sequential ×4 (cold)", mounted))
    return runs


def session(
    root: Path,
    gib: float,
    rounds: int,
    budget: float,
    rate_mbit: int,
    latency_ms: float,
    connection_mbps: float,
) -> dict[str, Any]:
    """The whole section, in this process (inside the namespace when shaped)."""
    folder = write_model(root, gib)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(s3_server(root))
        if latency_ms or connection_mbps:
            proxy = latency_proxy(endpoint, latency_ms / 1000, connection_mbps)
            endpoint = stack.enter_context(proxy)
            os.environ["AWS_ENDPOINT_URL"] = endpoint
        mount = stack.enter_context(bucket_mount(endpoint, root.parent / "mnt"))
        url = f"s3://{BUCKET}/bench/"
        model = open_model(url)
        urls = [f.path for f in model.files]
        say(f"model {url}: {model.file_bytes / 1e9:.2f} GB at {endpoint}")
        rec = recommend(model, budget_s=budget, peers=False)
        pick = rec.used
        say(f"recommend: {pick.spec} at {pick.median_mbps:.0f} MB/s")
        # The whole search space, measured or not by recommend: its regret is against all.
        space = [*rec.ranked, *rec.unranked]
        specs = [(c.strategy, c.options) for c in space if c.own is not None]
        mount_path = str(mount / "bench" / next(folder.glob("*.safetensors")).name)
        runs = contenders(model, mount_path, urls, specs)
        found: dict[str, list[float]] = {label: [] for label, _ in runs}
        bounds: dict[str, list[float]] = {"storage": [], "bound": []}
        for index in range(rounds):
            # The ceilings open every round, as the file bench's do: a load is judged against
            # the plain GETs of the same minutes, not of the session's start.
            ceilings = measure_ceilings(model, ("storage", "memory_fill"), repeats=1)
            storage, bound = ceilings.get("storage"), ceilings.bound(keeps=True)
            assert storage is not None and bound is not None
            bounds["storage"].append(storage.mbps)
            bounds["bound"].append(bound.mbps)
            say(f"  round {index + 1}: ceiling: {storage.spec}; bound: {bound.name}")
            shift = index % len(runs)
            for label, run in runs[shift:] + runs[:shift]:
                found[label].append(run())
                say(f"  round {index + 1}: {label}: {found[label][-1]:.0f} MB/s")
        pick_label = f"{pick.strategy} {pick.options.threads}×{pick.options.chunk // MiB} MiB"
        confirmed = confirm(runs, found, pick_label)
        watched = watch_check(model, rounds)
        program = watched_program(model, rounds) if len(model.files) == 1 else []
        return {
            "rate_mbit": rate_mbit,
            "latency_ms": latency_ms,
            "connection_mbps": connection_mbps,
            "bytes": model.file_bytes,
            "ceiling_mbps": statistics.median(bounds["storage"]),
            "ceiling_runs": bounds["storage"],
            # What bounds a load that keeps its bytes: the lower of the storage and the
            # memory filled beside plain GETs (in the last round).
            "bound": bound.name,
            "bound_mbps": statistics.median(bounds["bound"]),
            "bound_runs": bounds["bound"],
            "curve": storage.curve,  # the last round's
            "pick": pick_label,
            "medians": {label: statistics.median(v) for label, v in found.items()},
            "runs": found,
            "confirm_runs": confirmed,
            "watched": watched,
            "watched_program": program,
        }


def confirm(
    runs: list[tuple[str, Callable[[], float]]], found: dict[str, list[float]], pick: str
) -> dict[str, list[float]]:
    """When another of modelmon's configurations beat recommend's pick over the rounds,
    ``CONFIRM_PAIRS`` more runs of the two, alternating which goes first, as the file bench
    does (``matrix.confirm``): the best of many configurations ranked by the same few runs is
    the one that drew the luckiest runs, so its lead over the rounds alone overstates the
    regret. When, with those runs, another beats the pick, it is confirmed the same way
    (``CONFIRM_RIVALS`` at most). Only the regret reads these."""
    by_label = dict(runs)
    extra: dict[str, list[float]] = {}
    confirmed: set[str] = set()
    while len(confirmed) < CONFIRM_RIVALS and pick in found:
        medians = regret_medians({"runs": found, "confirm_runs": extra})
        best = max(medians, key=lambda label: medians[label])
        if best == pick or best in confirmed or medians[best] <= medians[pick]:
            break
        confirmed.add(best)
        for number in range(CONFIRM_PAIRS):
            for label in (pick, best) if number % 2 == 0 else (best, pick):
                extra.setdefault(label, []).append(by_label[label]())
                say(f"  confirming: {label}: {extra[label][-1]:.0f} MB/s")
    return extra


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--rate-mbit", type=int, default=0, help="shape loopback to this rate")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="hold each request")
    parser.add_argument("--connection-mbps", type=float, default=0.0, help="pace each one")
    parser.add_argument("--scratch", type=Path, default=Path("tmp/objects"))
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.scratch.resolve() / "served"
    if args.rate_mbit and not args.inside:  # again, inside a shaped namespace
        # Through the proxy each byte crosses loopback twice: the qdisc is given twice the
        # rate, so that the rate end to end is the one asked for.
        proxied = args.latency_ms or args.connection_mbps
        with tempfile.TemporaryFile() as out:
            in_shaped_namespace(
                [sys.executable, "-m", "benchmarks.objects", "--inside", *(argv or sys.argv[1:])],
                args.rate_mbit * (2 if proxied else 1),
                out,
            )
            out.seek(0)
            data = json.load(out)
    else:
        data = session(
            root,
            args.gib,
            args.rounds,
            args.budget,
            args.rate_mbit,
            args.latency_ms,
            args.connection_mbps,
        )
        if args.inside:
            json.dump(data, sys.stdout)
            return 0
    data["verdict"] = judged(data)
    print("\n".join(markdown(data)))
    if args.out:
        args.out.write_text(json.dumps(data, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
