"""The read stream of a load: recorded in the worker, logged in the parent.

A worker's ``ReadRecorder`` collects every read (file, offset, length, start, end, on one
clock: ``now_ns``) and ships them over the pipe in small columnar batches. The parent's
``ReadLog`` appends each batch as it arrives; the result reads it whole at the end, the
window's live plots read what is new by cursor on their frame tick. Bytes are counted once,
here, and each batch becomes arrays once.
"""

from __future__ import annotations

import bisect
import itertools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from modelmon.core.loading.messages import ReadBatch


def now_ns() -> int:
    """The one clock of every process of a load (CLOCK_MONOTONIC)."""
    return time.perf_counter_ns()


_descriptor_serial = itertools.count(1)
READER_BITS = 16  # a reader's load-wide id: worker << READER_BITS | reader thread


def new_descriptor_id() -> int:
    """A load-wide id for an open file description this process just opened (``os.open``):
    its pid and a serial. Each ``open`` makes a new description; readers that use the same
    descriptor (threads of a process, or processes handed it over SCM_RIGHTS with its id)
    record the same id, so the read log shows who shared one."""
    return os.getpid() << 24 | next(_descriptor_serial)


class ReadRecorder:
    """Collects reads (file, offset, length, start, end) and ships them in small batches.

    Each read also carries the reader thread that did it and the open file description it
    went through, as the calling thread last declared them (``reading_as``,
    ``reading_through``). Thread-safe; flushes when a batch is full or old, so the parent sees
    progress live without one message per read.
    """

    def __init__(
        self,
        worker: int,
        send: Callable[[ReadBatch], None] | None,
        max_batch: int = 256,
        max_age_s: float = 0.05,
        prefetch: bool = False,
        after_read: Callable[[int, int, int], None] | None = None,
    ) -> None:
        self.worker = worker
        self.prefetch = prefetch
        self._send = send
        # Called by the reading thread with (file, offset, length) once a read is recorded,
        # outside the read's own timing (drop-behind).
        self._after_read = after_read
        self._max_batch = max_batch
        self._max_age_ns = int(max_age_s * 1e9)
        self._lock = threading.Lock()
        self._columns: tuple[list[int], ...] = ([], [], [], [], [], [], [])
        self._oldest = 0
        self._thread = threading.local()  # reader and descriptors of the calling thread
        self.reads = 0
        self.bytes = 0

    def reading_as(self, reader: int) -> None:
        """The calling thread is reader thread ``reader`` of this worker (default 0)."""
        self._thread.reader = reader

    def reading_through(self, file: int, descriptor: int) -> None:
        """The calling thread's reads of ``file`` go through open file description
        ``descriptor`` (a ``new_descriptor_id``) from now on."""
        mine: dict[int, int] | None = getattr(self._thread, "descriptors", None)
        if mine is None:
            mine = self._thread.descriptors = {}
        mine[file] = descriptor

    def record(self, file: int, offset: int, length: int, start_ns: int, end_ns: int) -> None:
        reader: int = getattr(self._thread, "reader", 0)
        descriptor = getattr(self._thread, "descriptors", {}).get(file, -1)
        with self._lock:
            files, offsets, lengths, starts, ends, readers, descriptors = self._columns
            if not files:
                self._oldest = end_ns
            files.append(file)
            offsets.append(offset)
            lengths.append(length)
            starts.append(start_ns)
            ends.append(end_ns)
            readers.append(reader)
            descriptors.append(descriptor)
            self.reads += 1
            self.bytes += length
            if len(files) >= self._max_batch or end_ns - self._oldest >= self._max_age_ns:
                self._flush_locked()
        if self._after_read is not None:
            self._after_read(file, offset, length)

    def flush(self) -> None:
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        files, offsets, lengths, starts, ends, readers, descriptors = self._columns
        if not files:
            return
        batch = ReadBatch(
            self.worker,
            tuple(files),
            tuple(offsets),
            tuple(lengths),
            tuple(starts),
            tuple(ends),
            self.prefetch,
            tuple(readers),
            tuple(descriptors),
        )
        self._columns = ([], [], [], [], [], [], [])
        if self._send is not None:
            self._send(batch)


