"""What a worker sends its parent over the pipe: small frozen records, never tensor bytes.

Each is pickled per message, so they stay columnar and small (a ReadBatch carries many reads).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelmon.core.errors import StorageError
from modelmon.core.storage.records import RequestRecord


@dataclass(frozen=True, slots=True)
class WorkerReady:
    worker: int
    pid: int
    tensors: int  # how many tensors this worker was dealt (may be handed: all, when shared)
    bytes: int  # and how many bytes they hold
    qt_free: bool  # the worker imported no Qt (a house rule, checked where it matters)


@dataclass(frozen=True, slots=True)
class ReadBatch:
    """Reads done by one worker, columnar so a batch pickles small.

    Each read i covered ``lengths[i]`` bytes at ``offsets[i]`` of model file ``files[i]``
    between ``starts[i]`` and ``ends[i]`` (``time.perf_counter_ns``, CLOCK_MONOTONIC: one
    clock for every process on the machine).
    """

    worker: int
    files: tuple[int, ...]
    offsets: tuple[int, ...]
    lengths: tuple[int, ...]
    starts: tuple[int, ...]
    ends: tuple[int, ...]
    prefetch: bool = False  # reads of a warm-up pass, not the load itself
    # Per read: which reader thread of the worker did it, and through which open file
    # description (``reads.new_descriptor_id``; -1: not known, e.g. a library opened its own).
    # Empty: reader 0, descriptor unknown.
    readers: tuple[int, ...] = ()
    descriptors: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerDone:
    worker: int
    bytes: int
    start_ns: int
    end_ns: int
    checksums: tuple[tuple[str, int], ...] = ()  # (tensor name, crc32) when verify is on
    peak_rss: int = 0
    notes: tuple[str, ...] = ()  # e.g. why O_DIRECT fell back to buffered reads
    # (tensor, start, end, crc32) rows of every span filled, int64, when the workers shared one
    # queue of work: the parent checks that all workers' spans tile the model (and combines
    # the crcs). One array, so a million spans pickle as a few megabytes, not a million tuples.
    spans: np.ndarray | None = None
    # Drop-behind (``loading.drop_behind``): bytes of page cache dropped right after being
    # read, and the readers' nanoseconds it took.
    dropped_behind: int = 0
    drop_behind_ns: int = 0
    # Every request of an object strategy (``storage.records``): the result's request figures.
    requests: tuple[RequestRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkerFailed:
    worker: int
    kind: str  # exception class name
    message: str
    # The storage's own failure (throttled, changed, refused...), typed: the parent fails the
    # run with it, as opening the model would have (its words, its exit code).
    storage: StorageError | None = None
    # The requests it made before it stopped: a load throttled to failure counts its throttles.
    requests: tuple[RequestRecord, ...] = ()
