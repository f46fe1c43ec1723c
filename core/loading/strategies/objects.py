"""ranged, ranged-stream: a model in object storage (``s3://``, ``https://``) read by
concurrent ranged GETs straight into the tensors' arrays.

Each reader thread owns one connection (``threads`` connections per worker) and takes the
next part of ``chunk`` bytes as it finishes one, so ``threads`` GETs are in flight: in file
order (``ranged``), or in the order the model uses its blocks (``ranged-stream``: the first
layers arrive first, as a loader that hands layers over as they arrive wants). Discard mode
passes each body through a bounded buffer per connection, for a model larger than RAM.

The bytes are tracked as they arrive (``TensorSink.filled_piece``, crc32 with ``--verify``:
the same checksum as the file's on a disk), and every request is recorded: in the run's read
log (the live plot, the blocks' timings) and whole (``RequestRecord``) for the result's
request figures. Every read is made ``If-Match`` the ETag seen when the model was opened: an
object replaced mid-load fails the load, saying so.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, ClassVar

from modelmon.core.errors import LoadError
from modelmon.core.loading.reads import new_descriptor_id
from modelmon.core.loading.strategies.base import Strategy, WorkerContext, register
from modelmon.core.loading.strategies.stream import block_ordered_reads
from modelmon.core.model.plan import Read, coalesce
from modelmon.core.model.records import Model
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.records import RequestRecord

if TYPE_CHECKING:
    from modelmon.core.storage.connection import Store
    from modelmon.core.storage.reader import ObjectReader, Part


def remote_facts(model: Model) -> list[ObjectFacts]:
    """Every file's object facts, in the model's file order (LoadError for a local file)."""
    facts = []
    for file in model.files:
        if file.remote is None:
            raise LoadError(f"{file.path} is a file, not an object: use a file strategy")
        facts.append(file.remote)
    return facts


def store_key(url: str) -> str:
    """The store an object is read through: its scheme and bucket (or host)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.partition('/')[0]}"


class ArrivalMap:
    """Where each arriving chunk of an object goes: the tensor pieces a chunk at (url,
    offset) covers, found by bisection over the planned reads' pieces, so the sink counts
    (and checksums) every byte as it arrives, in any order, from any connection."""

    def __init__(self, model: Model, reads: Iterable[Read]) -> None:
        self._file_of = {file.path: number for number, file in enumerate(model.files)}
        rows: dict[int, list[tuple[int, int, int, int]]] = {}
        for read in reads:
            at = read.offset
            for piece in read.pieces:
                if piece.extent >= 0:
                    rows.setdefault(read.file, []).append(
                        (at, piece.length, piece.extent, piece.start)
                    )
                at += piece.length
        self._rows = {file: sorted(own) for file, own in rows.items()}
        self._starts = {file: [row[0] for row in own] for file, own in self._rows.items()}

    def pieces(self, url: str, offset: int, length: int) -> list[tuple[int, int, int, int]]:
        """(extent, start in it, start in the chunk, length) of each piece the chunk covers."""
        file = self._file_of[url]
        rows, starts = self._rows.get(file, []), self._starts.get(file, [])
        found = []
        at = max(0, bisect.bisect_right(starts, offset) - 1)
        end = offset + length
        while at < len(rows) and rows[at][0] < end:
            start, size, extent, inner = rows[at]
            low, high = max(start, offset), min(start + size, end)
            if low < high:
                found.append((extent, inner + low - start, low - offset, high - low))
            at += 1
        return found


