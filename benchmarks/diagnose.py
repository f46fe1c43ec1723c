"""Where the time went in the best run of a job: measured, so a missed target is explained.

Two monitored loads (``Session``) of the job's best modelmon configuration: as measured
(keeping every tensor) and the same in discard mode (bounded buffers, no destination arrays
to fault in). Reported: MB/s of each, per-worker seconds, and the medians over the load of
the device's read MB/s and IOPS, machine CPU busy / IO-wait and the workers' CPU.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from benchmarks.records import Diagnosis, MonitoredRun, SeriesMedians
from modelmon.core import Model
from modelmon.core.options import LoadOptions
from modelmon.core.runs import Session


def _median_during(
    series: dict[str, tuple[np.ndarray, np.ndarray]], name: str, seconds: float
) -> float | None:
    if name not in series:
        return None
    times, values = series[name]
    inside = values[(times > 0) & (times <= seconds) & ~np.isnan(values)]
    return float(np.median(inside)) if len(inside) else None


def _one(model: Model, strategy: str, options: LoadOptions) -> MonitoredRun:
    outcome = Session(model, strategy, options, interval_s=0.1).run()
    result = outcome.result
    medians = {
        f.name: _median_during(outcome.series, f.name, result.seconds)
        for f in dataclasses.fields(SeriesMedians)
    }
    return MonitoredRun(
        result.status,
        result.mbps,
        result.seconds,
        result.cache.cold,
        result.cache.warm,
        tuple(round(w.seconds, 3) for w in result.workers),
        tuple(w.peak_rss for w in result.workers),
        SeriesMedians(**medians),
        dict(outcome.unavailable),
    )


def diagnose(model: Model, strategy: str, options: LoadOptions, cache: str) -> Diagnosis:
    """Monitored runs of one configuration, kept and discarded, from ``cache``."""
    base = options.with_(cache=cache)
    kept = _one(model, strategy, base)
    discarded = _one(model, strategy, base.with_(discard=True))
    spread = kept.worker_seconds
    return Diagnosis(
        strategy,
        options,
        cache,
        kept,
        discarded,
        (max(spread) / min(spread)) if spread and min(spread) > 0 else None,
    )


def summary_line(found: Diagnosis) -> str:
    """One sentence of numbers for the report."""
    kept, discarded = found.kept, found.discard
    med = kept.medians

    def fmt(value: float | None, unit: str) -> str:
        return "n/a" if value is None or math.isnan(value) else f"{value:.0f} {unit}"

    workers = kept.worker_seconds
    worker_text = (
        f"workers {min(workers):.2f}–{max(workers):.2f} s" if workers else "no worker timings"
    )
    return (
        f"kept {kept.mbps:.0f} MB/s vs discard {discarded.mbps:.0f} MB/s; "
        f"{worker_text}; device {fmt(med.device_read_mbps, 'MB/s')}, "
        f"{fmt(med.device_read_iops, 'IOPS')}; CPU busy {fmt(med.cpu_pct, '%')}, "
        f"IO wait {fmt(med.iowait_pct, '%')}, workers' CPU "
        f"{fmt(med.workers_cpu_pct, '% of a core')} (medians over the load)"
    )