class ReadLog:
    """Every read of a run: appended batch by batch by the thread that receives them, read as
    numpy columns by any thread, whole (``columns``) or what is new since a cursor
    (``columns_since``, the window's live plots on their frame tick).

    Each batch becomes arrays once, in chunks, by whichever reader asks for it first: the live
    plots' conversions are the result's too. ``add`` never waits for a conversion.
    """

    def __init__(self) -> None:
        self._batches: list[ReadBatch] = []
        self._read_ends: list[int] = []  # reads in the log up to and including each batch
        self._adding = threading.Lock()  # the two lists and the counters
        self._converting = threading.Lock()  # the chunks, one conversion at a time
        self._chunks: list[tuple[int, dict[str, np.ndarray]]] = []  # (first read, columns)
        self._converted = 0  # batches in the chunks
        self._converted_reads = 0
        self.count = 0
        self.bytes = 0  # of the load itself: warm-up prefetch reads excluded

    def add(self, batch: ReadBatch) -> None:
        reads = len(batch.offsets)
        loaded = 0 if batch.prefetch else sum(batch.lengths)
        with self._adding:
            self._batches.append(batch)
            self._read_ends.append(self.count + reads)
            self.count += reads
            self.bytes += loaded

    def columns(self) -> dict[str, np.ndarray]:
        """Every read so far as arrays (the result and the session both ask: built once)."""
        with self._adding:
            count = self.count
        with self._converting:
            self._convert(count)
            if len(self._chunks) > 1:  # one chunk from now on: the next call only slices
                self._chunks = [(0, _concat([columns for _, columns in self._chunks]))]
            return self._slice(0, count)

    def columns_since(
        self, cursor: int, max_reads: int | None = None, wait: bool = True
    ) -> tuple[dict[str, np.ndarray], int]:
        """The reads after the first ``cursor``, whole batches up to about ``max_reads`` of
        them, and the cursor to ask with next time. Safe while reads are being added.

        ``wait=False``: while another thread converts (the result being assembled), nothing
        now rather than waiting for it; the same cursor comes back.
        """
        with self._adding:
            stop = self.count
            if max_reads is not None and stop - cursor > max_reads:
                stop = self._read_ends[bisect.bisect_left(self._read_ends, cursor + max_reads)]
        if not self._converting.acquire(blocking=wait):
            return _build_columns([]), cursor
        try:
            self._convert(stop)
            return self._slice(cursor, stop), stop
        finally:
            self._converting.release()

    def _convert(self, reads: int) -> None:
        """Make sure the chunks hold the first ``reads`` reads (the caller holds _converting)."""
        if self._converted_reads >= reads:
            return
        with self._adding:
            end = bisect.bisect_left(self._read_ends, reads) + 1
            batches = self._batches[self._converted : end]
            converted = self._read_ends[end - 1]
        self._chunks.append((self._converted_reads, _build_columns(batches)))
        self._converted, self._converted_reads = end, converted

    def _slice(self, start: int, stop: int) -> dict[str, np.ndarray]:
        parts = [
            {key: column[max(0, start - first) : stop - first] for key, column in columns.items()}
            for first, columns in self._chunks
            if first < stop and first + len(columns["file"]) > start
        ]
        if len(parts) == 1:
            return parts[0]
        return _concat(parts) if parts else _build_columns([])


