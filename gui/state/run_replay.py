"""A finished run drawn again on the live plots, as its end left them. Qt-free.

The live plots are drawn as a run goes (its start, its frames, its series, its end); runs
kept with their model while another was open come back without any of that. ``replay``
makes, from what the run kept (``run_trace``: its reads and series, placed on the model's
offset axis), what the plots were given at its end: the run as they name it, its final
throughput bins, its reads as access-pattern segments and its whole series.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelmon.core import Model
from modelmon.gui.state.live import MB, AccessPoints, LiveUpdate, run_rates
from modelmon.gui.state.live_run import Shown
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.records import WATCH_LABEL, RunRecord
from modelmon.gui.state.run_trace import RunTrace, run_trace
from modelmon.gui.state.watch_live import watch_snapshot


@dataclass(frozen=True, slots=True)
class Replay:
    """What the plots draw of one finished run: its start, its last frame, its series."""

    record: RunRecord
    shown: Shown
    update: LiveUpdate
    reads: AccessPoints
    snapshot: MetricSnapshot


def shown_name(record: RunRecord) -> str:
    """The run as the access pattern's title names it: "run B · pair 2", "watch"."""
    if record.label == WATCH_LABEL:
        return "watch"
    pair = f" · pair {record.pair + 1}" if record.pair is not None else ""
    return f"run {record.label}{pair}"


def access_points(trace: RunTrace) -> AccessPoints:
    """The run's reads as segments on the offset axis (seconds after its start, MB)."""
    reads = trace.reads
    count = len(reads["start"])
    file = reads["file"].astype(np.int32)
    y_start = trace.file_base_mb[file] + reads["offset"] / MB if count else np.empty(0)
    worker = reads["worker"].astype(np.int32)
    # A log kept without reader threads or descriptors (a program's): each worker one
    # reader, and its descriptors unknown (-1), as the live view has them when a load does
    # not say.
    reader = reads.get("reader", worker.astype(np.int64))
    descriptor = reads.get("descriptor", np.full(count, -1, dtype=np.int64))
    return AccessPoints(
        worker,
        reads["start"].astype(np.float64),
        reads["end"].astype(np.float64),
        y_start,
        y_start + reads["length"] / MB,
        reads["prefetch"].astype(bool),
        file,
        reader,
        descriptor,
    )


def replay(record: RunRecord, model: Model | None) -> Replay | None:
    """``record`` as the plots had it at its end; None when it left nothing to draw."""
    trace = run_trace(record, model)
    if trace is None:
        return None
    shown = Shown(record.label, shown_name(record), record.spec, trace.reader == "process")
    bin_s, load_mbps, prefetch_mbps = run_rates(trace.reads)
    reads = access_points(trace)
    end_s = float(reads.t_end.max()) if len(reads) else 0.0
    done = int(reads_bytes(trace))
    update = LiveUpdate(
        phase="done",
        workers_ready=0,
        workers=0,
        bytes_done=done,
        bytes_total=model.total_bytes if model is not None else done,
        elapsed_s=end_s,
        bin_s=bin_s,
        load_mbps=load_mbps,
        prefetch_mbps=prefetch_mbps,
        new_reads=reads,
    )
    sampled, watched = record.sampled, record.watched
    snapshot: MetricSnapshot | None = None
    if sampled is not None:
        snapshot = MetricSnapshot.of_result(record.label, sampled)
    elif watched is not None:
        paths = [f.path for f in model.files] if model is not None else []
        snapshot = watch_snapshot(record.label, watched, paths)
    if snapshot is None:
        return None
    return Replay(record, shown, update, reads, snapshot)


def reads_bytes(trace: RunTrace) -> float:
    """The bytes the run's own reads (warm-up prefetch aside) brought."""
    reads = trace.reads
    return float(reads["length"][~reads["prefetch"].astype(bool)].sum())


__all__ = ["Replay", "replay"]
