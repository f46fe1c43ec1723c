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
   recommend measured (the regret of its pick is against the best median of these), Run:ai
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

from benchmarks.objects_env import bucket_mount, in_shaped_namespace, latency_proxy, s3_server
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


WATCHED_CONCURRENCY = 16


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


def watched_medians(rows: list[dict[str, float]]) -> tuple[float, float, float]:
    """Medians of watched runs: the watch's MB/s, the program's own, the connections seen."""
    seen, own, peak = (
        statistics.median(row[key] for row in rows)
        for key in ("watch_mbps", "own_mbps", "peak_connections")
    )
    return seen, own, peak


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
        watched = watch_check(model, rounds)
        program = watched_program(model, rounds) if len(model.files) == 1 else []
        pick_label = f"{pick.strategy} {pick.options.threads}×{pick.options.chunk // MiB} MiB"
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
            "watched": watched,
            "watched_program": program,
        }


def judged(data: dict[str, Any]) -> dict[str, Any]:
    medians = data["medians"]
    own = {k: v for k, v in medians.items() if k.startswith("ranged")}
    runai = {k: v for k, v in medians.items() if k.startswith("runai")}
    best_own = max(own, key=lambda k: own[k])
    best_runai = max(runai, key=lambda k: runai[k]) if runai else None
    return {
        "best_own": best_own,
        "best_own_vs_ceiling": own[best_own] / data["ceiling_mbps"],
        "best_own_vs_bound": own[best_own] / data["bound_mbps"],
        "best_own_vs_runai": own[best_own] / runai[best_runai] if best_runai else None,
        "best_runai": best_runai,
        "regret": 1 - own.get(data["pick"], 0.0) / own[best_own],
        "stream_vs_mount": own[best_own] / medians["mount: sequential ×4 (cold)"],
    }


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _runs_text(runs: list[float]) -> str:
    return ", ".join(f"{run:.0f}" for run in runs) or "–"


def markdown(data: dict[str, Any]) -> list[str]:
    """The section's lines for docs/benchmarks.md (``data`` with its verdict)."""
    verdict = data.get("verdict") or judged(data)
    rate = f"{data['rate_mbit']} Mbit/s" if data["rate_mbit"] else "no rate limit"
    rate += f", {data['latency_ms']:g} ms before each request" if data["latency_ms"] else ""
    each = data["connection_mbps"]
    rate += f", {each:g} MB/s per connection at most" if each else ""
    gb = data["bytes"] / 1e9
    out = [f"### rclone serve s3 on loopback, {rate} ({gb:.2f} GB model)\n"]
    out += ["| plain GETs (the curve) | MB/s |", "| --- | ---: |"]
    out += [f"| {setting} | {mbps:.0f} |" for setting, mbps in data["curve"]]
    out.append(
        f"\nCeiling (the best of the curve, measured at the start of every round; the "
        f"median of the rounds' {_runs_text(data.get('ceiling_runs', []))}): "
        f"{data['ceiling_mbps']:.0f} MB/s; a load that keeps its bytes is bound by "
        f"{data['bound']}: {data['bound_mbps']:.0f} MB/s.\n"
    )
    out += ["| configuration | median MB/s | runs |", "| --- | ---: | --- |"]
    for label, median in sorted(data["medians"].items(), key=lambda kv: -kv[1]):
        runs = ", ".join(f"{v:.0f}" for v in data["runs"][label])
        mark = " (recommend's pick)" if label == data["pick"] else ""
        out.append(f"| {label}{mark} | {median:.0f} | {runs} |")
    against = verdict["best_own_vs_runai"]
    runai = (
        f"{against:.2f}× Run:ai's best ({verdict['best_runai']})"
        if against is not None
        else "Run:ai not measured"
    )
    out.append(
        f"\nmodelmon's best ({verdict['best_own']}): {verdict['best_own_vs_ceiling']:.2f}× the "
        f"storage ceiling, {verdict['best_own_vs_bound']:.2f}× its bound, {runai}; "
        f"recommend's regret {verdict['regret']:.0%}; stream {verdict['stream_vs_mount']:.2f}× "
        "the mount.\n"
    )
    program = data.get("watched_program") or []
    if program:
        seen, own, peak = watched_medians(program)
        out.append(
            f"A program timing its own GETs (`benchmarks/stream_program.py`, "
            f"{WATCHED_CONCURRENCY} connections, {len(program)} runs), watched from outside: "
            f"{seen:.0f} MB/s over its connections against {own:.0f} MB/s by its own clock "
            f"({seen / own:.2f}×); {peak:.0f} connections seen.\n"
        )
    watched = data.get("watched") or []
    if watched:
        seen, own, peak = watched_medians(watched)
        out.append(
            f"Watched from outside (`engine: runai RUNAI_STREAMER_CONCURRENCY="
            f"{WATCHED_CONCURRENCY}`, {len(watched)} runs): {seen:.0f} MB/s over its "
            f"connections against {own:.0f} MB/s by its own clock ({seen / own:.2f}×); "
            f"{peak:.0f} connections at most.\n"
        )
    return out


def notes() -> list[str]:
    return [
        (
            "A model in a bucket of `rclone serve s3` on loopback (ETags off: its local backend "
            "would hash the whole file for each ranged GET), shaped where said: a network "
            "namespace whose loopback a `tbf` qdisc limits, and a proxy that holds each request "
            "(a real bucket's time to first byte) and paces each connection (S3 serves one "
            "connection about 100 MB/s). The ceiling is the best of the curve of plain GETs "
            "(`core/measuring/object_bounds.py`: N connections, each taking the next GET of one "
            "part size from a queue, bytes discarded), measured at the start of every round; the "
            "rounds alternate every configuration "
            "of recommend's search space, Run:ai Model Streamer's S3 backend at each concurrency "
            "(a fresh child timed by itself, one byte of every page touched) and the same bucket "
            "through `rclone mount` read by modelmon's file strategy from a verified-cold page "
            "cache. Nothing is cached on this machine between runs of a bucket; the server's own "
            "reads come from its page cache (the model was written just before). Reproduce one "
            "table: `python -m benchmarks.objects --gib 1 --rounds 3 [--rate-mbit R --latency-ms "
            "L --connection-mbps C]`."
            "\n"
        ),
    ]


def section(found: list[dict[str, Any]], skipped: str | None) -> list[str]:
    """docs/benchmarks.md's section: the notes, then each network profile's tables."""
    out = ["## Object storage: the bucket's ceiling, stream or mount, Run:ai\n"]
    if not found:
        return [*out, f"Not run: {skipped or 'not asked for'}.\n"]
    return [*out, *notes(), *(line for data in found for line in markdown(data))]


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
