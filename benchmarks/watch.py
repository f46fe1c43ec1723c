"""Watching other loaders: is what modelmon sees from outside what the program did, and what
does watching cost it?

    .venv/bin/python -m benchmarks.watch [MODEL] [--fuse] [--pairs N] [--compare]

Three measurements, each a function the bench suite can call:

* ``watched_vs_own``: each program of ``watched_programs`` watched, cold, next to its own
  timing: the watched MB/s (bytes that arrived / first to last byte) against the program's
  (bytes it loaded / its own clock), the findings, the shared descriptor's pids, the lazy
  program's fraction;
* ``watch_overhead``: the same cold program alternately watched and not, the program's own
  load time compared (median of the per-pair ratios), with the watch's CPU as a share of
  one core while it ran (the direct bound: watching reads /proc and asks the page cache,
  it never touches the disk, so it can slow the program only by taking CPU);
* ``storage_references``: modelmon's read ceilings on the same file, for "your loader: 38
  MB/s; this mount can deliver 600".

``--fuse`` serves the model's folder over loopback HTTP and mounts it with rclone
(``envs.fuse_mount``): the network FUSE case. ``run_section`` is what ``./dev bench`` runs
(its ``WatchReport`` is ``results.watch``; ``watch_tables`` renders it beside modelmon's best
for the same model).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.codec import from_json, to_json
from benchmarks.envs import EnvUnavailable, fuse_mount
from benchmarks.watched_programs import KINDS, program
from modelmon.core import Watch, WatchResult, storage_references, write_safetensors_model
from modelmon.core.system import prepare_cache

OVERHEAD_TARGET = 0.03  # of the watched program's load time
SPEED_TOLERANCE = 0.15  # watched MB/s against the program's own


@dataclass(frozen=True)
class OwnReport:
    """The JSON line a watched program prints of itself (``watched_programs``)."""

    kind: str
    seconds: float
    bytes: int
    size: int
    pids: list[int]
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class WatchedRun:
    kind: str
    exit_code: int | None
    cold: bool
    own_seconds: float
    own_mbps: float | None
    watched_seconds: float | None  # None: no model byte seen arriving
    # On the watch's clock (seconds after the command started): the program's own start
    # and end of its load, and the first and last byte the watch saw arrive.
    own_start_s: float
    first_byte_s: float | None
    last_byte_s: float | None
    own_end_s: float
    watched_mbps: float | None
    watched_bytes: int
    ratio: float | None  # watched MB/s over the program's own
    findings: list[str]
    shared_pids: list[int]
    program_pids: list[int]
    partial_fraction: float | None
    loader: str
    watch_cpu_share: float | None


@dataclass(frozen=True)
class WatchOverhead:
    kind: str
    control: bool  # both sides unwatched: the noise floor of the comparison
    pairs: int
    median_seconds_watched: float
    median_seconds_plain: float
    ratios: list[float]
    overhead: float  # of the program's load time; noisy
    watch_core_share_median: float | None
    target: float = OVERHEAD_TARGET


@dataclass(frozen=True)
class StorageReference:
    name: str
    mbps: float
    spec: str


@dataclass
class WatchReport:
    model: str
    size: int
    programs: list[WatchedRun]
    overhead: WatchOverhead | None = None
    control: WatchOverhead | None = None
    references: list[StorageReference] = field(default_factory=list)
    seconds: float = 0.0
    # In ./dev bench: the environment, the bench model the file is (a shard) of, and the
    # programs that failed or were stopped at the time limit, with why.
    env: str = ""
    model_key: str = ""
    failed: dict[str, str] = field(default_factory=dict)
    time_limit_s: float | None = None


def _own_report(output: Path) -> OwnReport:
    lines = output.read_text().strip().splitlines()
    if not lines:
        raise RuntimeError(f"the watched program wrote nothing to {output}")
    return from_json(OwnReport, json.loads(lines[-1]))


def watch_once(
    model: Path,
    kind: str,
    scratch: Path,
    interval_s: float = 0.1,
    time_limit_s: float | None = None,
) -> WatchedRun:
    """One cold run of ``kind`` on ``model``, watched: what the watch saw and what the program
    says it did. Past ``time_limit_s`` the watch stops the program (a RuntimeError)."""
    output = scratch / f"{kind}.out"
    with open(output, "w") as out:
        watch = Watch(
            program(kind, model), model=[str(model)], stdout=out.fileno(), interval_s=interval_s
        )
        timer = threading.Timer(time_limit_s, watch.cancel) if time_limit_s else None
        if timer is not None:
            timer.start()
        try:
            result = watch.run()
        finally:
            if timer is not None:
                timer.cancel()
    if result.ended_by == "cancel":
        raise RuntimeError(f"stopped at the time limit of {time_limit_s:g} s")
    own = _own_report(output)
    # Judged by the bytes that arrived in the page cache, over first to last byte.
    arrived_mbps = result.arrived_bytes / result.seconds / 1e6 if result.seconds else None
    t0 = watch.t0_ns
    own_mbps = own.bytes / own.seconds / 1e6 if own.seconds else None
    shared = [d for d in result.descriptions if d.shared]
    partial = next((f for f in result.findings if f.code == "partial-read"), None)
    return WatchedRun(
        kind=kind,
        exit_code=result.exit_code,
        cold=bool(result.cache and result.cache.cold),
        own_seconds=own.seconds,
        own_mbps=own_mbps,
        watched_seconds=result.seconds,
        own_start_s=(own.start_ns - t0) / 1e9,
        first_byte_s=result.first_byte_s,
        last_byte_s=result.last_byte_s,
        own_end_s=(own.end_ns - t0) / 1e9,
        watched_mbps=arrived_mbps,
        watched_bytes=result.arrived_bytes,
        ratio=arrived_mbps / own_mbps if arrived_mbps and own_mbps else None,
        findings=[f.code for f in result.findings],
        shared_pids=sorted(shared[0].pids) if shared else [],
        program_pids=own.pids,
        partial_fraction=float(partial.evidence["fraction"]) if partial else None,
        loader=result.loader.label,
        watch_cpu_share=_cpu_share(result),
    )


def _cpu_share(result: WatchResult) -> float | None:
    """CPU of the watch (sampler thread: tree, looks, page scans) per second of the run."""
    samples = result.samples
    if samples is None or not result.wall_seconds:
        return None
    return float(samples.sampler_cpu_seconds / result.wall_seconds)


def watched_vs_own(model: Path, kinds: tuple[str, ...] = KINDS) -> list[WatchedRun]:
    with tempfile.TemporaryDirectory() as scratch:
        return [watch_once(model, kind, Path(scratch)) for kind in kinds]


def _plain_once(model: Path, kind: str, scratch: Path, time_limit_s: float | None = None) -> float:
    """The program's own load seconds, cold, not watched (the cache made cold the same way)."""
    state = prepare_cache([str(model)], "cold")
    if not state.cold:
        raise RuntimeError(f"could not make {model} cold: {state.note}")
    output = scratch / f"{kind}.plain.out"
    with open(output, "w") as out:
        subprocess.run(program(kind, model), stdout=out, check=True, timeout=time_limit_s)
    return _own_report(output).seconds


