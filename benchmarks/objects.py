"""Object storage, on a real S3 server on loopback:
``python -m benchmarks.objects [--gib 1] [--rounds 3] [--rate-mbit N] [--latency-ms L]
[--connection-mbps C] [--total-mbps T] [--rate R --burst B] [--budget 60] [--out F]``.

A model of about ``--gib`` GiB in a bucket served by ``rclone serve s3`` (``objects_env``:
with ``--rate-mbit`` the server and every client run in a network namespace whose loopback a
``tbf`` qdisc shapes to that rate; with ``--latency-ms`` a proxy holds each request that
long, as a real bucket's time to first byte, with ``--connection-mbps`` paces each
connection to that rate, as S3 serves one connection, with ``--total-mbps`` all of them
together, and with ``--rate`` answers 503 SlowDown above that many GETs a second per prefix,
``--burst`` at once, as S3 throttles). Then, in one session:

1. ``recommend`` within ``--budget``: its pick;
2. ``--rounds`` alternating rounds, each opened by the bucket's ceiling (the curve of plain
   GETs, connections 1…64 × part sizes, and the memory filled beside them), then, the order
   rotated each round: every configuration
   recommend measured (the regret of its pick is against the best median of these, with
   confirmation pairs where one beat the pick: ``confirm``), and the sides beside it
   (``object_peers``): ``load`` with its defaults, a fixed boto3 client, Run:ai Model
   Streamer's S3 backend at each concurrency, the same bucket through ``rclone mount``. A
   side that fails (a fixed client a throttling bucket refuses) is recorded as failed.

Reported: the last round's curve; each configuration's median MB/s; modelmon's best against
the ceiling's median over the rounds and against Run:ai's best concurrency; recommend's
regret, and its pick against the best it measured itself; mount against stream; on a
bucket that throttles, ``load`` with its defaults against the fixed client, and its pace.
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

from benchmarks.object_peers import Failed, Run, own_run, peer_runs
from benchmarks.object_tables import WATCHED_CONCURRENCY, judged, markdown, regret_medians
from benchmarks.objects_env import bucket_mount, in_shaped_namespace, latency_proxy, s3_server
from benchmarks.regret_tables import CONFIRM_PAIRS, CONFIRM_RIVALS
from modelmon.core import Watch, measure_ceilings, open_model, recommend, run_for
from modelmon.core.configuration import parse_engine
from modelmon.core.options import LoadOptions

MiB = 1 << 20
BUCKET = "models"


def write_model(root: Path, gib: float) -> Path:
    from modelmon.core import write_safetensors_model

    folder = root / BUCKET / "bench"
    if not any(folder.glob("*.safetensors")):
        layers = max(1, int(gib * (1 << 30) / (4 * 1024 * 4096 * 2 + 1)))
        write_safetensors_model(
            folder, layers=layers, hidden=1024, intermediate=4096, vocab=4096, seed=5
        )
    return folder


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


def contenders(  # type: ignore[no-untyped-def]
    model, mount_path: str, urls: list[str], specs: list[tuple[str, LoadOptions]], paced
) -> list[tuple[str, Run]]:
    """(label, one run → MB/s) of every configuration of the rounds: recommend's search
    space, then the sides beside it (``object_peers``)."""
    runs: list[tuple[str, Run]] = [
        (
            f"{strategy} {options.threads}×{options.chunk // MiB} MiB",
            own_run(model, strategy, options),
        )
        for strategy, options in specs
    ]
    return runs + peer_runs(model, urls, mount_path, paced, say)


def measured(label: str, run: Run, failed: dict[str, list[str]]) -> float | None:
    """One run's MB/s, or None when it failed (why kept in ``failed``)."""
    try:
        return run()
    except Failed as exc:
        failed.setdefault(label, []).append(str(exc))
        say(f"  {label}: failed: {exc}")
        return None


def session(
    root: Path,
    gib: float,
    rounds: int,
    budget: float,
    rate_mbit: int,
    latency_ms: float,
    connection_mbps: float,
    total_mbps: float = 0.0,
    rate: float = 0.0,
    burst: float = 1.0,
) -> dict[str, Any]:
    """The whole section, in this process (inside the namespace when shaped)."""
    folder = write_model(root, gib)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(s3_server(root))
        if latency_ms or connection_mbps or total_mbps or rate:
            proxy = latency_proxy(
                endpoint,
                latency_ms / 1000,
                connection_mbps,
                total_mbps=total_mbps,
                rate=rate,
                burst=burst,
            )
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
        paced: dict[str, list[dict[str, Any]]] = {}
        runs = contenders(model, mount_path, urls, specs, paced)
        found: dict[str, list[float | None]] = {label: [] for label, _ in runs}
        failed: dict[str, list[str]] = {}
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
                found[label].append(measured(label, run, failed))
                if found[label][-1] is not None:
                    say(f"  round {index + 1}: {label}: {found[label][-1]:.0f} MB/s")
        pick_label = f"{pick.strategy} {pick.options.threads}×{pick.options.chunk // MiB} MiB"
        done = {label: [v for v in values if v is not None] for label, values in found.items()}
        confirmed = confirm(runs, done, pick_label)
        # A bucket that throttles refuses the watched programs' fixed 16 connections.
        watched = [] if rate else watch_check(model, rounds)
        program = watched_program(model, rounds) if len(model.files) == 1 and not rate else []
        return {
            "rate_mbit": rate_mbit,
            "latency_ms": latency_ms,
            "connection_mbps": connection_mbps,
            "total_mbps": total_mbps,
            "rate": rate,
            "burst": burst,
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
            # recommend's own measurements: its pick against the best it measured.
            "searched": {
                f"{c.strategy} {c.options.threads}×{c.options.chunk // MiB} MiB": c.median_mbps
                for c in rec.ranked
            },
            "duel": _duel_text(rec),
            "medians": {
                label: statistics.median(values) if values else None
                for label, values in done.items()
            },
            "runs": done,
            "failed": failed,
            "paced": paced,
            "confirm_runs": confirmed,
            "watched": watched,
            "watched_program": program,
        }


def _duel_text(rec: Any) -> str:
    """How recommend settled its pick, in a few words."""
    duel = rec.duel
    if duel is None:
        return "nothing to compare it with"
    other = (
        f"{duel.other.strategy} {duel.other.options.threads}×{duel.other.options.chunk // MiB} MiB"
    )
    if duel.verdict is None:
        return f"against {other}: no pair fitted the budget"
    how = "within noise" if duel.tie else duel.verdict.text
    return f"against {other}: {duel.pairs} pair(s), {how} (×{duel.verdict.median_ratio:.2f})"


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
    parser.add_argument("--total-mbps", type=float, default=0.0, help="pace all together")
    parser.add_argument(
        "--rate", type=float, default=0.0, help="503 SlowDown above this many GETs/s a prefix"
    )
    parser.add_argument("--burst", type=float, default=4.0, help="GETs at once before --rate")
    parser.add_argument("--scratch", type=Path, default=Path("tmp/objects"))
    parser.add_argument("--out", type=Path, help="write every figure as JSON here")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = args.scratch.resolve() / "served"
    if args.rate_mbit and not args.inside:  # again, inside a shaped namespace
        # Through the proxy each byte crosses loopback twice: the qdisc is given twice the
        # rate, so that the rate end to end is the one asked for.
        proxied = args.latency_ms or args.connection_mbps or args.total_mbps or args.rate
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
            args.total_mbps,
            args.rate,
            args.burst,
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
