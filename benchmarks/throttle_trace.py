"""What the throttled disk really delivered to each reader, from the block layer:
``python -m benchmarks.throttle_trace [--rounds 3] [--gib 0.31] [--scratch tmp/bounds]``.

The hdd bench emulates a hard disk with a blkio throttle (150 MiB/s). Its storage bound is a
plain reader's rate through it; a load above it is either a wrong clock or a throttle that
let that load's pattern through faster. This tells them apart without any clock of the
readers: the kernel's ``block_rq_complete`` events (tracefs) for the sectors of the model's
file, while a plain reader (4 threads, 16 MiB requests, discarding), the safetensors library
and Run:ai's streamer (io_uring, O_DIRECT, a deep queue; where installed), each as the
bench's engine side runs it, load it cold, in turns. Each run's figure is the model's bytes
the disk completed over the span from its first completion to its last, how far ahead of
the throttle's rate that span finished (blk-throttle allows up to two slices, 0.2 s), and
the most it completed in any 100 ms (the rate is 15.7 MB per 100 ms). Needs root (tracefs,
the blkio cgroup); the events are switched off afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks.bounds import storage
from benchmarks.envs import disk_of

TRACING = Path("/sys/kernel/tracing")
EVENT = TRACING / "events/block/block_rq_complete/enable"
WINDOW_S = 0.1
MiB = 1 << 20
# "<stamp>: block_rq_complete: MAJ,MIN FLAGS () SECTOR + COUNT ..." and the marks between runs.
COMPLETE = re.compile(r" (\d+\.\d+): block_rq_complete: (\d+),(\d+) \S+ \(\S*\) (\d+) \+ (\d+)")
MARK = re.compile(r" (\d+\.\d+): tracing_mark_write: (BEGIN|END) (.+)$")

# The rounds, inside the throttling cgroup: a plain reader and the library, in turns, cold.
INSIDE = r"""
import importlib.util, os, sys, threading
from modelmon.core import open_model, run_for
from modelmon.core.configuration import parse_engine
from modelmon.core.system import prepare_cache

path, rounds = sys.argv[1], int(sys.argv[2])
size = os.path.getsize(path)

def mark(text):
    with open("/sys/kernel/tracing/trace_marker", "w") as marker:
        marker.write(text)