def _build_columns(batches: list[ReadBatch]) -> dict[str, np.ndarray]:
    sizes = [len(b.offsets) for b in batches]
    count = sum(sizes)
    return {
        "worker": np.repeat(np.array([b.worker for b in batches], dtype=np.int32), sizes),
        "file": np.fromiter((f for b in batches for f in b.files), np.int32, count),
        "offset": np.fromiter((o for b in batches for o in b.offsets), np.int64, count),
        "length": np.fromiter((n for b in batches for n in b.lengths), np.int64, count),
        "start": np.fromiter((t for b in batches for t in b.starts), np.int64, count),
        "end": np.fromiter((t for b in batches for t in b.ends), np.int64, count),
        "prefetch": np.repeat(np.array([b.prefetch for b in batches], dtype=bool), sizes),
        # load-wide reader ids: worker << READER_BITS | reader thread
        "reader": np.fromiter(
            (
                b.worker << READER_BITS | r
                for b in batches
                for r in (b.readers or itertools.repeat(0, len(b.offsets)))
            ),
            np.int64,
            count,
        ),
        "descriptor": np.fromiter(
            (d for b in batches for d in (b.descriptors or itertools.repeat(-1, len(b.offsets)))),
            np.int64,
            count,
        ),
    }


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


@dataclass(frozen=True, slots=True)
class DescriptorSharing:
    """How a load's readers used open file descriptions, from its read log."""

    readers: int  # reader threads (of every worker) that read through a known description
    descriptions: int  # the most distinct descriptions open on any one file
    most_sharing: int  # the most readers that read through any one description
    files: int  # files read through known descriptions
    # Of objects in a bucket: a reader's description is its connection to the endpoint.
    objects: bool = False

    @property
    def shared(self) -> bool:
        return self.most_sharing > 1

    def text(self) -> str:
        """ "4 readers share 1 descriptor", or "4 readers, each its own descriptor"; of a
        bucket's objects, "4 connections, one per reader" (no descriptor is opened there)."""
        if self.objects:
            if not self.shared:
                return (
                    f"{self.readers} connection{'s' if self.readers != 1 else ''}, one per reader"
                )
            return f"{self.readers} readers share {self.descriptions} connection(s)"
        readers = f"{self.readers} reader{'s' if self.readers != 1 else ''}"
        if not self.shared:
            return f"{readers}, each its own descriptor" if self.readers > 1 else readers
        per_file = " per file" if self.files > 1 else ""
        plural = "s" if self.descriptions != 1 else ""
        verb = "share" if self.readers != 1 else "shares"
        return f"{readers} {verb} {self.descriptions} descriptor{plural}{per_file}"


class DescriptorTally:
    """Which readers read which file through which description: fed read columns as they
    come (the live plot, tick by tick) or all at once (the result)."""

    def __init__(self, objects: bool = False) -> None:
        """``objects``: the reads are of a bucket's objects (said as connections)."""
        self._seen: set[tuple[int, int, int]] = set()  # (file, description, reader)
        self.objects = objects

    def add(self, file: np.ndarray, reader: np.ndarray, descriptor: np.ndarray) -> None:
        known = descriptor >= 0
        if not known.any():
            return
        triples = np.unique(np.stack([file[known], descriptor[known], reader[known]]), axis=1)
        self._seen.update(zip(*(row.tolist() for row in triples), strict=True))

    def sharing(self) -> DescriptorSharing | None:
        """None when no read went through a known description."""
        if not self._seen:
            return None
        per_description: dict[int, set[int]] = {}
        per_file: dict[int, set[int]] = {}
        for file, description, reader in self._seen:
            per_description.setdefault(description, set()).add(reader)
            per_file.setdefault(file, set()).add(description)
        return DescriptorSharing(
            readers=len({reader for _, _, reader in self._seen}),
            descriptions=max(len(d) for d in per_file.values()),
            most_sharing=max(len(r) for r in per_description.values()),
            files=len(per_file),
            objects=self.objects,
        )


def descriptor_sharing(
    columns: dict[str, np.ndarray], objects: bool = False
) -> DescriptorSharing | None:
    """The descriptor sharing of a whole read log's columns (``ReadLog.columns``)."""
    tally = DescriptorTally(objects)
    tally.add(columns["file"], columns["reader"], columns["descriptor"])
    return tally.sharing()
