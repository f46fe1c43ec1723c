"""Arrivals are bytes that have arrived, not reads that were asked: on a throttled disk the
page cache holds the pages of reads still queued (cachestat counts them), tens of MB ahead of
the bytes; the watch counts a page only once its read completed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core.loading.reads import now_ns
from modelmon.core.system import cache
from modelmon.core.watching.arrival import FileArrival
from modelmon.core.watching.files import ModelFile

BLKIO = Path("/sys/fs/cgroup/blkio")
LIMIT = 16 << 20  # bytes a second the disk lets the reader through
SIZE = 32 << 20
# Eight readers of 4 MiB requests, each on its own descriptor, as a parallel warm-up does:
# their readahead asks for far more than the throttle lets through.
READER = """
import os, sys, threading
path, size = sys.argv[1], os.path.getsize(sys.argv[1])
sys.stdin.read(1)
def read(first, end):
    fd = os.open(path, os.O_RDONLY)
    while first < end and (got := len(os.pread(fd, min(4 << 20, end - first), first))):
        first += got
    os.close(fd)
part = size // 8
threads = [threading.Thread(target=read, args=(i * part, (i + 1) * part)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
"""


@pytest.fixture
def throttled(loop_disk: Path) -> Iterator[tuple[Path, Path]]:
    """(a file on the loop disk, a blkio cgroup throttling reads from that disk)."""
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        pytest.skip("no blkio cgroup (v1) throttle here")
    path = loop_disk / "model.bin"
    path.write_bytes(os.urandom(SIZE))
    os.sync()
    cache.evict([path])
    device = os.stat(path).st_dev
    group = BLKIO / f"modelmon-test-{os.getpid()}-in-flight"
    group.mkdir()
    try:
        limit = f"{os.major(device)}:{os.minor(device)} {LIMIT}"
        (group / "blkio.throttle.read_bps_device").write_text(limit)
        yield path, group
    finally:
        group.rmdir()


def test_a_page_arrives_when_its_read_completes_not_when_it_is_asked(
    throttled: tuple[Path, Path],
) -> None:
    path, group = throttled
    stat = path.stat()
    tracked = FileArrival(ModelFile(0, str(path), SIZE, (stat.st_dev, stat.st_ino), True))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(path)], stdin=subprocess.PIPE, text=True
    )
    found = []
    try:
        (group / "cgroup.procs").write_text(str(reader.pid))
        tracked.baseline(now_ns())
        reader.stdin.write("go")  # type: ignore[union-attr]
        reader.stdin.close()  # type: ignore[union-attr]
        while reader.poll() is None:
            time.sleep(0.05)
            if (arrived := tracked.scan()) is not None:
                found.append(arrived)
        assert reader.wait() == 0
        if (arrived := tracked.scan(everything=True)) is not None:
            found.append(arrived)
    finally:
        reader.kill()
        reader.wait()
        tracked.close()
    assert sum(a.bytes for a in found) == SIZE
    # Each window (from the scan before to this one) held every page found in it: the whole
    # file cannot have come faster than the throttle lets it, with a slice of burst.
    span_s = (found[-1].end_ns - found[0].start_ns) / 1e9
    assert SIZE / span_s <= 1.25 * LIMIT, f"{SIZE / span_s / LIMIT:.2f}× the throttle"