def plain(readers=4, request=16 << 20):
    def read(first, end):
        fd = os.open(path, os.O_RDONLY)
        buffer = memoryview(bytearray(request))
        try:
            while first < end:
                first += os.preadv(fd, [buffer[: min(request, end - first)]], first)
        finally:
            os.close(fd)
    edges = [size * i // readers for i in range(readers + 1)]
    threads = [threading.Thread(target=read, args=edges[i : i + 2]) for i in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

model = open_model(path)
engines = [("library", "safetensors")]
if importlib.util.find_spec("runai_model_streamer") is not None:
    engines.append(("runai", "runai"))
for index in range(rounds):
    prepare_cache([path], "cold")
    mark(f"BEGIN plain {index}")
    plain()
    mark(f"END plain {index}")
    for label, engine in engines:
        mark(f"BEGIN {label} {index}")  # run_for makes the cache cold before its program runs
        result = run_for(model, parse_engine(engine), "cold", monitor=False).run().result
        mark(f"END {label} {index}")
        own = size / result.own_seconds / 1e6
        print(f"{label} {index} watched {result.mbps:.1f} own {own:.1f}", flush=True)
"""


def file_sectors(path: Path) -> tuple[str, list[tuple[int, int]]]:
    """("MAJ,MIN" of the disk, [first, end) sectors of it) that hold ``path``: ``filefrag``'s
    extents once the file is on the disk (synced first), moved by the partition's start when
    the file system is on one."""
    with open(path, "rb") as file:
        os.fsync(file.fileno())
    listing = subprocess.run(
        ["filefrag", "-v", "-b512", str(path)], capture_output=True, text=True, check=True
    ).stdout
    extents = []
    for line in listing.splitlines():
        fields = line.replace(":", " ").replace("..", " ").split()
        if len(fields) >= 6 and fields[0].isdigit():
            if "unknown_loc" in line or "delalloc" in line:
                raise SystemExit(f"{path} has extents not on the disk yet: {line.strip()}")
            extents.append((int(fields[3]), int(fields[4]) + 1))
    device = os.stat(path).st_dev
    start = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}/start")  # a partition's
    offset = int(start.read_text()) if start.exists() else 0
    disk = disk_of(path).replace(":", ",")
    return disk, [(first + offset, end + offset) for first, end in extents]


SETTINGS = ("tracing_on", "buffer_size_kb", "trace_clock", "events/block/block_rq_complete/enable")


@contextlib.contextmanager
def completions_traced() -> Iterator[Path]:
    """tracefs recording the block layer's completions (mounted if it is not), on the
    monotonic clock the marks are written on; every setting it changes is put back, on
    every way out. Yields the trace file."""
    mounted = not (TRACING / "trace").exists()
    if mounted:
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)], check=True)
    before = {name: (TRACING / name).read_text().strip() for name in SETTINGS}
    clock = re.search(r"\[(\w+)\]", before["trace_clock"])
    # buffer_size_kb reads "7 (expanded: 1408)" before any trace is taken: its first word.
    restore = {
        **{name: value.split()[0] for name, value in before.items()},
        "trace_clock": clock.group(1) if clock else "local",
    }
    try:
        (TRACING / "buffer_size_kb").write_text("65536")
        (TRACING / "trace_clock").write_text("mono")
        (TRACING / "trace").write_text("")
        EVENT.write_text("1")
        (TRACING / "tracing_on").write_text("1")
        yield TRACING / "trace"
    finally:
        for name in reversed(SETTINGS):
            with contextlib.suppress(OSError):
                (TRACING / name).write_text(restore[name])
        with contextlib.suppress(OSError):
            (TRACING / "trace").write_text("")
        if mounted:
            subprocess.run(["umount", str(TRACING)], check=False)


def _figures(done: list[tuple[float, int]]) -> tuple[float, float, float]:
    total = sum(size for _, size in done)
    span = done[-1][0] - done[0][0]
    most = low = window = 0
    for stamp, size in done:
        window += size
        while done[low][0] < stamp - WINDOW_S:
            window -= done[low][1]
            low += 1
        most = max(most, window)
    return total / 1e6, span, most / 1e6


def delivered(
    trace: str, disk: str, sectors: list[tuple[int, int]]
) -> list[tuple[str, float, float, float]]:
    """Per marked run: (label, model MB completed, span s, most MB completed in 100 ms); a
    run that completed nothing of the model is there with zeros."""
    runs: list[tuple[str, float, float, float]] = []
    label: str | None = None
    done: list[tuple[float, int]] = []
    for line in trace.splitlines():
        if found := MARK.search(line):
            if found.group(2) == "BEGIN":
                label, done = found.group(3), []
            elif label is not None:
                runs.append((label, *_figures(done)) if done else (label, 0.0, 0.0, 0.0))
                label = None
            continue
        found = COMPLETE.search(line)
        if label is None or found is None or f"{found.group(2)},{found.group(3)}" != disk:
            continue
        first, count = int(found.group(4)), int(found.group(5))
        if any(low <= first < high for low, high in sectors):
            done.append((float(found.group(1)), count * 512))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gib", type=float, default=0.31)
    parser.add_argument("--scratch", type=Path, default=Path("tmp/bounds"))
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)
    with storage("hdd", args.scratch, args.gib) as (path, prefix), completions_traced() as trace:
        disk, sectors = file_sectors(Path(path))
        child = [sys.executable, "-c", INSIDE, path, str(args.rounds)]
        subprocess.run([*prefix, *child], check=True, stdin=subprocess.DEVNULL)
        runs = delivered(trace.read_text(), disk, sectors)
    rate = 150 * MiB / 1e6
    print(
        f"| run | model MB the disk completed | span s | MB/s | × {rate:.1f} | s ahead of the "
        "rate | most in 100 ms |"
    )
    for label, total, span, most in runs:
        mbps = total / span if span > 0 else 0.0
        ahead = total / rate - span
        times = f"{mbps / rate:.3f}×"
        print(
            f"| {label} | {total:.1f} | {span:.3f} | {mbps:.1f} | {times} | {ahead:.3f} | "
            f"{most:.1f} MB |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