def _watched_once(
    model: Path, kind: str, scratch: Path, interval_s: float, time_limit_s: float | None
) -> WatchedRun:
    """A watched run that can stand for the program's load: cold and exit 0, or an error."""
    row = watch_once(model, kind, scratch, interval_s, time_limit_s)
    if not row.cold or row.exit_code != 0:
        raise RuntimeError(
            f"a watched {kind} run was not usable (cold {row.cold}, exit code {row.exit_code})"
        )
    return row


def watch_overhead(
    model: Path,
    pairs: int = 5,
    kind: str = "read-whole",
    interval_s: float = 0.1,
    control: bool = False,
    time_limit_s: float | None = None,
) -> WatchOverhead:
    """Alternating cold runs, watched and not; the program's own seconds compared.

    ``control``: both sides unwatched (the same code path otherwise): the noise floor of
    the comparison on this machine, to read the watched figure against. On a shared 2-core
    machine, 6-pair control medians ranged from -1 % to +7 %."""
    watched: list[float] = []
    plain: list[float] = []
    ratios: list[float] = []
    shares: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        for pair in range(pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            seconds: dict[bool, float] = {}
            for watching in order:
                if watching and not control:
                    row = _watched_once(model, kind, Path(scratch), interval_s, time_limit_s)
                    seconds[True] = row.own_seconds
                    if row.watch_cpu_share is not None:
                        shares.append(row.watch_cpu_share)
                else:
                    seconds[watching] = _plain_once(model, kind, Path(scratch), time_limit_s)
            watched.append(seconds[True])
            plain.append(seconds[False])
            ratios.append(seconds[True] / seconds[False])
    median_ratio = statistics.median(ratios)
    return WatchOverhead(
        kind=kind,
        control=control,
        pairs=pairs,
        median_seconds_watched=statistics.median(watched),
        median_seconds_plain=statistics.median(plain),
        ratios=[round(r, 4) for r in ratios],
        overhead=round(median_ratio - 1, 4),
        watch_core_share_median=round(statistics.median(shares), 4) if shares else None,
    )


def default_model(folder: Path) -> Path:
    """~1.1 GB fp16, one file: 10 layers of TinyLlama's shapes."""
    return write_safetensors_model(folder, layers=10, hidden=2048, intermediate=5632, vocab=32000)


@contextlib.contextmanager
def where(model: Path, fuse: bool, mount: Path | None = None) -> Iterator[Path]:
    """The model's path, on a loopback network FUSE mount of its folder when ``fuse`` (at
    ``mount``, default a temporary folder); unmounted whatever happens."""
    if not fuse:
        yield model
        return
    with contextlib.ExitStack() as stack:
        point = mount or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        yield stack.enter_context(fuse_mount(model.parent, point)) / model.name


def largest_file(entry: Path) -> Path:
    """The file a program loads: ``entry`` itself, or the largest shard beside an index."""
    if entry.suffix == ".safetensors":
        return entry
    return max(entry.parent.glob("*.safetensors"), key=lambda p: p.stat().st_size)


def run_section(
    env: str,
    source: Path,
    model_key: str,
    scratch: Path,
    say: Callable[[str], None],
    *,
    pairs: int,
    time_limit_s: float,
    kinds: tuple[str, ...] = KINDS,
) -> WatchReport:
    """``./dev bench``'s section on ``env`` ("fuse": one mount of ``source``'s folder for
    all of it, "local": as it is): each program watched once against its own timing (one
    that fails or passes ``time_limit_s`` is recorded with why), then ``pairs`` alternating
    pairs watched and not, and as many with neither watched (the comparison's noise floor)."""
    if env not in ("fuse", "local"):
        raise EnvUnavailable(f"the watch section runs on fuse or local, not {env}")
    started = time.monotonic()
    with where(source, env == "fuse", scratch / "mnt-watch") as model:
        size = os.path.getsize(model)
        report = WatchReport(
            str(model), size, [], env=env, model_key=model_key, time_limit_s=time_limit_s
        )
        with tempfile.TemporaryDirectory(dir=scratch) as outputs:
            for kind in kinds:
                say(f"watch: {env} · {kind}")
                try:
                    report.programs.append(
                        watch_once(model, kind, Path(outputs), time_limit_s=time_limit_s)
                    )
                except Exception as exc:  # one program's failure is its row, not the section's
                    report.failed[kind] = f"{type(exc).__name__}: {exc}"
        if pairs:
            say(f"watch: overhead, {pairs} pair(s) watched and not, {pairs} with neither")
            limit = time_limit_s
            report.overhead = watch_overhead(model, pairs, time_limit_s=limit)
            report.control = watch_overhead(model, pairs, control=True, time_limit_s=limit)
    report.seconds = round(time.monotonic() - started, 1)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", nargs="?", help="default: a generated ~1.1 GB fp16 model")
    parser.add_argument("--fuse", action="store_true", help="on a loopback network FUSE mount")
    parser.add_argument("--pairs", type=int, default=5, help="overhead pairs (default 5)")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--compare", action="store_true", help="also modelmon's read ceilings")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(dir=Path.cwd()) as scratch:
        source = Path(args.model) if args.model else default_model(Path(scratch))
        with where(source, args.fuse) as model:
            report = WatchReport(
                str(model),
                os.path.getsize(model),
                watched_vs_own(model, tuple(args.kinds.split(","))),
            )
            if args.pairs:
                report.overhead = watch_overhead(model, args.pairs)
                report.control = watch_overhead(model, args.pairs, control=True)
            if args.compare:
                report.references = [
                    StorageReference(r.name, r.mbps, r.spec)
                    for r in storage_references([str(model)])
                ]
    report.seconds = round(time.monotonic() - started, 1)
    print(json.dumps(to_json(report), indent=2))


if __name__ == "__main__":
    main()
