"""Where the time went in the best run of a job: measured, so a missed target is explained.

Two monitored loads (``Session``) of the job's best modelmon configuration: as measured
(keeping every tensor) and the same in discard mode (bounded buffers, no destination arrays
to fault in). Reported: MB/s of each, per-worker seconds, and the medians over the load of
the device's read MB/s and IOPS, machine CPU busy / IO-wait and the workers' CPU.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from modelmon.core import LoadOptions, Model, Session

SERIES = (
    "device_read_mbps",
    "device_read_iops",
    "cpu_pct",
    "iowait_pct",
    "workers_cpu_pct",
    "load_mbps",
)


def _median_during(
    series: dict[str, tuple[np.ndarray, np.ndarray]], name: str, seconds: float
) -> float | None:
    if name not in series:
        return None
    times, values = series[name]
    inside = values[(times > 0) & (times <= seconds) & ~np.isnan(values)]
    return float(np.median(inside)) if len(inside) else None


def _one(model: Model, strategy: str, options: LoadOptions) -> dict[str, Any]:
    outcome = Session(model, strategy, options, interval_s=0.1).run()
    result = outcome.result
    workers = result.workers
    return {
        "status": result.status,
        "mbps": result.mbps,
        "seconds": result.seconds,
        "cold": result.cache.cold,
        "warm": result.cache.warm,
        "worker_seconds": [round(w.seconds, 3) for w in workers],
        "worker_peak_rss": [w.peak_rss for w in workers],
        "medians": {name: _median_during(outcome.series, name, result.seconds) for name in SERIES},
        "unavailable": dict(outcome.unavailable),
    }


def diagnose(model: Model, strategy: str, options: dict[str, Any], cache: str) -> dict[str, Any]:
    """Monitored runs of one configuration, kept and discarded, from ``cache``."""
    base = LoadOptions(**options).with_(cache=cache)
    kept = _one(model, strategy, base)
    discarded = _one(model, strategy, base.with_(discard=True))
    spread = kept["worker_seconds"]
    return {
        "strategy": strategy,
        "options": options,
        "cache": cache,
        "kept": kept,
        "discard": discarded,
        "worker_spread": (max(spread) / min(spread)) if spread and min(spread) > 0 else None,
    }


def summary_line(found: dict[str, Any]) -> str:
    """One sentence of numbers for the report."""
    kept, discarded = found["kept"], found["discard"]
    med = kept["medians"]

    def fmt(value: float | None, unit: str) -> str:
        return "n/a" if value is None or math.isnan(value) else f"{value:.0f} {unit}"

    workers = kept["worker_seconds"]
    worker_text = (
        f"workers {min(workers):.2f}–{max(workers):.2f} s" if workers else "no worker timings"
    )
    return (
        f"kept {kept['mbps']:.0f} MB/s vs discard {discarded['mbps']:.0f} MB/s; "
        f"{worker_text}; device {fmt(med['device_read_mbps'], 'MB/s')}, "
        f"{fmt(med['device_read_iops'], 'IOPS')}; CPU busy {fmt(med['cpu_pct'], '%')}, "
        f"IO wait {fmt(med['iowait_pct'], '%')}, workers' CPU "
        f"{fmt(med['workers_cpu_pct'], '% of a core')} (medians over the load)"
    )
