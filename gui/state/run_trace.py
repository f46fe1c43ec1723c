"""What a finished run left to draw, whoever loaded the model. Qt-free.

modelmon's own load leaves its reads and its workers' series (``SessionResult``); a watched
program leaves the pages that arrived, as the same read log, and its process tree's series
(``WatchSamples``: of a watch, or of a program run as configuration A or B). The live plots
draw both alike; so does an exported figure, from the ``RunTrace`` of each run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from modelmon.core import Model
from modelmon.gui.state.live import MB
from modelmon.gui.state.records import RunRecord
from modelmon.gui.state.residency_grid import Maps
from modelmon.gui.state.watch_live import by_model_paths, stacking


@dataclass(frozen=True)
class RunTrace:
    series: dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (seconds after t0, values)
    unavailable: dict[str, str]  # metric source -> why it had nothing here
    # start/end (s), file, offset, length, worker (-1: pages several processes held), prefetch
    reads: dict[str, np.ndarray]
    file_base_mb: np.ndarray  # where each of the reads' ``file`` starts on the offset axis
    residency_maps: Maps  # by the model's own paths
    reader: str  # what one colour of the access pattern is: "worker" | "process"


def has_trace(record: RunRecord) -> bool:
    """The run left something to draw (a run that could not start, or a watch that never
    sampled, did not)."""
    watched = record.watched
    return record.sampled is not None or (watched is not None and watched.samples is not None)


def run_trace(record: RunRecord, model: Model | None) -> RunTrace | None:
    """``record``'s trace, its files placed on ``model``'s offset axis (stacked in order; a
    file a program read that is not the model's, after them)."""
    files = [(f.path, f.size) for f in model.files] if model is not None else []
    sampled = record.sampled
    if sampled is not None:
        reads = sampled.reads
        sizes = np.array([size for _, size in files], dtype=np.float64)
        bases = np.concatenate([[0.0], np.cumsum(sizes)[:-1]]) / MB if files else np.zeros(1)
        used = int(reads["file"].max()) + 1 if len(reads["file"]) else 0
        if len(bases) < used:  # reads of files the model does not list: at its start
            bases = np.concatenate([bases, np.zeros(used - len(bases))])
        return RunTrace(
            sampled.series,
            sampled.unavailable,
            reads,
            bases,
            sampled.residency_maps,
            "worker",
        )
    watched = record.watched
    if watched is None or watched.samples is None:
        return None
    samples = watched.samples
    placed, end = stacking(files)
    arrivals = samples.arrivals
    used = int(arrivals["file"].max()) + 1 if len(arrivals["file"]) else 0
    bases = np.zeros(max([used, *(f.index + 1 for f in watched.files)]))
    for report in sorted(watched.files, key=lambda f: f.index):
        base = placed.get(os.path.realpath(report.path))
        if base is None:
            base, end = end, end + report.size / MB
        bases[report.index] = base
    reads = {**arrivals, "prefetch": np.zeros(len(arrivals["length"]), dtype=bool)}
    maps = by_model_paths(samples.residency_maps, [path for path, _ in files])
    return RunTrace(samples.series, samples.unavailable, reads, bases, maps, "process")
