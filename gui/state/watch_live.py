"""A watched program's load, live: what arrived (its pages, found in the page cache, as the
same read log a load of modelmon's own writes), its process tree's series, and the residency
of the model's files; and its end in words. Qt-free.

``WatchView`` is the watch's ``LiveView``: the arrivals new since its cursor become the
throughput bins and the access pattern's segments (a process that alone held the file is
its "worker"; pages of a file several held are "shared"). The watch learns the model's files
as the program opens or maps them, so each file's place on the offset axis is the open
model's stacking when it is one of its files, else after them. ``WatchFeed`` pulls the
sampler's series like ``MetricFeed`` and takes a residency map of the files on each pull
(the sampler keeps none for a watch).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence

import numpy as np

from modelmon.core import Watch, WatchResult
from modelmon.core.output import human_bytes
from modelmon.core.runs import ReadBins
from modelmon.gui.state.formatting import rate_text
from modelmon.gui.state.live import (
    BIN_S,
    MAX_READS_PER_TICK,
    MB,
    SETTLE_S,
    AccessPoints,
    CursorView,
    LiveUpdate,
    display_bin_s,
)
from modelmon.gui.state.metrics_live import MAX_POLL_S, POLL_S, PULL_SHARE, MetricSnapshot, latest
from modelmon.gui.state.records import RunRecord, watch_failure, watch_status
from modelmon.gui.state.residency_grid import Maps
from modelmon.gui.state.results_rows import findings_words


def stacking(model_files: Sequence[tuple[str, int]]) -> tuple[dict[str, float], float]:
    """{realpath: base MB} of the open model's files stacked in order, and their end."""
    bases, base = {}, 0.0
    for path, size in model_files:
        bases[os.path.realpath(path)] = base
        base += size / MB
    return bases, base


def by_model_paths(maps: Maps, model_paths: Sequence[str]) -> Maps:
    """Residency maps keyed by the model's own paths: the watch names files by their real
    path (a model's file may be a link, as in a Hugging Face cache)."""
    shown = {os.path.realpath(p): p for p in model_paths}
    return tuple(
        (t, {shown.get(path, path): grid for path, grid in files.items()}) for t, files in maps
    )


