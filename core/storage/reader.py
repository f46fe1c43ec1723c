"""Objects read by N connections × part size, straight into the caller's memory.

``ObjectReader(store, connections)`` opens N connections (one thread and one connection per
reader: every concurrent reader owns its connection) and ``read(parts)`` hands the parts out
in the order given — file order, or the order a model uses its blocks, is the caller's
choice — each connection taking the next part as it finishes one, so N parts are in flight.
A part's bytes go into its targets (numpy arrays' memory, in turn) or, with no targets, into
a bounded scratch buffer per connection and away (discard mode: a model larger than RAM
streams through ``connections × scratch_bytes`` of memory; ``on_data`` sees every chunk, for
a checksum). The result is ``ReadStats`` from every request's record; ``on_record`` sees
each record as it is made (for a live plot).

Every wait has a way out: reads poll the cancel event between slices of ``transfer.SLICE``
bytes and back-offs sleep on it; ``cancel()`` also shuts the sockets of reads in progress.
A failed reader stops the others, and the first failure is raised once all have stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from modelmon.core.errors import LoadCancelled
from modelmon.core.storage.connection import Connection, Store
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.policy import RetryPolicy, read_policy
from modelmon.core.storage.records import ReadStats, RequestRecord
from modelmon.core.storage.transfer import DataSink, Expected, RangeReader, Stopped

MiB = 1 << 20
DEFAULT_SCRATCH = 8 * MiB


@dataclass(frozen=True, slots=True)
class Part:
    """``length`` bytes at ``offset`` of one object, into ``targets`` (memory whose sizes
    add up to ``length``, filled in turn) or discarded (``targets`` None)."""

    facts: ObjectFacts  # the object, as it was opened
    offset: int
    length: int
    targets: tuple[memoryview, ...] | None = None


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of one object and the memory it goes to (None: discard): what a caller
    has (a tensor and its array); ``plan_parts`` cuts and joins spans into parts."""

    facts: ObjectFacts  # the object, as it was opened
    offset: int
    length: int
    target: memoryview | None = None


def plan_parts(spans: Iterable[Span], part_size: int) -> list[Part]:
    """Parts of at most ``part_size`` bytes, in the order of ``spans``: a span longer than a
    part is cut (its memory sliced), spans that follow each other in one object are joined
    until a part is full. Discarded spans are joined with discarded ones only."""
    if part_size <= 0:
        raise ValueError("part_size must be positive")
    parts: list[Part] = []
    pending: list[tuple[int, memoryview | None]] = []  # (length, memory) of the part being made
    start = 0
    current: ObjectFacts | None = None

    def flush() -> None:
        if pending:
            length = sum(size for size, _ in pending)
            targets = None if pending[0][1] is None else tuple(m for _, m in pending if m)
            assert current is not None
            parts.append(Part(current, start, length, targets))
            pending.clear()

    for span in spans:
        memory = None if span.target is None else _flat(span.target)
        if memory is not None and len(memory) != span.length:
            raise ValueError(f"a span of {span.length} bytes given {len(memory)} bytes of memory")
        offset, left = span.offset, span.length
        while left > 0:
            filled = sum(size for size, _ in pending)
            joins = (
                pending
                and current == span.facts
                and start + filled == offset
                and (pending[0][1] is None) == (memory is None)
                and filled < part_size
            )
            if not joins:
                flush()
                current, start, filled = span.facts, offset, 0
            take = min(left, part_size - filled)
            piece = None if memory is None else memory[offset - span.offset :][:take]
            pending.append((take, piece))
            offset += take
            left -= take
            if filled + take >= part_size:
                flush()
    flush()
    return parts


class ObjectReader:
    """N connections to one store, each read by its own thread; reused by every ``read``."""

    def __init__(
        self,
        store: Store,
        connections: int,
        *,
        policy: RetryPolicy | None = None,
        cancel: threading.Event | None = None,
        scratch_bytes: int = DEFAULT_SCRATCH,
    ) -> None:
        if connections < 1:
            raise ValueError("connections must be at least 1")
        self.store, self.connections = store, connections
        self.policy = policy or read_policy()
        self.cancel_event = cancel or threading.Event()
        self.scratch_bytes = scratch_bytes
        self._stop = threading.Event()
        self._connections: list[Connection] = []
        try:
            for _ in range(connections):
                self._connections.append(store.connect())
        except BaseException:
            self.close()
            raise
        self._readers: list[RangeReader] = []

    def read(
        self,
        parts: Sequence[Part],
        *,
        on_record: Callable[[RequestRecord], None] | None = None,
        on_data: DataSink | None = None,
    ) -> ReadStats:
        """Read every part; the stats of its requests. Raises the first reader's error (a
        StorageError, LoadCancelled) after every reader has stopped."""
        self._stop.clear()
        queue = list(parts)
        next_part = [0]
        lock = threading.Lock()
        records: list[list[RequestRecord]] = [[] for _ in self._connections]
        errors: list[BaseException] = []

        def take() -> Part | None:
            with lock:
                if next_part[0] >= len(queue) or self._stop.is_set():
                    return None
                part = queue[next_part[0]]
                next_part[0] += 1
                return part

        def run(number: int, reader: RangeReader) -> None:
            scratch = memoryview(bytearray(0))
            try:
                while (part := take()) is not None:
                    url = part.facts.object_url()
                    expected = Expected(part.facts.size, part.facts.etag)
                    if part.targets is not None:
                        reader.read(url, part.offset, part.targets, expected, on_data)
                        continue
                    # At most scratch_bytes, and no more than a part needs.
                    if len(scratch) < min(self.scratch_bytes, part.length):
                        scratch = memoryview(bytearray(min(self.scratch_bytes, part.length)))
                    # One request per part, its body passed through the scratch memory
                    # again and again: the same buffer as every target in turn.
                    full, rest = divmod(part.length, len(scratch))
                    targets = (scratch,) * full + ((scratch[:rest],) if rest else ())
                    reader.read(url, part.offset, targets, expected, on_data)
            except Stopped:
                pass
            except BaseException as exc:
                with lock:
                    errors.append(exc)
                self._stop.set()
                for other in self._readers:
                    if other is not reader:
                        other.shutdown()

        def recorder(number: int) -> Callable[[RequestRecord], None]:
            own = records[number]

            def record(entry: RequestRecord) -> None:
                own.append(entry)
                if on_record is not None:
                    on_record(entry)

            return record

        self._readers = [
            RangeReader(conn, n, self.policy, self.cancel_event, recorder(n), self._stop)
            for n, conn in enumerate(self._connections)
        ]
        threads = [
            threading.Thread(
                target=run, args=(n, reader), name=f"modelmon-object-reader-{n}", daemon=True
            )
            for n, reader in enumerate(self._readers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._readers = []
        if errors:
            cancelled = [e for e in errors if isinstance(e, LoadCancelled)]
            raise (cancelled or errors)[0]
        if self.cancel_event.is_set() and next_part[0] < len(queue):
            raise LoadCancelled("the read was cancelled")
        return ReadStats.of([r for own in records for r in own], len(self._connections))

    def cancel(self) -> None:
        """Stop every read at once: the event is set and sockets mid-read are shut down."""
        self.cancel_event.set()
        for reader in list(self._readers):
            reader.shutdown()

    def close(self) -> None:
        for connection in self._connections:
            connection.close()
        self._connections = []

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _flat(memory: memoryview) -> memoryview:
    view = memoryview(memory)
    if view.nbytes == 0:
        return memoryview(bytearray(0))
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
