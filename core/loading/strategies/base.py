"""What every strategy shares: the worker context, system-call helpers and the registry."""

from __future__ import annotations

import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from modelmon.core.errors import LoadCancelled, LoadError, OptionsError
from modelmon.core.loading.drop_behind import DropBehind
from modelmon.core.loading.reads import ReadRecorder, new_descriptor_id, now_ns
from modelmon.core.loading.sink import TensorSink
from modelmon.core.model.plan import Read, ShareQueue, ShareState, coalesce
from modelmon.core.model.records import Model, collector_paused
from modelmon.core.options import LoadOptions
from modelmon.core.storage.records import RequestRecord

T = TypeVar("T")

FADVISE = {
    "sequential": os.POSIX_FADV_SEQUENTIAL,
    "random": os.POSIX_FADV_RANDOM,
    "willneed": os.POSIX_FADV_WILLNEED,
    "noreuse": os.POSIX_FADV_NOREUSE,
}
MADVISE = {
    "sequential": mmap.MADV_SEQUENTIAL,
    "random": mmap.MADV_RANDOM,
    "willneed": mmap.MADV_WILLNEED,
    "hugepage": getattr(mmap, "MADV_HUGEPAGE", mmap.MADV_NORMAL),
}


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


@dataclass
class WorkerContext:
    """Everything one worker (a process, or all reader threads in-process) needs. Never pickled.

    Every reading thread opens its own descriptors (``fd``): one open file description, and so
    one readahead state, per concurrent reader. Only ``shared_fds`` (``mmap-shared-fd``, the
    anti-pattern on purpose) hands every thread of every worker the same description.
    """

    worker: int
    model: Model
    indexes: list[int]  # extents this worker loads, in load order
    options: LoadOptions
    sink: TensorSink
    recorder: ReadRecorder
    stop: StopFlag
    shared_fds: dict[int, int] | None = None  # file index → descriptor shared by all workers
    shared_ids: dict[int, int] | None = None  # file index → the shared description's id
    prefetch_recorder: ReadRecorder | None = None
    # Work shared with the other worker processes (``loading.sharing``): every reader thread
    # of every worker draws from one queue; this worker's threads are readers
    # ``first_reader`` .. ``first_reader + threads - 1`` of it.
    shares: ShareState | None = None
    first_reader: int = 0
    # Drops the page cache of what was read (``loading.drop_behind``); wired to ``recorder``
    # unless the strategy maps the file (``Strategy.releases_mappings`` calls it itself).
    drop_behind: DropBehind | None = None
    notes: list[str] = field(default_factory=list)
    # Every request an object strategy made (its connections numbered across workers).
    requests: list[RequestRecord] = field(default_factory=list)
    _abort: threading.Event = field(default_factory=threading.Event)
    _thread_fds: threading.local = field(default_factory=threading.local)
    _opened: list[int] = field(default_factory=list)  # every descriptor any thread opened
    _fd_lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self) -> None:
        """Raise LoadCancelled when the run is cancelled or a sibling thread failed."""
        if self._abort.is_set() or self.stop.is_set():
            raise LoadCancelled(f"worker {self.worker} stopped")

    def files_used(self) -> list[int]:
        index_of = {f.path: i for i, f in enumerate(self.model.files)}
        return sorted({index_of[self.model.extents[i].file] for i in self.indexes})

    def fd(self, file: int, extra_flags: int = 0) -> int:
        """The calling thread's own descriptor for model file ``file`` (opened, hinted once)."""
        if self.shared_fds is not None and not extra_flags:
            ids = self.shared_ids or {}
            self._reading_through(file, ids.get(file, -1))
            return self.shared_fds[file]
        mine: dict[tuple[int, int], tuple[int, int]] | None = getattr(self._thread_fds, "fds", None)
        if mine is None:
            mine = self._thread_fds.fds = {}
        key = (file, extra_flags)
        opened = mine.get(key)
        if opened is None:
            opened = mine[key] = self._open(file, extra_flags)
        self._reading_through(file, opened[1])
        return opened[0]

    def _reading_through(self, file: int, description: int) -> None:
        """The calling thread's next reads of ``file`` go through ``description``: say so."""
        for recorder in (self.recorder, self.prefetch_recorder):
            if recorder is not None:
                recorder.reading_through(file, description)

    def _open(self, file: int, extra_flags: int) -> tuple[int, int]:
        """A new descriptor (so a new open file description) and its id."""
        path = self.model.files[file].path
        descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC | extra_flags)
        with self._fd_lock:
            self._opened.append(descriptor)
        hint = self.options.fadvise
        if hint != "none":
            os.posix_fadvise(descriptor, 0, 0, FADVISE[hint])
        return descriptor, new_descriptor_id()

    def _close_thread_fds(self) -> None:
        """Close the calling thread's descriptors (a reader thread that is done)."""
        mine: dict[tuple[int, int], tuple[int, int]] = getattr(self._thread_fds, "fds", {})
        with self._fd_lock:
            for descriptor, _ in mine.values():
                self._opened.remove(descriptor)
                os.close(descriptor)
        mine.clear()

    def close(self) -> None:
        """Close every descriptor any thread opened (call once the threads have stopped)."""
        with self._fd_lock:
            for descriptor in self._opened:
                os.close(descriptor)
            self._opened.clear()
        self._thread_fds = threading.local()
        if self.drop_behind is not None:
            self.drop_behind.close()

    def in_threads(self, readers: int, body: Callable[[int], None]) -> None:
        """Run ``body(reader)`` for reader 0..readers-1, each on its own thread (inline for
        one). The first failure aborts the siblings and is re-raised once all have stopped;
        each thread closes its own descriptors when it ends. The cyclic garbage collector
        is held off meanwhile: a load makes a few objects per tensor and no cyclic garbage,
        and with a million tensors each collection would walk them all again."""
        with collector_paused():
            self._in_threads(readers, body)

    def _in_threads(self, readers: int, body: Callable[[int], None]) -> None:
        if readers <= 1:
            body(0)
            return
        errors: list[BaseException] = []

        def guarded(reader: int) -> None:
            try:
                for recorder in (self.recorder, self.prefetch_recorder):
                    if recorder is not None:
                        recorder.reading_as(reader)
                body(reader)
            except LoadCancelled as exc:
                errors.append(exc)
            except BaseException as exc:
                errors.insert(0, exc)
                self._abort.set()
            finally:
                self._close_thread_fds()

        name = f"modelmon-w{self.worker}-reader"
        threads = [
            threading.Thread(target=guarded, args=(n,), name=f"{name}{n}") for n in range(readers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def tensors_in_threads(self, work: Callable[[int], None], *, interleaved: bool = False) -> None:
        """Whole tensors for ``options.threads`` threads (one tensor, one thread), dealt by a
        ``ShareQueue``: each thread streams its own stretch of tensors, then helps with the
        largest stretch left. ``interleaved``: every thread takes the next tensor in file order
        instead, so neighbouring tensors are read by different threads at once (the scattered
        pattern ``mmap-shared-fd`` exists to show)."""
        readers = max(1, min(self.options.threads, len(self.indexes)))
        if interleaved:
            lock = threading.Lock()
            pending: Iterator[int] = iter(self.indexes)

            def next_tensor(_: int) -> int | None:
                with lock:
                    return next(pending, None)

            take: Callable[[int], int | None] = next_tensor
        elif self.shares is not None:
            readers = self.options.threads
            queue = ShareQueue.of_tensors(
                self.model, self.indexes, self.shares.readers, self.shares
            )
            first = self.first_reader  # this worker's threads: readers first.. of all
            take = lambda reader: queue.take(first + reader)  # noqa: E731
        else:
            take = ShareQueue.of_tensors(self.model, self.indexes, readers).take
        self._drain_in_threads(readers, take, work)

    def reads_in_threads(self, work: Callable[[Read], None]) -> None:
        """The worker's coalesced reads for ``options.threads`` threads, dealt by a
        ``ShareQueue``: each streams its own stretch, then helps with the largest one left
        (of every worker's, when the workers share their work)."""
        reads = coalesce(self.model, self.indexes, self.options.chunk)
        if self.shares is not None:
            queue = ShareQueue.of_reads(reads, self.shares.readers, self.shares)
            first = self.first_reader
            take = lambda reader: queue.take(first + reader)  # noqa: E731
            self._drain_in_threads(self.options.threads, take, work)
            return
        readers = max(1, min(self.options.threads, len(reads)))
        self._drain_in_threads(readers, ShareQueue.of_reads(reads, readers).take, work)

    def _drain_in_threads(
        self, readers: int, take: Callable[[int], T | None], work: Callable[[T], None]
    ) -> None:
        def drain(reader: int) -> None:
            while (item := take(reader)) is not None:
                self.check()
                work(item)

        self.in_threads(readers, drain)


def pread_exact(fd: int, view: memoryview, offset: int) -> None:
    """Fill ``view`` from ``offset``; a short read means the file shrank under us."""
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise LoadError(
                f"file ended at byte {offset + done} while reading "
                f"{len(view)} bytes at {offset} (truncated during the load?)"
            )
        done += got


def preadv_exact(fd: int, views: list[memoryview], offset: int) -> None:
    total = sum(len(v) for v in views)
    done = os.preadv(fd, views, offset)
    if done == total:
        return
    # Rare: a short vectored read. Finish it piece by piece.
    position = 0
    for view in views:
        end = position + len(view)
        if done < end:
            start_in_view = max(0, done - position)
            pread_exact(fd, view[start_in_view:], offset + position + start_in_view)
        position = end


def timed_read(
    recorder: ReadRecorder, file: int, offset: int, length: int, read: Callable[..., T], *args: Any
) -> T:
    """Run ``read(*args)`` and record it as one read of ``length`` bytes at ``offset``."""
    start = now_ns()
    result = read(*args)
    recorder.record(file, offset, length, start, now_ns())
    return result


class Strategy:
    """One way of loading. Subclasses set the class attributes and implement ``run``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    uses: ClassVar[frozenset[str]] = frozenset(
        {"workers", "threads", "cache", "verify", "discard", "partition", "readahead"}
    )
    shares_fd: ClassVar[bool] = False
    # Its bytes come through a memory mapping of the file: read by page faults (paced by the
    # kernel's fault-around and mapping readahead, not by reads modelmon plans), and, where
    # it copies out, the mapped pages and the copies are resident at once.
    maps_file: ClassVar[bool] = False
    # Its readers draw from one queue (ShareQueue) that may span worker processes. False for a
    # strategy that drains more than one queue (warm-up: the prefetch pass, then the copy).
    shares_work: ClassVar[bool] = True
    forced_partition: ClassVar[str | None] = None
    # The sink allocates every tensor's array. False: the strategy places arrays of its own
    # (``TensorSink.place``: views of a file mapping), so the sink allocates none up front.
    allocates: ClassVar[bool] = True
    # Of a strategy that maps the file: a discard load releases each step's pages from its
    # mapping once read and drops them behind itself (``WorkerContext.drop_behind``), where
    # the others' mapped pages stay until they unmap.
    releases_mappings: ClassVar[bool] = False
    # Descriptors one reader thread may hold open per model file at once (its own; a Python
    # mmap keeps a duplicate of the one it maps): the open-files limit a load needs.
    descriptors_per_file: ClassVar[int] = 1
    # Reads objects (s3://, https://) by ranged GETs instead of files.
    reads_objects: ClassVar[bool] = False

    @classmethod
    def descriptors(cls, files: int, readers: int) -> int:
        """The most descriptors ``readers`` threads of one process hold at once, each of them
        reading from each of ``files`` (besides any shared ones)."""
        return files * readers * cls.descriptors_per_file

    @classmethod
    def cannot_load(cls, model: Model) -> str | None:
        """Why this strategy cannot load ``model`` at all (told before the load starts), or
        None."""
        return None

    def prepare(self, ctx: WorkerContext) -> None:
        """What the strategy sets up before the load is timed (a worker does it before it says
        ready): connections to a bucket, opened as a server opens them once."""

    def run(self, ctx: WorkerContext) -> None:
        raise NotImplementedError

    def release(self) -> None:
        """Undo ``prepare`` (called whether or not ``run`` was)."""

    @classmethod
    def partition_for(cls, options: LoadOptions) -> str:
        return cls.forced_partition or options.partition

    @classmethod
    def fills_arrays(cls, options: LoadOptions) -> bool:
        """Whether the load takes fresh memory for arrays of its bytes, besides the page
        cache (not when it discards them, nor when its tensors are views of a mapping)."""
        return cls.allocates and not options.discard

    @classmethod
    def fills_page_cache(cls, paths: Sequence[str]) -> bool:
        """Whether the load's reads of ``paths`` fill the page cache (not reads past it)."""
        return True


STRATEGIES: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    if cls.name in STRATEGIES:
        raise RuntimeError(f"strategy {cls.name!r} registered twice")
    STRATEGIES[cls.name] = cls
    return cls


def get_strategy(name: str) -> type[Strategy]:
    from modelmon.core.loading import strategies  # noqa: F401  (importing registers every strategy)

    try:
        return STRATEGIES[name]
    except KeyError:
        known = ", ".join(STRATEGIES)
        raise OptionsError(f"unknown strategy {name!r} (known: {known})") from None
