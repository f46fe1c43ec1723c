"""Load plan: which worker loads which tensors, and the reads that bring their bytes in.

A ``Read`` is one system call's worth of file bytes (``length`` at ``offset``), split into
``Piece`` s: the part of a tensor each stretch of it fills, so ``preadv`` can scatter one read
straight into the destination arrays with no extra copy. Bytes between tensors (GGUF alignment
padding) are pieces with ``extent == -1`` and land in a scratch buffer.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading
from collections.abc import MutableSequence, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from modelmon.core.model.records import Model, collector_paused

IOV_MAX = 1024  # Linux's limit on iovecs per preadv call
GAP_MERGE_BYTES = 64 * 1024  # reading over a small gap beats a second system call

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Piece:
    extent: int  # index into Model.extents, or -1 for bytes between tensors
    start: int  # offset of this piece inside the tensor
    length: int


@dataclass(frozen=True, slots=True)
class Read:
    file: int  # index into Model.files
    offset: int
    length: int
    pieces: tuple[Piece, ...]


def file_index(model: Model) -> dict[str, int]:
    return {f.path: i for i, f in enumerate(model.files)}


def load_order(model: Model) -> list[int]:
    """Extent indexes in file order, then offset order: the order bytes sit on storage."""
    return in_load_order(model, range(len(model.extents)))


def in_load_order(model: Model, indexes: Sequence[int]) -> list[int]:
    """``indexes`` sorted by (file, offset); a stable sort, so equal positions (empty tensors
    at one offset) keep their given order. The sort keys are made in whole-column passes
    rather than by a key function called once per tensor; a model's own order (its files in
    turn, each in offset order) is kept without a sort."""
    order = file_index(model)
    chosen = list(map(model.extents.__getitem__, indexes))
    positions: list[Any] = list(map(_OFFSET, chosen))
    if len(order) > 1:
        positions = list(zip(map(order.__getitem__, map(_FILE, chosen)), positions, strict=True))
    if all(map(operator.le, positions, itertools.islice(positions, 1, None))):
        return list(indexes)
    return list(map(indexes.__getitem__, sorted(range(len(positions)), key=positions.__getitem__)))


_OFFSET, _FILE = operator.attrgetter("offset"), operator.attrgetter("file")
_LENGTH = operator.attrgetter("length")


def split_contiguous(model: Model, indexes: Sequence[int], parts: int) -> list[list[int]]:
    """Split extents (in load order) into ``parts`` runs of nearly equal bytes.

    Cuts fall on tensor boundaries, so each tensor belongs to exactly one worker or thread:
    its checksum can then be computed front to back. A tensor goes to the part in which its
    midpoint falls.
    """
    lengths = list(map(_LENGTH, map(model.extents.__getitem__, indexes)))
    total = sum(lengths)
    if total == 0:
        return [list(indexes[part::parts]) for part in range(parts)]
    repeat = itertools.repeat
    starts = itertools.accumulate(lengths, initial=0)
    middles = map(operator.add, starts, map(operator.truediv, lengths, repeat(2)))
    shares = map(operator.truediv, map(operator.mul, middles, repeat(parts)), repeat(total))
    part_of = list(map(int, shares))
    if max(part_of, default=0) >= parts:  # a middle at the very end (an empty last tensor)
        part_of = [min(part, parts - 1) for part in part_of]
    if all(map(operator.le, part_of, itertools.islice(part_of, 1, None))):  # cut into runs
        cuts = [bisect.bisect_left(part_of, part) for part in range(parts + 1)]
        return [list(indexes[cuts[part] : cuts[part + 1]]) for part in range(parts)]
    result: list[list[int]] = [[] for _ in range(parts)]
    for part, index in zip(part_of, indexes, strict=True):
        result[part].append(index)
    return result


def partition(model: Model, workers: int, mode: str) -> list[list[int]]:
    """Deal the model's tensors to ``workers``: contiguous byte ranges or round-robin."""
    with collector_paused():
        order = load_order(model)
        if mode == "round-robin":
            return [order[w::workers] for w in range(workers)]
        return split_contiguous(model, order, workers)


def coalesce(model: Model, indexes: Sequence[int], chunk: int) -> list[Read]:
    """Reads covering the given extents: adjacent tensors merged, then cut into ``chunk`` pieces.

    Reads are in file/offset order; each is at most ``chunk`` bytes and at most IOV_MAX pieces.
    """
    with collector_paused():
        order = file_index(model)
        extents = model.extents
        ranked = in_load_order(model, indexes)
        reads: list[Read] = []
        run: list[int] = []
        for index in ranked:
            if run:
                last = extents[run[-1]]
                current = extents[index]
                same_file = last.file == current.file
                if not same_file or current.offset - last.end > GAP_MERGE_BYTES:
                    reads.extend(_cut_run(model, run, order, chunk))
                    run = []
            run.append(index)
        if run:
            reads.extend(_cut_run(model, run, order, chunk))
        return reads


