"""The live view of one load: what its progress strip and plots show, read from the load's
own ``ReadLog`` by cursor on the window's frame tick.

Qt-free and numpy-only. Once per tick ``LiveView.update`` takes the reads that are new since
its cursor (at most MAX_READS_PER_TICK of them: bounded work, the rest comes next tick),
bins them for the throughput curve and places them for the access pattern; the totals come
from the load as they are (bytes from the log's own count, ready workers). Nothing is
pushed to it: the job thread appends to the log and never waits for the GUI.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from modelmon.core.output import priming_plan_text
from modelmon.core.runs import ReadBins

if TYPE_CHECKING:
    from modelmon.core import Watch
    from modelmon.core.runs import LoadRun

BIN_S = 0.01  # the finest throughput bin; shown coarser as the load goes on (display_bin_s)
# Shown bin widths: the finest that keeps a curve to about MAX_SHOWN_BINS points, so a 0.3 s
# load still shows its shape and a long one is smooth (100 ms bins from 10 s on).
SHOWN_BIN_WIDTHS = (0.01, 0.02, 0.05, 0.1)
MAX_SHOWN_BINS = 100
# The newest bins are still filling: workers flush their read batches every 50 ms and the
# runner forwards them, so a bin is shown only once this much time has passed after it.
SETTLE_S = 0.15
MB = 1e6  # decimal, like MB/s and the engine's human_bytes
# Reads taken from the log per tick: ~10 ms of conversion and binning on a busy 2-vCPU VM,
# and 800 000 reads a second at the 40 ms tick. A load reading faster (4 KiB reads from the
# page cache) is shown a little behind, and caught up by the final update when it ends.
MAX_READS_PER_TICK = 32_768
RATE_WINDOW_S = 1.0  # the progress strip's MB/s and ETA: the last second's, steady yet quick


@dataclass(frozen=True, slots=True)
class AccessPoints:
    """Reads as segments in the access-pattern plot: from (t_start, y_start) to (t_end, y_end).

    Time in seconds after the load started; y in MB, with the model's files stacked in order.
    """

    worker: np.ndarray  # int32
    t_start: np.ndarray  # float64
    t_end: np.ndarray
    y_start: np.ndarray
    y_end: np.ndarray
    prefetch: np.ndarray  # bool: reads of a warm-up pass
    file: np.ndarray  # int32: index into the model's files
    reader: np.ndarray  # int64: load-wide reader id (loading.reads.READER_BITS)
    descriptor: np.ndarray  # int64: open file description id, -1 when not known

    def __len__(self) -> int:
        return len(self.worker)

    @staticmethod
    def empty() -> AccessPoints:
        floats, ids = np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64)
        return AccessPoints(
            np.empty(0, dtype=np.int32),
            floats,
            floats,
            floats,
            floats,
            np.empty(0, dtype=bool),
            np.empty(0, dtype=np.int32),
            ids,
            ids,
        )

    @staticmethod
    def concat(parts: list[AccessPoints]) -> AccessPoints:
        """The reads of several ticks as one batch (for a plot that redraws less often)."""
        parts = [p for p in parts if len(p)]
        if len(parts) <= 1:
            return parts[0] if parts else AccessPoints.empty()
        return AccessPoints(
            *(np.concatenate([getattr(p, name) for p in parts]) for name in AccessPoints.__slots__)
        )


@dataclass(frozen=True, slots=True)
class LiveUpdate:
    """What one tick shows: totals so far, and the reads that are new since the last tick."""

    phase: str  # "starting workers" | "preparing cache" | "loading" | "done"
    workers_ready: int
    workers: int
    bytes_done: int  # bytes of the load itself (warm-up prefetch reads excluded)
    bytes_total: int
    elapsed_s: float  # since the load started (0 while preparing)
    bin_s: float  # width of the bins below (finer for short loads)
    load_mbps: np.ndarray  # MB/s per settled bin since the load started
    prefetch_mbps: np.ndarray  # MB/s of warm-up prefetch reads, same bins (often all zero)
    new_reads: AccessPoints
    # While the cache is prepared: what priming touches and why ("priming 2.5 GB of free
    # memory (the load's arrays)"); "" when nothing is primed.
    priming: str = ""

    @property
    def fraction(self) -> float:
        return min(1.0, self.bytes_done / self.bytes_total) if self.bytes_total else 0.0

    @property
    def recent_mbps(self) -> float:
        """MB/s over the last RATE_WINDOW_S (the whole load's average once it is done)."""
        average = self.bytes_done / self.elapsed_s / MB if self.elapsed_s > 0 else 0.0
        if self.phase == "done":
            return average
        bins = self.load_mbps[-max(1, int(RATE_WINDOW_S / self.bin_s)) :]
        if len(bins):
            return float(bins.mean())
        return average if self.elapsed_s > 0.05 else 0.0

    @property
    def eta_s(self) -> float:
        """Seconds left at the recent rate; infinite while nothing is moving."""
        rate = self.recent_mbps
        return (self.bytes_total - self.bytes_done) / (rate * MB) if rate > 0 else math.inf


def display_bin_s(span_s: float) -> float:
    """The bin width to show a load of ``span_s`` seconds with."""
    for width in SHOWN_BIN_WIDTHS:
        if span_s / width <= MAX_SHOWN_BINS:
            return width
    return SHOWN_BIN_WIDTHS[-1]


class CursorView(ABC):
    """A view that takes, on each frame tick, the reads of a load's (or a watch's) log new
    since its cursor and absorbs them into what it shows."""

    def __init__(self, max_reads: int) -> None:
        self.max_reads = max_reads
        self.cursor = 0  # reads of the log taken so far

    def _take_new_reads(self, source: LoadRun | Watch, t0_ns: int, final: bool) -> AccessPoints:
        """The reads new since the cursor, absorbed: at most ``max_reads`` of them, or all
        that are left when ``final``; none before the source's clock started (``t0_ns``, as
        this tick read it)."""
        if not t0_ns:
            return AccessPoints.empty()
        # A tick never waits for the thread assembling the result (it converts the whole
        # log): it takes nothing this time. The final update comes after that.
        columns, self.cursor = source.reads.columns_since(
            self.cursor, None if final else self.max_reads, wait=final
        )
        return self._absorb(columns, t0_ns)

    @abstractmethod
    def _absorb(self, reads: dict[str, np.ndarray], t0_ns: int) -> AccessPoints: ...


class LiveView(CursorView):
    """What one load has done so far, for the GUI thread's frame tick (its only user)."""

    def __init__(
        self, load: LoadRun, bin_s: float = BIN_S, max_reads: int = MAX_READS_PER_TICK
    ) -> None:
        super().__init__(max_reads)
        sizes = [f.size for f in load.model.files]
        self.file_base_mb = np.concatenate([[0.0], np.cumsum(sizes, dtype=np.float64)])[:-1] / MB
        self.bytes_total = load.model.total_bytes
        self.workers = load.options.workers
        self.bin_s = bin_s
        self.load_bins = ReadBins(bin_s)
        self.prefetch_bins = ReadBins(bin_s)
        self.last_end_s = 0.0
        self.workers_qt_free = True  # no worker imported Qt (checked at the end)
        self._load: LoadRun | None = load

    def update(self, now_ns: int, final: bool = False) -> LiveUpdate:
        """The update for one tick. ``final``: the load has ended; every read left is taken,
        and the view lets go of the load (its log may be large)."""
        load = self._load
        if load is None:
            raise RuntimeError("the load has ended: its final update was taken")
        t0_ns = load.t0_ns
        new_reads = self._take_new_reads(load, t0_ns, final)
        ready = len(load.ready)
        bytes_done = load.reads.bytes
        if final:
            self.workers_qt_free = all(r.qt_free for r in list(load.ready.values()))
            self._load = None
        elapsed_s = (now_ns - t0_ns) / 1e9 if t0_ns else 0.0
        span_s = self.last_end_s if final else max(0.0, elapsed_s - SETTLE_S)
        width_s = display_bin_s(span_s)
        # Final: every bin up to the last read, the partial one included.
        until_s = -(-span_s // width_s) * width_s if final else span_s
        if final:
            phase = "done"
        elif t0_ns:
            phase = "loading"
        elif ready < self.workers:
            phase = "starting workers"
        else:
            phase = "preparing cache"
        return LiveUpdate(
            phase=phase,
            workers_ready=ready,
            workers=self.workers,
            bytes_done=bytes_done,
            bytes_total=self.bytes_total,
            elapsed_s=self.last_end_s if final else max(0.0, elapsed_s),
            bin_s=width_s,
            load_mbps=self.load_bins.mbps(until_s, width_s, self.last_end_s if final else None),
            prefetch_mbps=self.prefetch_bins.mbps(until_s, width_s),
            new_reads=new_reads,
            priming=priming_plan_text(load.priming) if load.priming is not None else "",
        )

    def _absorb(self, reads: dict[str, np.ndarray], t0_ns: int) -> AccessPoints:
        prefetch, lengths = reads["prefetch"], reads["length"]
        t_start = (reads["start"] - t0_ns) / 1e9
        t_end = (reads["end"] - t0_ns) / 1e9
        self.load_bins.add(t_start[~prefetch], t_end[~prefetch], lengths[~prefetch])
        self.prefetch_bins.add(t_start[prefetch], t_end[prefetch], lengths[prefetch])
        if len(t_end):
            self.last_end_s = max(self.last_end_s, float(t_end.max()))
        y_start = self.file_base_mb[reads["file"]] + reads["offset"] / MB
        return AccessPoints(
            reads["worker"],
            t_start,
            t_end,
            y_start,
            y_start + lengths / MB,
            prefetch,
            reads["file"],
            reads["reader"],
            reads["descriptor"],
        )


def run_rates(reads: dict[str, np.ndarray]) -> tuple[float, np.ndarray, np.ndarray]:
    """A finished run's throughput curves from its reads (``SessionResult.reads``: seconds
    after the load's start), binned as its live view's final update bins them: the bin
    width, the load's MB/s and the warm-up prefetch's MB/s per bin."""
    starts, ends, lengths = reads["start"], reads["end"], reads["length"]
    prefetch = reads["prefetch"].astype(bool)
    load_bins, prefetch_bins = ReadBins(BIN_S), ReadBins(BIN_S)
    load_bins.add(starts[~prefetch], ends[~prefetch], lengths[~prefetch])
    prefetch_bins.add(starts[prefetch], ends[prefetch], lengths[prefetch])
    last_end = max(0.0, float(ends.max())) if len(ends) else 0.0
    width = display_bin_s(last_end)
    until = -(-last_end // width) * width
    return width, load_bins.mbps(until, width, last_end), prefetch_bins.mbps(until, width)
