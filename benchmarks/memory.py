"""Peak memory of loads: load-to-RAM peak RSS against bytes loaded, and discard mode on a model
larger than the memory it may use. Runs in a fresh, small process:

    python -m benchmarks.memory MODEL OUT.json [--repeats N]

A worker's ``peak_rss`` is its own VmHWM (/proc/self/status), not ``ru_maxrss``: Linux
carries ``ru_maxrss`` across fork and exec, so a worker spawned by a process that once held
more memory (the benchmark itself, after a 512 MiB memcpy ceiling) would report that. The
loads still run in a fresh process, so that the parent's own peak (reported too) is that of
the loads alone; the Session's sampled ``worker_rss.N`` series (10 Hz, /proc) is reported
beside the workers' peaks as a cross-check.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from modelmon.core import LoadOptions, Session, open_model, own_status_bytes

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
DISCARD_TARGET = 256 * MiB
LOAD_TO_RAM = (
    ("sequential", {"workers": 4, "chunk": 16 * MiB}),
    ("pread", {"workers": 4}),
    ("mmap", {"workers": 4}),
    ("library", {"workers": 1}),
)


def _sampled_peak(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> float | None:
    """Largest sampled sum of the workers' RSS (10 Hz; may miss the very last bytes)."""
    if "workers_rss" not in series:
        return None
    values = series["workers_rss"][1]
    values = values[~np.isnan(values)]
    return float(values.max()) if len(values) else None


def _load(model: Any, strategy: str, options: LoadOptions) -> dict[str, Any]:
    outcome = Session(model, strategy, options, interval_s=0.1).run()
    result = outcome.result
    peaks = [w.peak_rss for w in result.workers]
    return {
        "strategy": strategy,
        "workers": options.workers,
        "status": result.status,
        "mbps": result.mbps,
        "cold": result.cache.cold,
        "bytes": result.bytes,
        "worker_peak_rss": peaks,
        "peak_rss": sum(peaks),
        "sampled_peak_rss": _sampled_peak(outcome.series),
    }


def measure(path: Path, repeats: int) -> dict[str, Any]:
    model = open_model(path)
    parent = own_status_bytes("VmHWM:") or 0
    load_to_ram = []
    for strategy, options in LOAD_TO_RAM:
        run = _load(model, strategy, LoadOptions(**options, cache="cold"))
        run["ratio"] = run["peak_rss"] / run["bytes"] if run["bytes"] else math.nan
        load_to_ram.append(run)
    limit = max(64 * MiB, model.total_bytes // 4)
    discard = []
    for workers in (4, 1):
        for _ in range(repeats):
            options = LoadOptions(workers=workers, chunk=16 * MiB, cache="cold", discard=True)
            outcome = Session(
                model, "sequential", options, interval_s=0.1, memory_limit=limit
            ).run()
            result = outcome.result
            discard.append(
                {
                    "workers": workers,
                    "status": result.status,
                    "mbps": result.mbps,
                    "cold": result.cache.cold,
                    "bytes": result.bytes,
                    "worker_peak_rss": [w.peak_rss for w in result.workers],
                    "sampled_peak_rss": _sampled_peak(outcome.series),
                }
            )
    worst = max((max(r["worker_peak_rss"], default=0) for r in discard), default=0)
    return {
        "model_bytes": model.total_bytes,
        "parent_peak_rss": parent,
        "load_to_ram": load_to_ram,
        "discard": {
            "memory_limit": limit,
            "runs": discard,
            "max_worker_peak_rss": worst,
            "target_met": bool(discard)
            and worst <= DISCARD_TARGET
            and all(r["status"] == "ok" for r in discard),
        },
    }


def run_fresh(path: Path, out: Path, repeats: int) -> dict[str, Any]:
    """``measure`` in a new interpreter (see the module docstring); its JSON."""
    subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", str(path), str(out), "--repeats", str(repeats)],
        cwd=ROOT,
        check=True,
        timeout=900,
    )
    return dict(json.loads(out.read_text()))


def main(argv: list[str]) -> int:
    path, out = Path(argv[0]), Path(argv[1])
    repeats = int(argv[3]) if len(argv) > 3 and argv[2] == "--repeats" else 3
    out.write_text(json.dumps(measure(path, repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
