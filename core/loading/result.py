"""The outcome of one load: one record per concept (result, blocks, workers), assembled from
the run's read log (``modelmon.core.loading.reads``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from modelmon.core.errors import StorageError, one_line
from modelmon.core.loading.drop_behind import DroppedBehind
from modelmon.core.loading.messages import WorkerDone, WorkerFailed, WorkerReady
from modelmon.core.model.blocks import block_sort_key
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.records import ReadStats
from modelmon.core.system import cache, residency
from modelmon.core.system.cache import CacheState
from modelmon.core.system.memory_limit import MemoryLimit


@dataclass(frozen=True, slots=True)
class BlockTiming:
    """When a block was loaded, by all workers together: first read's start to last read's end.

    ``end`` is when the block became complete: from then on a loader that uses blocks as they
    arrive (async preload, streaming) could use it.
    """

    name: str
    bytes: int  # the whole block's
    start: float  # seconds after the load started
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class BlockShareTiming:
    """When one worker read its share of a block.

    Not a BlockTiming with a worker added: a share has no byte count of its own (tensors are
    dealt to workers whole, and a block's tensors may go to several), and the shares of one
    block overlap in time; the block's own timing spans them all.
    """

    block: str
    worker: int
    start: float  # seconds after the load started
    end: float


@dataclass(frozen=True, slots=True)
class WorkerTiming:
    id: int
    pid: int
    bytes: int
    seconds: float
    reads: int
    peak_rss: int


# A load that lasted this few of its timing's steps (a watched program's samples) is timed no
# finer than one step: its rate is a bound, and its result says so.
COARSE_STEPS = 3


def coarse(seconds: float, timed_every_s: float) -> bool:
    """Whether a load of ``seconds`` timed to ``timed_every_s`` is timed only roughly."""
    return timed_every_s > 0 and seconds <= COARSE_STEPS * timed_every_s


def overlap_note(overlapped: Iterable[str]) -> str:
    """The note, for people, of the other modelmon runs that used a load's devices while it
    was timed (``system.device_use``): its figures may be theirs too."""
    return f"other modelmon runs used this device during the timed load: {'; '.join(overlapped)}"


@dataclass(frozen=True, slots=True)
class LoadResult:
    status: str  # "ok" | "cancelled" | "failed"
    strategy: str
    options: dict[str, Any]
    model: str
    format: str
    files: tuple[str, ...]
    bytes: int
    seconds: float
    cache: CacheState
    blocks: tuple[BlockTiming, ...] = ()
    workers: tuple[WorkerTiming, ...] = ()
    checksum: str | None = None
    tensor_checksums: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    notes: tuple[str, ...] = ()
    # Free memory reported to the VM's host from go to the end (``host_memory.reported_bytes``):
    # None where the kernel does not count it.
    host_reported: int | None = None
    # The peak RSS of the process that ran the load (workers' parent, or a peer's) over the
    # run, the free memory primed before it left out (``cache.primed`` says it): None where it
    # could not be measured.
    parent_peak_rss: int | None = None
    # A streaming load that dropped its page cache behind its reads: how much, what it took.
    dropped_behind: DroppedBehind | None = None
    # How finely ``seconds`` is known: a watched program's first and last bytes are each
    # placed at a sample of this interval. 0 where the load times itself.
    timed_every_s: float = 0.0
    # "4 readers share 1 descriptor" when the readers shared an open file description,
    # measured from the read log.
    descriptor_sharing: str | None = None
    # The other modelmon runs that used the load's devices during its timed part
    # (``system.device_use``), each "pid 812 (modelmon load m.gguf)": its figures may be theirs.
    overlapped: tuple[str, ...] = ()
    # Another loader run by the child harness: the seconds its own clock gave (its load and
    # its touch of every byte, imports apart), kept beside the watch's timing as a cross-check.
    own_seconds: float | None = None
    # A load from object storage: its requests summed (time to first byte, retries,
    # throttles, per connection); None for a load of files.
    object_reads: ReadStats | None = None
    # Its objects as they were opened (URL, size, ETag every read was made If-Match).
    objects: tuple[ObjectFacts, ...] = ()
    # The memory cgroup the load ran in under ``--memory-limit``: its peak, split, re-reads and
    # OOM kills; None without a limit, or where none could be made (a note says so).
    memory_limit: MemoryLimit | None = None
    # A load the storage failed (throttled past the retries, an object changed, access
    # refused...): that typed error, whose line ``error`` is. Not in the JSON: ``error`` is.
    storage_error: StorageError | None = field(default=None, compare=False)
    # A server's run (a program seen ready: listening, a line, a URL): seconds from its
    # start to ready, the figure an A/B of servers compares; None for a load that ends.
    ready_s: float | None = None
    # How finely ``ready_s`` is known: the period of the looks that saw it (0: to the line).
    ready_every_s: float = 0.0
    # A server's cold start in spans, seconds each: "before", "weights", "after" (the
    # watch's phases) and "line: NAME" (a span the server's own lines timed).
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def coarse_timing(self) -> bool:
        """Timed only to a few of its timing's steps (``coarse``): its rate is a bound."""
        return self.status == "ok" and coarse(self.seconds, self.timed_every_s)

    @property
    def workers_peak_rss(self) -> int:
        """The load's own memory: each worker's peak RSS (VmHWM), summed (they may peak at
        different moments, so this bounds what they held at once from above)."""
        return sum(worker.peak_rss for worker in self.workers)

    @property
    def process_tree_peak_rss(self) -> int | None:
        """The whole modelmon process tree's: the parent's peak plus the workers'."""
        if self.parent_peak_rss is None:
            return None
        return self.parent_peak_rss + self.workers_peak_rss

    @property
    def overlapped_by(self) -> str | None:
        """The other modelmon runs that used the device during the timed load, if any."""
        return "; ".join(self.overlapped) if self.overlapped else None

    @property
    def server(self) -> bool:
        """A server's run, timed to ready (``ready_s``)."""
        return self.ready_s is not None

    @property
    def mbps(self) -> float:
        """Decimal megabytes per second, the unit storage is sold in."""
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def first_block_s(self) -> float | None:
        """Seconds until the first block, in the order a model uses them, was complete."""
        return blocks_ready_s(self.blocks, 1) if self.status == "ok" else None

    @property
    def half_blocks_s(self) -> float | None:
        """Seconds until the first half of the blocks (in use order) were all complete."""
        return half_blocks_ready_s(self.blocks) if self.status == "ok" else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["objects"] = [facts.as_dict() for facts in self.objects]  # as they are written
        data["mbps"] = round(self.mbps, 3)
        data["workers_peak_rss"] = self.workers_peak_rss
        data["process_tree_peak_rss"] = self.process_tree_peak_rss
        data["first_block_seconds"] = self.first_block_s
        data["half_blocks_seconds"] = self.half_blocks_s
        data["blocks"] = [
            {"name": b.name, "bytes": b.bytes, "start": b.start, "end": b.end, "seconds": b.seconds}
            for b in self.blocks
        ]
        if self.checksum is None:
            data.pop("tensor_checksums")
        data.pop("storage_error")
        if self.object_reads is not None:
            data["object_reads"]["bytes_per_second"] = self.object_reads.throughput
        return data


def object_reads(
    done: Iterable[WorkerDone | WorkerFailed], options: LoadOptions
) -> ReadStats | None:
    """The requests of every worker of a load from object storage that said what it made (it
    finished, or failed: a load throttled to failure counts its throttles), summed; None when
    no worker made one (a load of files)."""
    records = [record for worker in done for record in worker.requests]
    if not records:
        return None
    return ReadStats.of(records, options.workers * options.threads)


def run_notes(
    done: Iterable[WorkerDone],
    setup: Iterable[str],
    descriptors: str | None,
    host: tuple[str, ...],
    dropped: DroppedBehind | None,
    overlapped: tuple[str, ...],
    held: str | None,
) -> tuple[str, ...]:
    """A result's notes: the workers' and the setup's (sorted), then how readers shared
    descriptors, the host's memory reporting, drop-behind, other runs on the device, and the
    workers the kernel still held at the end."""
    notes = tuple(sorted({n for d in done for n in d.notes} | set(setup)))
    notes += (f"descriptors: {descriptors}",) if descriptors else ()
    notes += host + ((dropped.note(),) if dropped is not None else ())
    notes += (overlap_note(overlapped),) if overlapped else ()
    return notes + ((held,) if held else ())


def cancelled_error(status: str, timed_out: bool, time_limit_s: float | None) -> str | None:
    """The error of a run that was stopped before its end: at its time limit, or cancelled."""
    if status != "cancelled":
        return None
    if timed_out:
        limit = time_limit_s or 0.0
        shown = f"{limit:.3g}" if limit < 100 else f"{limit:.0f}"  # 0.573 s, 20 s, 1234 s
        return f"stopped at the time limit of {shown} s"
    return "cancelled"


def residency_after(
    paths: list[str], *, worker_died: bool, drops: bool
) -> tuple[float, str | None]:
    """The share of ``paths`` in the page cache after a load (NaN: not measured), and why the
    run failed if a file vanished under it. ``drops``: the readers dropped their pages behind
    them, so what their folio-aligned drops left is evicted first."""
    if worker_died:
        # A killed worker's files may still be closing (a network filesystem can hold an
        # open of the same file until it has): the failed run ends now instead.
        return float("nan"), None
    try:
        if drops:
            cache.evict(paths)
        return residency.measure(paths), None
    except OSError as exc:  # the file vanished under us: say so, don't crash the report
        vanished = f"{exc.filename}: " if exc.filename else ""
        return float("nan"), (  # NaN, "not measured": null in JSON
            f"{vanished}deleted or replaced during the load "
            f"({(exc.strerror or one_line(exc)).lower()}); residency after not measured"
        )


def worker_timings(
    done: dict[int, WorkerDone], ready: dict[int, WorkerReady], columns: dict[str, np.ndarray]
) -> tuple[WorkerTiming, ...]:
    """Each finished worker's timing, by worker, from what it reported and the run's reads."""
    return tuple(
        WorkerTiming(
            worker,
            ready[worker].pid if worker in ready else 0,
            report.bytes,
            (report.end_ns - report.start_ns) / 1e9,
            int((columns["worker"] == worker).sum()),
            report.peak_rss,
        )
        for worker, report in sorted(done.items())
    )


def blocks_ready_s(blocks: tuple[BlockTiming, ...], count: int) -> float | None:
    """When the first ``count`` blocks in use order (embeddings, layers by number, head: the
    order ``block_timings`` returns) were all complete; a streaming loader waits this long.
    None without blocks."""
    if not blocks or count < 1:
        return None
    return max(block.end for block in blocks[:count])


def half_blocks_ready_s(blocks: tuple[BlockTiming, ...]) -> float | None:
    """When the first half of ``blocks`` in use order (rounded up) were all complete."""
    return blocks_ready_s(blocks, (len(blocks) + 1) // 2)


def model_checksum(crcs: dict[str, int], model: Model) -> str:
    """One digest over every tensor's (name, length, crc32), in name order."""
    lengths = {e.name: e.length for e in model.extents}
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(crcs):
        digest.update(f"{name}\0{lengths[name]}\0{crcs[name]:08x}\n".encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class _TensorColumns:
    """Per tensor, as arrays: its file's index, start, end and block's code; and the blocks."""

    file: np.ndarray
    start: np.ndarray
    end: np.ndarray
    block: np.ndarray
    blocks: list[str]  # code → name
    block_bytes: np.ndarray  # code → bytes of its tensors


def _tensor_columns(model: Model) -> _TensorColumns:
    """``model``'s tensors as columns, made in a few passes (a million tensors: no Python
    work per tensor beyond reading its fields)."""
    extents = model.extents
    count = len(extents)
    file_of = {f.path: i for i, f in enumerate(model.files)}
    codes: dict[str, int] = {}
    code_of = codes.setdefault
    file = np.fromiter((file_of[e.file] for e in extents), np.int64, count)
    start = np.fromiter((e.offset for e in extents), np.int64, count)
    length = np.fromiter((e.length for e in extents), np.int64, count)
    block = np.fromiter((code_of(e.block, len(codes)) for e in extents), np.int64, count)
    block_bytes = np.zeros(len(codes), dtype=np.int64)
    np.add.at(block_bytes, block, length)
    return _TensorColumns(file, start, start + length, block, list(codes), block_bytes)


def block_timings(
    model: Model,
    reads: dict[str, np.ndarray],
    t0_ns: int,
    tensors_of: _TensorColumns | None = None,
) -> list[BlockTiming]:
    """When each block's bytes were read: from its first read's start to its last read's end.

    Reads are mapped onto tensors by byte overlap (a coalesced read may fill many tensors, a
    big tensor takes many reads); warm-up prefetch reads don't count as loading.
    ``tensors_of``: the model's ``_tensor_columns``, when the caller has them already.
    """
    tensors_of = tensors_of or _tensor_columns(model)
    count = len(model.extents)
    first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.zeros(count, dtype=np.int64)
    keep = ~reads["prefetch"]
    tensor_file, tensor_start, tensor_end = tensors_of.file, tensors_of.start, tensors_of.end
    for file in range(len(model.files)):
        tensors = np.flatnonzero(tensor_file == file)
        mine = keep & (reads["file"] == file)
        if not len(tensors) or not mine.any():
            continue
        order = tensors[np.argsort(tensor_start[tensors], kind="stable")]
        starts, ends = tensor_start[order], tensor_end[order]
        read_start = reads["offset"][mine]
        read_end = read_start + reads["length"][mine]
        lo = np.searchsorted(ends, read_start, side="right")  # first tensor ending after it
        hi = np.searchsorted(starts, read_end, side="left")  # one past the last overlapping
        spans = np.maximum(hi - lo, 0)
        which = np.repeat(lo, spans) + (
            np.arange(spans.sum()) - np.repeat(spans.cumsum() - spans, spans)
        )
        targets = order[which]
        np.minimum.at(first, targets, np.repeat(reads["start"][mine], spans))
        np.maximum.at(last, targets, np.repeat(reads["end"][mine], spans))
    # Per block, over its tensors that were read: the first start and the last end.
    read = last > 0
    codes = len(tensors_of.blocks)
    block_first = np.full(codes, np.iinfo(np.int64).max, dtype=np.int64)
    block_last = np.zeros(codes, dtype=np.int64)
    np.minimum.at(block_first, tensors_of.block[read], first[read])
    np.maximum.at(block_last, tensors_of.block[read], last[read])
    was_read = np.zeros(codes, dtype=bool)
    was_read[tensors_of.block[read]] = True
    timings = []
    for code in sorted(range(codes), key=lambda c: block_sort_key(tensors_of.blocks[c])):
        if not was_read[code]:
            continue
        start = (int(block_first[code]) - t0_ns) / 1e9
        end = (int(block_last[code]) - t0_ns) / 1e9
        name = tensors_of.blocks[code]
        timings.append(BlockTiming(name, int(tensors_of.block_bytes[code]), start, end))
    return timings


def block_share_timings(
    model: Model, reads: dict[str, np.ndarray], t0_ns: int
) -> list[BlockShareTiming]:
    """When each worker read its share of each block: ``block_timings`` worker by worker."""
    shares: list[BlockShareTiming] = []
    tensors_of = _tensor_columns(model)
    for worker in sorted(set(reads["worker"].tolist())):
        mine = {key: column[reads["worker"] == worker] for key, column in reads.items()}
        shares.extend(
            BlockShareTiming(b.name, int(worker), b.start, b.end)
            for b in block_timings(model, mine, t0_ns, tensors_of)
        )
    return shares