class ObjectStrategy(Strategy):
    """Concurrent ranged GETs of ``chunk`` bytes over ``threads`` connections per worker."""

    uses = frozenset({"workers", "threads", "chunk", "verify", "discard", "cache"})
    shares_work = False  # each worker's readers drain its own parts
    reads_objects = True
    in_block_order: ClassVar[bool] = False

    @classmethod
    def descriptors(cls, files: int, readers: int) -> int:
        return readers  # one socket per connection, whatever the number of objects

    @classmethod
    def cannot_load(cls, model: Model) -> str | None:
        local = [file.path for file in model.files if file.remote is None]
        if local:
            return f"{local[0]} is a file: it reads objects (s3://, https://) by ranged GETs"
        stores = {store_key(file.path) for file in model.files}
        if len(stores) > 1:
            return f"its files live in {len(stores)} places ({', '.join(sorted(stores))})"
        return None

    def planned_reads(self, ctx: WorkerContext) -> list[Read]:
        if self.in_block_order:
            return [read for _, read in block_ordered_reads(ctx)[0]]
        return coalesce(ctx.model, ctx.indexes, ctx.options.chunk)

    def __init__(self) -> None:
        self._store: Store | None = None
        self._reader: ObjectReader | None = None
        self._cancel: _StopEvent | None = None
        self._reads: list[Read] = []

    def prepare(self, ctx: WorkerContext) -> None:
        """The store and one connection per reader, opened before the load is timed (as a
        server opens its clients once); the parts are cut then too."""
        facts = remote_facts(ctx.model)
        self._reads = self.planned_reads(ctx)
        if not self._reads:
            return
        # The HTTP stack (http.client, ssl, the S3 signer) is imported by the workers that
        # read objects only: every load worker imports this module, a file's workers never
        # need it, and each spent a sixth of its start importing it.
        from modelmon.core.storage.objects import open_store
        from modelmon.core.storage.reader import ObjectReader

        connections = max(1, min(ctx.options.threads, len(self._reads)))
        self._cancel = _StopEvent(ctx)
        self._store = open_store(facts[0].object_url())
        self._reader = ObjectReader(self._store, connections, cancel=self._cancel)

    def release(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._store is not None:
            self._store.close()
        self._reader = self._store = None

    def run(self, ctx: WorkerContext) -> None:
        reader, cancel = self._reader, self._cancel
        if reader is None or cancel is None:
            return  # nothing to read
        facts = remote_facts(ctx.model)
        arrivals = ArrivalMap(ctx.model, self._reads)
        parts = [self._part(ctx, facts[read.file], read) for read in self._reads]
        ids = [new_descriptor_id() for _ in range(reader.connections)]
        file_of = {fact.url: number for number, fact in enumerate(facts)}
        first_reader = ctx.worker * ctx.options.threads

        def on_record(entry: RequestRecord) -> None:
            file = file_of[entry.url]
            ctx.requests.append(
                entry._replace(connection=first_reader + entry.connection, reader=ctx.worker)
            )
            if entry.received:
                ctx.recorder.reading_as(entry.connection)
                ctx.recorder.reading_through(file, ids[entry.connection])
                ctx.recorder.record(file, entry.first, entry.received, entry.sent_ns, entry.end_ns)

        def on_data(url: str, offset: int, chunk: memoryview) -> None:
            for extent, start, at, length in arrivals.pieces(url, offset, len(chunk)):
                ctx.sink.filled_piece(extent, start, chunk[at : at + length])

        watcher = threading.Thread(
            target=cancel.watch, args=(reader,), name="modelmon-object-stop", daemon=True
        )
        watcher.start()
        try:
            reader.read(parts, on_record=on_record, on_data=on_data)
        finally:
            cancel.finished.set()
            watcher.join()

    @staticmethod
    def _part(ctx: WorkerContext, facts: ObjectFacts, read: Read) -> Part:
        from modelmon.core.storage.reader import Part  # imported by prepare already

        if not ctx.sink.keep:
            return Part(facts, read.offset, read.length)
        pieces = [(p.extent, p.start, p.length) for p in read.pieces]
        return Part(facts, read.offset, read.length, tuple(ctx.sink.scatter_views(pieces)))


class _StopEvent(threading.Event):
    """The reader's cancel event, set when the run's stop flag is (a flag in shared memory
    the workers poll): ``watch`` polls it and cancels the reader, which also shuts the
    sockets of reads in progress."""

    POLL_S = 0.05

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__()
        self.ctx = ctx
        self.finished = threading.Event()

    def watch(self, reader: ObjectReader) -> None:
        while not self.finished.wait(self.POLL_S):
            if self.ctx.stop.is_set():
                self.set()
                reader.cancel()
                return


@register
class RangedStrategy(ObjectStrategy):
    name = "ranged"
    summary = (
        "an object read by concurrent ranged GETs of chunk bytes, one connection per "
        "thread, in file order, straight into the arrays"
    )


@register
class RangedStreamStrategy(ObjectStrategy):
    name = "ranged-stream"
    summary = (
        "an object read by concurrent ranged GETs in the order the model uses its blocks "
        "(embeddings, layers, head): first layers first"
    )
    in_block_order = True
