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

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from modelmon.core.errors import LoadCancelled, StorageThrottledError
from modelmon.core.storage.connection import Connection, Store
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.pace import Pace
from modelmon.core.storage.policy import RetryPolicy, read_policy
from modelmon.core.storage.records import ReadStats, RequestRecord
from modelmon.core.storage.transfer import (
    DataSink,
    Expected,
    GiveBack,
    RangeReader,
    Stopped,
)
from modelmon.core.units import human_bytes

MiB = 1 << 20
DEFAULT_SCRATCH = 8 * MiB
_POLL_S = 0.05  # how often a reader waiting for its turn looks at the stop and the cancel


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
        """Read every part, paced by the bucket's answers (``pace``); the stats of its
        requests. Raises the first reader's error (a StorageError, LoadCancelled) after every
        reader has stopped."""
        self._stop.clear()
        pace = Pace(
            len(self._connections),
            max((part.length for part in parts), default=1),
            sum(part.length for part in parts),
        )
        queue = _Queue(parts, pace, self._stop, self.cancel_event)
        lock = threading.Lock()
        records: list[list[RequestRecord]] = [[] for _ in self._connections]
        errors: list[BaseException] = []

        def run(number: int, reader: RangeReader) -> None:
            scratch = memoryview(bytearray(0))
            failures, throttled_at = 0, 0.0  # throttles in a row with no byte on any connection
            try:
                while (taken := queue.take(number)) is not None:
                    part, tries = taken
                    try:
                        scratch = self._read_part(reader, part, tries, scratch, on_data)
                    except GiveBack as back:
                        queue.give_back(part)
                        failures = failures + 1 if pace.last_byte <= throttled_at else 1
                        throttled_at = time.monotonic()
                        url = part.facts.object_url()
                        reader.back_off(url, back.transient, failures, pace.last_byte)
                        continue
                    queue.done(part)
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
            RangeReader(conn, n, self.policy, self.cancel_event, recorder(n), self._stop, pace)
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
        done = [r for own in records for r in own]
        if errors:
            cancelled = [e for e in errors if isinstance(e, LoadCancelled)]
            raise with_throttles(cancelled[0] if cancelled else errors[0], done)
        if self.cancel_event.is_set() and not queue.drained:
            raise LoadCancelled("the read was cancelled")
        return ReadStats.of(done, len(self._connections))

    def _read_part(
        self,
        reader: RangeReader,
        part: Part,
        tries: int,
        scratch: memoryview,
        on_data: DataSink | None,
    ) -> memoryview:
        """One part read into its targets, or through ``scratch`` (grown as it needs, to at
        most ``scratch_bytes``), which it returns for the next."""
        url = part.facts.object_url()
        expected = Expected(part.facts.size, part.facts.etag)
        if part.targets is not None:
            reader.read(url, part.offset, part.targets, expected, on_data, tries)
            return scratch
        # At most scratch_bytes, and no more than a part needs.
        if len(scratch) < min(self.scratch_bytes, part.length):
            scratch = memoryview(bytearray(min(self.scratch_bytes, part.length)))
        # One request per part, its body passed through the scratch memory again and again:
        # the same buffer as every target in turn.
        full, rest = divmod(part.length, len(scratch))
        targets = (scratch,) * full + ((scratch[:rest],) if rest else ())
        reader.read(url, part.offset, targets, expected, on_data, tries)
        return scratch

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


class _Queue:
    """The parts to read, handed out under the pace: a reader takes the next when its number
    is below the requests allowed in flight, joined with the parts that follow it in the same
    object up to the pace's part size. A throttled part comes back in its place in the order
    (before every part not yet taken), to be joined with its neighbours when asked again. A
    reader waits (polling the stop and the cancel) while parts are out that may come back."""

    def __init__(
        self, parts: Sequence[Part], pace: Pace, stop: threading.Event, cancel: threading.Event
    ) -> None:
        self._waiting: deque[tuple[int, Part, int]] = deque(
            (number, part, 0) for number, part in enumerate(parts)
        )  # (place in the order, part, tries so far)
        self._back: list[tuple[int, Part, int]] = []  # given back: a heap by place
        self._out: dict[int, list[tuple[int, Part, int]]] = {}  # taken, by the joined part
        self.pace, self.stop, self.cancel = pace, stop, cancel
        self._changed = pace.changed  # one lock for the queue and the pace

    @property
    def drained(self) -> bool:
        with self._changed:
            return not self._waiting and not self._back and not self._out

    def _next(self) -> tuple[int, Part, int] | None:
        if self._back:
            return self._back[0]
        return self._waiting[0] if self._waiting else None

    def _pop(self) -> tuple[int, Part, int]:
        return heapq.heappop(self._back) if self._back else self._waiting.popleft()

    def take(self, number: int) -> tuple[Part, int] | None:
        """The next part (joined) and the most tries of what it joins; None when every part
        is read, or the read stops."""
        with self._changed:
            while True:
                if self.stop.is_set() or self.cancel.is_set():
                    return None
                following = self._next()
                if following is None and not self._out:
                    return None
                if following is not None and number < self.pace.allowed:
                    break
                self._changed.wait(_POLL_S)
            joined = [self._pop()]
            length = joined[0][1].length
            while (following := self._next()) is not None:
                if not _follows(joined[-1][1], following[1]):
                    break
                if length + following[1].length > self.pace.part:
                    break
                joined.append(self._pop())
                length += following[1].length
            part = _joined([entry[1] for entry in joined])
            self._out[id(part)] = joined
            return part, max(entry[2] for entry in joined)

    def done(self, part: Part) -> None:
        with self._changed:
            self._out.pop(id(part), None)
            self._changed.notify_all()

    def give_back(self, part: Part) -> None:
        """``part`` (as ``take`` gave it) was throttled before any of it arrived."""
        with self._changed:
            for place, each, tries in self._out.pop(id(part), []):
                heapq.heappush(self._back, (place, each, tries + 1))
            self._changed.notify_all()


def _follows(part: Part, following: Part) -> bool:
    """``following`` starts where ``part`` ends, in the same object, kept or discarded alike."""
    return (
        following.facts == part.facts
        and following.offset == part.offset + part.length
        and (following.targets is None) == (part.targets is None)
    )


def _joined(parts: list[Part]) -> Part:
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    length = sum(part.length for part in parts)
    if first.targets is None:
        return Part(first.facts, first.offset, length)
    targets = tuple(view for part in parts for view in part.targets or ())
    return Part(first.facts, first.offset, length, targets)


def with_throttles(error: BaseException, records: list[RequestRecord]) -> BaseException:
    """``error``; a throttle's saying how many requests the bucket throttled of how many and
    what arrived meanwhile (the bucket's rate, not a single request, failed the read)."""
    if not isinstance(error, StorageThrottledError) or not records:
        return error
    throttled = sum(1 for r in records if r.outcome == "throttled")
    arrived = sum(r.received for r in records)
    got = human_bytes(arrived) if arrived else "nothing"
    counted = f"{error.problem}; {throttled} of {len(records)} requests throttled, {got} arrived"
    return StorageThrottledError(error.url, counted, error.status, error.code)


def _flat(memory: memoryview) -> memoryview:
    view = memoryview(memory)
    if view.nbytes == 0:
        return memoryview(bytearray(0))
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")