class WatchView(CursorView):
    """What the watch has seen arrive so far, for the state's frame tick (its only user)."""

    def __init__(
        self,
        watch: Watch,
        model_files: Sequence[tuple[str, int]] = (),
        max_reads: int = MAX_READS_PER_TICK,
    ) -> None:
        super().__init__(max_reads)
        self.watch = watch
        self._bases, self._end_mb = stacking(model_files)
        self._model_bytes = sum(size for _, size in model_files)
        self._file_base: list[float] = []  # by the watch's file index
        self.bins = ReadBins(BIN_S)
        self.none = ReadBins(BIN_S)  # a watch reads no warm-up prefetch: always empty
        self.last_end_s = 0.0
        self.workers_qt_free = True  # a watched program is not modelmon's worker
        self._done = False

    def _base_of(self, index: int) -> float:
        files = self.watch.files.files
        while len(self._file_base) <= index and len(self._file_base) < len(files):
            model_file = files[len(self._file_base)]
            base = self._bases.get(model_file.path)
            if base is None:  # not the open model's: stacked after it
                base, self._end_mb = self._end_mb, self._end_mb + model_file.size / MB
            self._file_base.append(base)
        return self._file_base[index] if index < len(self._file_base) else self._end_mb

    def update(self, now_ns: int, final: bool = False) -> LiveUpdate:
        if self._done:
            raise RuntimeError("the watch has ended: its final update was taken")
        watch = self.watch
        t0_ns = watch.t0_ns
        new_reads = self._take_new_reads(watch, t0_ns, final)
        self._done = final
        elapsed_s = (now_ns - t0_ns) / 1e9 if t0_ns else 0.0
        span_s = self.last_end_s if final else max(0.0, elapsed_s - SETTLE_S)
        width_s = display_bin_s(span_s)
        until_s = -(-span_s // width_s) * width_s if final else span_s
        total = max(self._model_bytes, watch.files.total_bytes)
        if final:
            phase = "done"
        elif t0_ns:
            phase = "loading"
        else:
            phase = "preparing cache"
        return LiveUpdate(
            phase=phase,
            workers_ready=watch.observer.live,
            workers=watch.observer.live,
            bytes_done=watch.reads.bytes,
            bytes_total=total,
            elapsed_s=self.last_end_s if final else max(0.0, elapsed_s),
            bin_s=width_s,
            load_mbps=self.bins.mbps(until_s, width_s, self.last_end_s if final else None),
            prefetch_mbps=self.none.mbps(until_s, width_s),
            new_reads=new_reads,
        )

    def _absorb(self, reads: dict[str, np.ndarray], t0_ns: int) -> AccessPoints:
        lengths = reads["length"]
        if not len(lengths):
            return AccessPoints.empty()
        t_start = (reads["start"] - t0_ns) / 1e9
        t_end = (reads["end"] - t0_ns) / 1e9
        self.bins.add(t_start, t_end, lengths)
        self.last_end_s = max(self.last_end_s, float(t_end.max()))
        bases = np.array([self._base_of(int(i)) for i in range(int(reads["file"].max()) + 1)])
        y_start = bases[reads["file"]] + reads["offset"] / MB
        return AccessPoints(
            reads["worker"],
            t_start,
            t_end,
            y_start,
            y_start + lengths / MB,
            np.zeros(len(lengths), dtype=bool),
            reads["file"],
            reads["reader"],
            reads["descriptor"],
        )


class WatchFeed:
    """Snapshots of the watch's series and residency maps (both kept by its sampler, as a
    load's are), for the state's frame tick."""

    def __init__(
        self, label: str, watch: Watch, model_paths: Sequence[str] = (), poll_s: float = POLL_S
    ) -> None:
        self.label, self.watch, self.poll_s = label, watch, poll_s
        self.model_paths = tuple(model_paths)
        self._last_pull = -math.inf
        self._samples = -1

    def poll(self, now_s: float | None = None) -> MetricSnapshot | None:
        sampler, t0_ns = self.watch.sampler, self.watch.t0_ns
        now = time.perf_counter() if now_s is None else now_s
        if sampler is None or not t0_ns or now - self._last_pull < self.poll_s:
            return None
        samples = sampler.samples_taken
        if samples == self._samples:
            return None
        started = time.perf_counter()
        self._last_pull, self._samples = now, samples
        series = {name: ((t - t0_ns) / 1e9, v) for name, (t, v) in sampler.series().items()}
        maps = [((t - t0_ns) / 1e9, files) for t, files in sampler.residency_maps()]
        snapshot = MetricSnapshot(
            self.label,
            series,
            dict(sampler.specs),
            sampler.unavailable,
            by_model_paths(tuple(maps), self.model_paths),
            resident_fraction=latest(series, "resident_fraction"),
        )
        self.poll_s = min(
            MAX_POLL_S, max(self.poll_s, (time.perf_counter() - started) / PULL_SHARE)
        )
        return snapshot

    def final_snapshot(self, result: WatchResult) -> MetricSnapshot | None:
        """The whole series, and the residency as the final scan left it."""
        return watch_snapshot(self.label, result, self.model_paths)


def watch_snapshot(
    label: str, result: WatchResult, model_paths: Sequence[str]
) -> MetricSnapshot | None:
    """A finished watch's whole series, and the residency as its final scan left it
    (its maps named by the model's own paths); None when it never sampled."""
    samples = result.samples
    if samples is None:
        return None
    series = dict(samples.series)
    return MetricSnapshot(
        label,
        series,
        dict(samples.specs),
        dict(samples.unavailable),
        by_model_paths(samples.residency_maps, model_paths),
        True,
        latest(series, "resident_fraction"),
        samples.interval_s,
        result.wall_seconds,  # the series span the whole watch, not first to last byte
        result.wall_seconds,
        ending=watch_status(result),
    )


def watch_words(record: RunRecord) -> tuple[str, str, str]:
    """(progress strip, message, level) at a watched run's end."""
    result = record.watched
    if result is None:
        return "Watch: could not run", f"The watch could not run: {record.error}", "error"
    arrived = human_bytes(result.bytes_read)
    rate = f" at {rate_text(result.mbps)}" if result.mbps is not None else ""
    head = f"Watch: {arrived} arrived{rate}"
    findings = findings_words(result)
    said = f"{record.spec}: {arrived} of the model arrived{rate}"
    said += f"; found: {findings}" if findings else "; nothing to fix was found"
    if record.status == "cancelled":
        return head + " (cancelled)", f"Watch cancelled; {record.spec} was stopped.", "info"
    if record.status == "failed":
        why = watch_failure(result) or "it failed"
        last = f"; its last error line: {record.stderr_line}" if record.stderr_line else ""
        return head + " (failed)", f"{record.spec}: {why}{last}", "warning"
    failure = record.message
    if failure is not None:
        return head, f"{said} ({failure})", "warning"
    return head, said + "; the results table has the details", "info"