def _cut_run(model: Model, run: list[int], order: dict[str, int], chunk: int) -> list[Read]:
    """Cut one gapless-or-small-gap run of tensors into reads of at most ``chunk`` bytes."""
    extents = model.extents
    file = order[extents[run[0]].file]
    reads: list[Read] = []
    pieces: list[Piece] = []
    read_start = position = extents[run[0]].offset
    read_length = 0
    for index in run:
        extent = extents[index]
        offset, length = extent.offset, extent.length
        # Stretches in file order: the small gap before the tensor (extent -1), the tensor.
        if offset > position:
            stretches: tuple[tuple[int, int], ...] = ((-1, offset - position), (index, length))
        else:
            stretches = ((index, length),)
        position = offset + length
        for stretch, stretch_length in stretches:
            done = 0  # a piece's start is where it begins inside its stretch
            while True:  # an empty tensor still gets its (empty) piece
                take = min(chunk - read_length, stretch_length - done)
                pieces.append(Piece(stretch, done, take))
                read_length += take
                done += take
                if read_length >= chunk or len(pieces) >= IOV_MAX:
                    reads.append(Read(file, read_start, read_length, tuple(pieces)))
                    read_start += read_length
                    pieces, read_length = [], 0
                if done >= stretch_length:
                    break
    if pieces:
        reads.append(Read(file, read_start, read_length, tuple(pieces)))
    return reads


@dataclass
class ShareState:
    """Where a ``ShareQueue`` keeps every reader's share (next item, end) and the lock over
    them: plain lists and a thread lock (``local``), or arrays in shared memory with a lock
    that no dead process can keep (``loading.sharing``), so the reader threads of several
    worker processes draw from one queue. ``dealt[0]`` turns 1 once the first queue over it
    dealt the starting shares."""

    next: MutableSequence[int]
    end: MutableSequence[int]
    lock: AbstractContextManager[Any]
    dealt: MutableSequence[int]

    @property
    def readers(self) -> int:
        return len(self.next)

    @classmethod
    def local(cls, readers: int) -> ShareState:
        return cls([0] * readers, [0] * readers, threading.Lock(), [0])


class ShareQueue(Generic[T]):
    """Items (reads or tensors, in file order) handed to ``readers`` threads on demand.

    Each reader starts on its own contiguous share of the bytes, as a fixed split would, and
    streams it front to back. A reader that runs out takes the back half of the largest share
    still unread (work stealing by halving), so every reader still reads long sequential runs,
    there are only a few seeks per reader, and all finish within about one item of each other
    instead of waiting on the slowest fixed share. A share of reads may be cut inside a tensor
    (the sink accepts a tensor's pieces in any order). Thread-safe; process-safe over a shared
    ``ShareState``, when every process builds its queue from the same items.
    """

    def __init__(
        self,
        items: Sequence[T],
        sizes: Sequence[int],
        readers: int,
        state: ShareState | None = None,
    ) -> None:
        self.items = list(items)
        self._sums = [0, *itertools.accumulate(sizes)]
        state = state or ShareState.local(readers)
        if state.readers != readers:
            raise ValueError(f"a share state for {state.readers} readers, not {readers}")
        self._next, self._end, self._lock = state.next, state.end, state.lock
        with self._lock:
            if not state.dealt[0]:
                total = self._sums[-1]
                bounds = [self._index_at(total * r / readers) for r in range(readers)]
                self._next[:] = bounds
                self._end[:] = [*bounds[1:], len(self.items)]
                state.dealt[0] = 1

    @classmethod
    def of_reads(
        cls, reads: Sequence[Read], readers: int, state: ShareState | None = None
    ) -> ShareQueue[Read]:
        return ShareQueue(reads, [read.length for read in reads], readers, state)

    @classmethod
    def of_tensors(
        cls, model: Model, indexes: Sequence[int], readers: int, state: ShareState | None = None
    ) -> ShareQueue[int]:
        ordered = in_load_order(model, indexes)
        return ShareQueue(ordered, [model.extents[i].length for i in ordered], readers, state)

    def _index_at(self, byte: float) -> int:
        return bisect.bisect_left(self._sums, byte, hi=len(self.items))

    def take(self, reader: int) -> T | None:
        """The next item for ``reader``, or None when every item has been handed out."""
        with self._lock:
            if self._next[reader] >= self._end[reader] and not self._steal(reader):
                return None
            item = self.items[self._next[reader]]
            self._next[reader] += 1
            return item

    def _steal(self, thief: int) -> bool:
        def unread(reader: int) -> int:
            return self._sums[self._end[reader]] - self._sums[self._next[reader]]

        victim = max(range(len(self._next)), key=unread)
        start, end = self._next[victim], self._end[victim]
        if start >= end:
            return False
        # Cut where the victim's unread bytes halve; the thief takes the back half (at least
        # one item), the victim keeps reading the front half where it is.
        cut = self._index_at(self._sums[start] + unread(victim) / 2)
        cut = min(max(cut, start + 1), end - 1) if end - start > 1 else start
        self._next[thief], self._end[thief] = cut, end
        self._end[victim] = cut
        return True


def assigned_bytes(model: Model, indexes: Sequence[int]) -> int:
    return sum(model.extents[i].length for i in indexes)


def rank_slice(model: Model, rank: int, ranks: int) -> Model:
    """The part of ``model`` that rank ``rank`` of ``ranks`` loads; ``ranks == 1``: all of it.

    Tensors are dealt round-robin in load order, not cut into contiguous stretches: a
    tensor-parallel rank holds a share of every layer, so its bytes are spread over the whole
    model. Only the files that hold its tensors remain.
    """
    if ranks == 1:
        return model
    if not 0 <= rank < ranks:
        raise ValueError(f"rank {rank} is not one of 0..{ranks - 1}")
    keep = sorted(partition(model, ranks, "round-robin")[rank])
    extents = tuple(model.extents[i] for i in keep)
    used = {extent.file for extent in extents}
    files = tuple(f for f in model.files if f.path in used)
    return Model(model.path, model.format, files, extents, model.metadata, model.kind)
