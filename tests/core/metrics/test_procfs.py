"""Kept-open /proc files: re-read fresh each time, parsed like psutil, gone once reaped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from modelmon.core.metrics import procfs
from modelmon.core.metrics.workers import Gap, WorkerProbe

from .fakes import target

pytestmark = pytest.mark.skipif(not procfs.have_procfs(), reason="Linux /proc only")

# Reads a file through read() (rchar), burns some CPU, says so, then waits for stdin to close.
CHILD = """
import sys
open(sys.argv[1], "rb").read()
total = sum(range(3_000_000))
print("busy", flush=True)
sys.stdin.read()
"""


def test_a_kept_open_file_gives_its_new_content_after_it_changed(tmp_path: Path):
    path = tmp_path / "counters"
    path.write_bytes(b"first\n")
    kept = procfs.ProcFile(str(path), size=64)
    try:
        assert kept.read() == b"first\n"
        long = b"x" * 1000  # longer than the buffer: read again with room, never cut short
        with open(path, "r+b") as same_file:  # the same inode, rewritten in place
            same_file.write(long)
        assert kept.read() == long
        path.write_bytes(b"third\n")  # truncated and rewritten, still the same inode
        assert kept.read() == b"third\n"
    finally:
        kept.close()
    with pytest.raises(ValueError, match="closed"):
        kept.read()
    kept.close()  # twice is fine


def test_a_never_read_file_is_never_opened(tmp_path: Path):
    procfs.ProcFile(str(tmp_path / "does-not-exist")).close()  # the leak check sees no fd


@pytest.fixture
def child(tmp_path: Path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"\1" * (1 << 20))
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdout is not None and process.stdout.readline() == b"busy\n"
    try:
        yield process
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


def test_a_child_process_files_read_as_psutil_reads_them(child: subprocess.Popen):
    files = {name: procfs.ProcFile(f"/proc/{child.pid}/{name}") for name in ("stat", "statm", "io")}
    try:
        process = psutil.Process(child.pid)
        times = process.cpu_times()
        busy = procfs.pid_busy_seconds(files["stat"].read())
        assert busy > 0
        assert busy == pytest.approx(times.user + times.system, abs=2 / procfs.CLOCK_TICKS)
        memory, info = procfs.pid_memory(files["statm"].read()), process.memory_info()
        assert (memory.rss, memory.mapped) == (info.rss, info.shared)  # the child is idle
        io = procfs.pid_io(files["io"].read())
        counters = process.io_counters()
        assert io.read_chars == counters.read_chars >= 1 << 20
        assert io.read_bytes == counters.read_bytes
    finally:
        for file in files.values():
            file.close()


def test_a_reaped_worker_is_exited_and_its_file_closed(child: subprocess.Popen):
    probe = WorkerProbe(
        target(1, {0: child.pid}),
        "worker CPU times",
        lambda process: pytest.fail("psutil is not asked where /proc is"),
        ("stat", procfs.pid_busy_seconds),
    )
    try:
        first = probe.read()[0]
        assert isinstance(first, float) and first > 0
        child.kill()
        child.wait()  # reaped: the kept-open file now fails with ESRCH
        assert probe.read() == {0: Gap.EXITED}
        assert probe.read() == {0: Gap.EXITED}  # not asked again
        assert probe.failing(at_least=1) is None  # exiting is no failure
    finally:
        probe.close()


def test_the_cpu_line_leaves_guest_time_out_of_the_total():
    stat = b"cpu  100 20 30 400 50 6 7 8 90 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1 2 3\n"
    line = procfs.system_cpu_line(stat)
    ticks = procfs.CLOCK_TICKS
    assert line == (621 / ticks, 400 / ticks, 50 / ticks)
    with pytest.raises(ValueError):
        procfs.system_cpu_line(b"intr 1 2 3\n")
