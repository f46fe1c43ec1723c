"""Many loads back to back: no growth in descriptors, threads, children; RSS stays put.
LEAK_LOADS raises the count (the benchmark set runs 200 sessions)."""

from __future__ import annotations

import ast
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

API_LOADS = 200
SESSION_LOADS = int(os.environ.get("LEAK_LOADS", "24"))
CORE = Path(__file__).resolve().parents[2] / "core"


PROBE = """
import gc, json, os, sys, threading, psutil
import modelmon.core
from modelmon.core.options import LoadOptions
from modelmon.core.runs.session import Session
from modelmon.core.loading.strategies import FILE_STRATEGIES

def footprint():
    me = psutil.Process()
    return [len(os.listdir("/proc/self/fd")), threading.active_count(),
            len(me.children(recursive=True)), me.memory_info().rss]

def api(path, i):
    modelmon.core.load(path, NAMES[i % len(NAMES)], threads=2, workers=1 + i % 2)

def session(path, i):
    assert Session(path, NAMES[i % len(NAMES)], OPTIONS).run().result.status == "ok"

NAMES, OPTIONS = list(FILE_STRATEGIES), LoadOptions(workers=2, cache="cold")

if __name__ == "__main__":
    path, kind, warmup, loads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    step = api if kind == "api" else session
    for i in range(warmup):  # until the allocator's arenas have settled
        step(path, i)
    gc.collect()
    gc.disable()  # freed by reference counting, or it counts as held
    before = footprint()
    rss = []
    for i in range(loads):
        step(path, i)
        rss.append(psutil.Process().memory_info().rss)
    print(json.dumps({"before": before, "after": footprint(), "rss": rss}))
"""


@pytest.mark.parametrize(
    ("kind", "warmup", "loads"),
    [
        ("api", 300, API_LOADS),  # measured: RSS flat after ~300 loads of this model
        ("session", 14, SESSION_LOADS),  # every strategy twice
    ],
)
def test_back_to_back_loads_leak_nothing(
    sharded_model: Path, tmp_path: Path, kind: str, warmup: int, loads: int
) -> None:
    """In a fresh interpreter, so no other test's allocations blur the figure."""
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    # One malloc arena: otherwise how threads happen to interleave on a busy machine decides
    # how many arenas keep freed memory, which moves RSS by MiBs with nothing leaked. And a
    # fixed mmap threshold: glibc raises its own the first time a large block mapped on its
    # own is freed, after which blocks of that size stay on the heap: a one-time step of ~6 MiB
    # at whichever load first frees one, flat after it, which is no leak.
    env = {**os.environ, "MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(128 << 10)}
    done = subprocess.run(
        [sys.executable, str(probe), str(sharded_model), kind, str(warmup), str(loads)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout)
    (fds, threads, children, rss), (fds2, threads2, children2, rss2) = (
        figures["before"],
        figures["after"],
    )
    assert (fds2, threads2, children2) == (fds, threads, children)
    # A leak grows RSS with every load; the allocator's noise moves single readings up and
    # down, and a one-time step (a library page first touched, a module imported on a path
    # one load took) moves them once. So take the typical RSS of each quarter of the loads
    # (medians: one reading taken while a freed arena was not yet trimmed moves none): a leak
    # has grown it 5 % from the first quarter to the last and is still growing it in the
    # last (a leak fills the holes freed memory left first, so it shows late, not evenly).
    quarter = max(1, len(figures["rss"]) // 4)
    typical = [
        statistics.median(figures["rss"][start : start + quarter])
        for start in range(0, 4 * quarter, quarter)
    ]
    grown = typical[3] >= typical[0] * 1.05
    growing = typical[3] - typical[2] >= typical[0] * 0.05 / 6
    mib = " → ".join(f"{value / 2**20:.1f}" for value in typical)
    assert not (grown and growing), f"RSS grew over the loads: {mib} MiB by quarter"
    print(
        f"\n{loads} {kind} loads: RSS {rss / 2**20:.1f} → {rss2 / 2**20:.1f} MiB, "
        f"fds {fds}→{fds2}, threads {threads}→{threads2}, children {children}→{children2}"
    )


FORBIDDEN_CALLS = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("marshal", "loads"),
    ("yaml", "load"),
    ("torch", "load"),
    ("numpy", "load"),
    ("np", "load"),
}


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_nothing_from_a_file_is_executed_or_unpickled(path: Path) -> None:
    """No eval/exec, no unpickling loaders anywhere in the engine: model and config files are
    parsed as data (json, tomllib, struct, the gguf reader), never run."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name):
                assert function.id not in ("eval", "exec", "compile", "__import__"), path
            if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name):
                assert (function.value.id, function.attr) not in FORBIDDEN_CALLS, path
