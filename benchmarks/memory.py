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
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.codec import from_json, to_json
from benchmarks.records import DiscardLoad, DiscardSection, MemoryReport, RamLoad
from modelmon.core import Model, open_model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import Session
from modelmon.core.system import own_status_bytes

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
DISCARD_TARGET = 256 * MiB
LOAD_TO_RAM = (
    ("sequential", LoadOptions(workers=4, chunk=16 * MiB)),
    ("pread", LoadOptions(workers=4)),
    ("mmap", LoadOptions(workers=4)),
    ("library", LoadOptions(workers=1)),
)


def _sampled_peak(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> float | None:
    """Largest sampled sum of the workers' RSS (10 Hz; may miss the very last bytes)."""
    if "workers_rss" not in series:
        return None
    values = series["workers_rss"][1]
    values = values[~np.isnan(values)]
    return float(values.max()) if len(values) else None


def _load(model: Model, strategy: str, options: LoadOptions) -> RamLoad:
    outcome = Session(model, strategy, options, interval_s=0.1).run()
    result = outcome.result
    peaks = tuple(w.peak_rss for w in result.workers)
    return RamLoad(
        strategy,
        options.workers,
        result.status,
        result.mbps,
        result.cache.cold,
        result.bytes,
        peaks,
        sum(peaks),
        _sampled_peak(outcome.series),
        sum(peaks) / result.bytes if result.bytes else None,
    )


def measure(path: Path, repeats: int) -> MemoryReport:
    model = open_model(path)
    parent = own_status_bytes("VmHWM:") or 0
    load_to_ram = [
        _load(model, strategy, options.with_(cache="cold")) for strategy, options in LOAD_TO_RAM
    ]
    # A real memory cgroup of this size (--memory-limit): four workers' interpreters alone take
    # about 200 MiB of it, so a limit below DISCARD_TARGET would only measure the OOM killer.
    limit = max(DISCARD_TARGET, model.total_bytes // 4)
    discard = []
    for workers in (4, 1):
        for _ in range(repeats):
            options = LoadOptions(workers=workers, chunk=16 * MiB, cache="cold", discard=True)
            outcome = Session(
                model, "sequential", options, interval_s=0.1, memory_limit=limit
            ).run()
            result = outcome.result
            discard.append(
                DiscardLoad(
                    workers,
                    result.status,
                    result.mbps,
                    result.cache.cold,
                    result.bytes,
                    tuple(w.peak_rss for w in result.workers),
                    _sampled_peak(outcome.series),
                )
            )
    worst = max((max(r.worker_peak_rss, default=0) for r in discard), default=0)
    met = bool(discard) and worst <= DISCARD_TARGET and all(r.status == "ok" for r in discard)
    return MemoryReport(
        model.total_bytes,
        parent,
        tuple(load_to_ram),
        DiscardSection(limit, tuple(discard), worst, met),
    )


def measure_in_fresh_process(path: Path, out: Path, repeats: int) -> MemoryReport:
    """``measure`` in a new interpreter (see the module docstring)."""
    subprocess.run(
        [sys.executable, "-m", "benchmarks.memory", str(path), str(out), "--repeats", str(repeats)],
        cwd=ROOT,
        check=True,
        timeout=900,
    )
    return from_json(MemoryReport, json.loads(out.read_text()))


def main(argv: list[str]) -> int:
    path, out = Path(argv[0]), Path(argv[1])
    repeats = int(argv[3]) if len(argv) > 3 and argv[2] == "--repeats" else 3
    out.write_text(json.dumps(to_json(measure(path, repeats))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
