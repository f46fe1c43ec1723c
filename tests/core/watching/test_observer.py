"""The observer and the watch's metric sources on their own, on a real process reading a real
cold file, and the stopping of a process tree, without a Watch around them."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelmon.core.loading.reads import ReadLog, now_ns
from modelmon.core.system import cache
from modelmon.core.watching.files import ModelFiles
from modelmon.core.watching.observer import QUIET_CPU, Observer
from modelmon.core.watching.sources import ArrivalSource, WatchedTreeSource, WatchTarget
from modelmon.core.watching.stopping import STOP_GRACE_S, stop_tree

from ...leaks import process_state

MiB = 1 << 20
# Reads its file in 1 MiB pieces, burning a little CPU after each, then sleeping: the read
# lasts at least 0.8 s however busy the machine, so the watch's page scans see it arrive.
READER = """
import sys, time
with open(sys.argv[1], "rb") as f:
    while f.read(1 << 20):
        deadline = time.perf_counter() + 0.01
        while time.perf_counter() < deadline:
            pass
        time.sleep(0.05)
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    path.write_bytes(bytes(range(256)) * (16 * MiB // 256))
    return path


def test_the_tree_and_arrival_sources_see_a_cold_read_whole(model: Path) -> None:
    files = ModelFiles()
    files.add_named([str(model)])
    state = cache.prepare([str(model)], "cold")
    assert state.cold, state
    observer = Observer(files, ReadLog(), interval_s=0.02)
    observer.track(files.files, now_ns())
    target = WatchTarget((str(model),), observer)
    tree, arrival = WatchedTreeSource(target), ArrivalSource(target)
    reader = subprocess.Popen([sys.executable, "-c", READER, str(model)], start_new_session=True)
    observer.set_root(reader.pid, now_ns(), attached=False, command=("python", "-c", "…"))
    samples: list[tuple[dict[str, float], dict[str, float]]] = []
    previous_round: int | None = None
    arrived_from_rates = 0.0
    while True:
        done = reader.poll() is not None
        if done:
            observer.tick(now_ns(), final=True)
            tree_values = tree.sample(now_ns())
        else:
            tree_values = tree.sample(now_ns())  # the tree source ticks the observer
        arrival_values = arrival.sample(now_ns())
        samples.append((tree_values, arrival_values))
        rate = arrival_values["load_mbps"]
        if math.isfinite(rate) and previous_round is not None and observer.round_ns is not None:
            arrived_from_rates += rate * 1e6 * (observer.round_ns - previous_round) / 1e9
        previous_round = observer.round_ns
        if done:
            break
        time.sleep(0.02)
    observer.close()
    size = model.stat().st_size
    assert observer.arrivals.arrived_bytes() == size
    # Resident now: most of it (this host's proactive reclaim may already take fresh pages).
    assert 0.5 < arrival_values["resident_fraction"] <= 1.0
    # What the rates say arrived is what the page scans found, less the first round's (a
    # rate needs a round before it).
    assert 0 < arrived_from_rates <= size * 1.001
    assert any(t.get("processes", 0) >= 1 for t, _ in samples)
    busy = [
        t["workers_cpu_pct"]
        for t, _ in samples
        if math.isfinite(t.get("workers_cpu_pct", math.nan))
    ]
    assert busy and max(busy) > 0


# A parent that ignores SIGTERM and a child of it that ignores it too, each saying so.
STUBBORN = r"""
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if os.fork() == 0:
    os.write(1, b"child\n")  # one write each: the two lines never interleave
    time.sleep(3600)
os.write(1, b"parent\n")
time.sleep(3600)
"""


def _observed(argv: list[str]) -> tuple[subprocess.Popen[str], Observer]:
    process = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
    observer = Observer(ModelFiles(), ReadLog(), interval_s=0.02)
    observer.set_root(process.pid, now_ns(), attached=False, command=tuple(argv))
    return process, observer


def test_a_tree_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    process, observer = _observed([sys.executable, "-c", STUBBORN])
    assert process.stdout is not None
    assert sorted(process.stdout.readline() for _ in range(2)) == ["child\n", "parent\n"]
    observer.tick(now_ns())  # the tree has seen the child
    children = [m.pid for m in observer.tree.live() if m.pid != process.pid]  # type: ignore[union-attr]
    assert len(children) == 1
    how = stop_tree(observer, process.pid, lambda: process.poll() is not None)
    assert how == f"SIGTERM, then SIGKILL after {STOP_GRACE_S:.0f} s"
    assert process.returncode == -9
    assert process_state(children[0]) in ("Z", "gone")
    process.stdout.close()
    observer.close()


def test_a_tree_that_ends_on_sigterm_is_not_killed() -> None:
    process, observer = _observed(["sleep", "3600"])
    how = stop_tree(observer, process.pid, lambda: process.poll() is not None)
    assert how == "SIGTERM" and process.returncode == -15
    observer.close()


# Busy on CPU 0, in a session whose share of a CPU is the least (an autogroup of nice 19):
# beside a busy process of another session on that CPU it gets almost none of it.
# Says it runs before it lowers its own priority: once lowered, on a core a hog and the other
# test worker share, its next write could wait half a minute for a slice.
STARVED = """
import os, sys
os.sched_setaffinity(0, {0})
sys.stdout.write("busy\\n")
sys.stdout.flush()
with open("/proc/self/autogroup", "w") as group:
    group.write("19")
while True:
    pass
"""
HOG = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass"


def test_a_tree_starved_of_cpu_is_not_quiet() -> None:
    """A server that works but gets no CPU (a machine too busy) is not taken as done: its
    wait for a CPU counts as its CPU would."""
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    process, observer = _observed([sys.executable, "-c", STARVED])
    try:
        assert process.stdout is not None and process.stdout.readline() == "busy\n"
        deadline = time.monotonic() + 30.0
        while not Path(f"/proc/{process.pid}/autogroup").read_text().rstrip().endswith(" 19"):
            assert time.monotonic() < deadline, "it never lowered its priority"
            time.sleep(0.01)
        observer.tick(now_ns())
        begun, used = now_ns(), observer.totals.cpu_seconds
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            time.sleep(0.1)
            observer.tick(now_ns())
        got = (observer.totals.cpu_seconds - used) / ((now_ns() - begun) / 1e9)
        assert got < QUIET_CPU, f"not starved: it got {got:.2f} of a CPU"  # what is tested
        assert observer.quiet_for_ns(now_ns()) < 0.5e9
    finally:
        # The hog first: a process at nice 19 beside it on its one core waits for a slice
        # to run its own end, half a minute on a busy machine.
        for started in (hog, process):
            started.kill()
            started.wait()
        assert process.stdout is not None
        process.stdout.close()
        observer.close()
