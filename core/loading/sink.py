"""Where loaded bytes go, and the proof that every byte was touched.

``TensorSink`` hands out destination memory piece by piece (the tensor's own array, or a
bounded scratch buffer in discard mode), keeps a per-tensor crc32 when asked, and tracks which
bytes of each tensor have been filled: a strategy that skips bytes or reads some twice is
caught at the end (``check_complete``) instead of reporting a fast, false number.
"""

from __future__ import annotations

import mmap
import threading
import zlib
from collections.abc import Sequence

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.checksum import crc32_combine
from modelmon.core.model.records import Model, TensorExtent, collector_paused

_ml_dtypes_loaded = False
_dtypes: dict[str, np.dtype] = {}  # asked once per tensor: a million times for some models


def array_dtype(name: str) -> np.dtype:
    """numpy dtype of a loaded tensor; bfloat16 and float8 come from ml_dtypes."""
    global _ml_dtypes_loaded
    known = _dtypes.get(name)
    if known is not None:
        return known
    try:
        dtype = np.dtype(name)
    except TypeError:
        if _ml_dtypes_loaded:
            raise
        import ml_dtypes  # noqa: F401  (registers bfloat16, float8_* with numpy)

        _ml_dtypes_loaded = True
        dtype = np.dtype(name)
    _dtypes[name] = dtype
    return dtype


PAGE = mmap.PAGESIZE
# Tensors at least this big get their own anonymous mapping (see ``allocate``); smaller ones
# come from numpy, so a model of 100 000 small tensors does not hit the kernel's map count.
OWN_MAPPING_MIN_BYTES = 1 << 20
# Tensors smaller than this share one mapping, the sink's arena (``_Arena``).
TINY_BYTES = 64 << 10
ARENA_ALIGN = 16  # numpy's own allocations are 16-byte aligned


def allocate(extent: TensorExtent) -> np.ndarray:
    """A fresh, uninitialised array for ``extent``, laid out for direct reads.

    Big tensors live in their own anonymous mapping, placed so that the array's address is
    congruent to the tensor's file offset modulo the page size: an aligned O_DIRECT read of the
    file then lands straight in the array. The mapping is freed with the array. It also keeps
    numpy's MADV_HUGEPAGE off these pages: measured on this project's VMs, huge-page faults
    (with compaction) made filling fresh arrays 2-5x slower than 4 KiB faults.
    """
    dtype = array_dtype(extent.array_dtype)
    if extent.length < OWN_MAPPING_MIN_BYTES:
        array = np.empty(extent.array_shape, dtype=dtype)
    else:
        lead = extent.offset % PAGE
        memory = mmap.mmap(-1, lead + extent.length, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        flat = np.frombuffer(memory, dtype=np.uint8, count=extent.length, offset=lead)
        array = flat.view(dtype).reshape(extent.array_shape)
    if array.nbytes != extent.length:
        raise LoadError(
            f"{extent.name}: array of {array.nbytes} bytes for {extent.length}-byte extent"
        )
    return array


class _Run:
    """Bytes [start, end) of one tensor, filled in order by one thread, and their crc32."""

    __slots__ = ("crc", "end", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.end = start
        self.crc = 0


# Bytes [start, end) of one tensor and their crc32 (0 without verify).
Span = tuple[int, int, int]


def check_spans(model: Model, spans: dict[int, list[Span]], complete: bool = True) -> None:
    """The spans of each tensor tile it exactly (``complete``: all of it; else no byte twice),
    or a LoadError names the first that does not."""
    for index, mine in spans.items():
        extent = model.extents[index]
        position = 0
        for start, end, _ in sorted(mine):
            if start < position or (complete and start > position):
                what = "skipped" if start > position else "read twice"
                raise LoadError(
                    f"{extent.name}: bytes {min(start, position)}-"
                    f"{max(start, position)} {what} (strategy read them wrongly)"
                )
            position = end
        if complete and position != extent.length:
            raise LoadError(
                f"{extent.name}: {position} of {extent.length} bytes loaded "
                "(strategy skipped bytes)"
            )


def span_checksums(model: Model, spans: dict[int, list[Span]]) -> tuple[tuple[str, int], ...]:
    """Per-tensor crc32 of complete spans (after ``check_spans``): combined in order."""
    result = []
    for index, mine in spans.items():
        crc = 0
        for start, end, part in sorted(mine):
            crc = crc32_combine(crc, part, end - start)
        result.append((model.extents[index].name, crc))
    return tuple(result)


def tiled_checksums(
    model: Model, filled: list[tuple[tuple[int, int, int, int], ...]], verify: bool
) -> dict[str, int]:
    """The spans (tensor, start, end, crc32) several workers filled tile every tensor of
    ``model`` exactly, or a LoadError says where not; the per-tensor crc32s combined from
    them when ``verify``."""
    spans: dict[int, list[Span]] = {i: [] for i in range(len(model.extents))}
    for worker_spans in filled:
        for index, start, end, crc in worker_spans:
            spans[index].append((start, end, crc))
    check_spans(model, spans)
    return dict(span_checksums(model, spans)) if verify else {}


class _Arena:
    """One anonymous mapping for every tiny tensor of a sink, each at a 16-byte aligned
    offset. A model of a million tensors of a few bytes each then costs no allocation, array
    or memoryview per tensor while it loads; an array is made only when one is asked for.
    Its pages are mapped lazily, like every other array's: untouched slots cost nothing."""

    def __init__(self, model: Model, indexes: Sequence[int]) -> None:
        extents = model.extents
        lengths = np.fromiter((extents[i].length for i in indexes), np.int64, len(indexes))
        tiny = lengths < TINY_BYTES
        slots = (lengths + (ARENA_ALIGN - 1)) // ARENA_ALIGN * ARENA_ALIGN * tiny
        ends = np.cumsum(slots)
        # Per model extent, where its slot starts, or -1 (not tiny, or not this sink's).
        offsets = np.full(len(extents), -1, dtype=np.int64)
        offsets[np.asarray(indexes, dtype=np.int64)[tiny]] = (ends - slots)[tiny]
        self.offsets: list[int] = offsets.tolist()
        size = int(ends[-1]) if len(ends) else 0
        self.memory = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        self.view = memoryview(self.memory)

    def array(self, extent: TensorExtent, at: int) -> np.ndarray:
        flat = np.frombuffer(self.memory, dtype=np.uint8, count=extent.length, offset=at)
        return flat.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)


class TensorSink:
    """Destination memory and fill tracking for ``indexes``. ``lazy``: allocate a tensor's
    array when its first piece is asked for (a worker process that draws work from a queue
    shared with others fills only some of the tensors it may be handed)."""

    def __init__(
        self,
        model: Model,
        indexes: Sequence[int],
        *,
        keep: bool,
        verify: bool,
        scratch_bytes: int,
        lazy: bool = False,
    ) -> None:
        self.model = model
        self.keep = keep
        self.verify = verify
        self.scratch_bytes = scratch_bytes
        self.arrays: dict[int, np.ndarray] = {}
        self._open: dict[tuple[int, int], _Run] = {}  # (tensor, end) → the run ending there
        self._views: dict[int, memoryview] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        with collector_paused():  # a million small tensors: no collection walks them all
            # Per tensor, the runs of bytes filled so far. Pieces may arrive in any order and
            # from any thread; each thread extends its own run in order (so its crc streams),
            # and ``check_complete`` proves the runs tile the tensor exactly: no byte skipped
            # or twice.
            self._runs: dict[int, list[_Run]] = {index: [] for index in indexes}
            self._arena = _Arena(model, indexes) if keep else None
            if keep and not lazy:
                for index in indexes:
                    # Pages are mapped lazily: the first write faults them in, which is part
                    # of loading for any real loader too, so it is inside the timed region.
                    if self._arena is None or self._arena.offsets[index] < 0:
                        self._allocate(index)

    @property
    def bytes_filled(self) -> int:
        with self._lock:
            return sum(run.end - run.start for runs in self._runs.values() for run in runs)

    def scratch(self, length: int) -> memoryview:
        """A per-thread buffer, reused: for discard mode and for bytes between tensors."""
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < length:
            # Its own mapping, not the heap: unmapped when dropped, so a chunk-sized buffer
            # never raises malloc's thresholds and stays behind as RSS after the load.
            size = max(length, self.scratch_bytes, 1)
            memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            buffer = memoryview(memory)
            self._local.buffer = buffer
        return buffer[:length]

    def piece(self, index: int, start: int, length: int) -> memoryview:
        """Writable memory for bytes [start, start+length) of tensor ``index``."""
        if index < 0 or self._arena is None:
            return self.scratch(length)
        at = self._arena.offsets[index]
        if at >= 0:
            return self._arena.view[at + start : at + start + length]
        view = self._views.get(index)
        if view is None:  # lazy: allocated on first use
            with self._lock:
                view = self._views.get(index)
                if view is None:
                    view = self._allocate(index)
        return view[start : start + length]

    def _allocate(self, index: int) -> memoryview:
        array = allocate(self.model.extents[index])
        self.arrays[index] = array
        view = self._views[index] = array.reshape(-1).view(np.uint8).data
        return view

    def scatter_views(self, pieces: Sequence[tuple[int, int, int]]) -> list[memoryview]:
        """Distinct memory for every (extent, start, length) piece of one vectored read.

        Discard mode slices one scratch buffer so the pieces don't overwrite each other before
        they are checksummed.
        """
        if self.keep:
            return [self.piece(index, start, length) for index, start, length in pieces]
        whole = self.scratch(sum(length for _, _, length in pieces))
        views, position = [], 0
        for _, _, length in pieces:
            views.append(whole[position : position + length])
            position += length
        return views

    def filled_piece(self, index: int, start: int, data: memoryview | bytes) -> None:
        """Record that ``data`` now holds bytes [start, start+len) of tensor ``index``.

        Any order, any thread: a piece continuing a run extends it (its crc streams on), any
        other piece starts a new run.
        """
        if index < 0:
            return
        end = start + len(data)
        if start == 0 and end == self.model.extents[index].length:
            # A whole tensor in one piece (most tensors of a many-tensor model): its run is
            # complete, nothing can continue it.
            whole = _Run(0)
            whole.end = end
            if self.verify:
                whole.crc = zlib.crc32(data)
            with self._lock:
                self._runs[index].append(whole)
            return
        with self._lock:
            run = self._open.pop((index, start), None)
            if run is None:
                run = _Run(start)
                self._runs[index].append(run)
        if self.verify:
            run.crc = zlib.crc32(data, run.crc)
        run.end = end
        with self._lock:
            self._open[(index, run.end)] = run

    def adopt(self, index: int, array: np.ndarray) -> None:
        """Take a whole tensor produced elsewhere (the library strategy's own read)."""
        extent = self.model.extents[index]
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if flat.nbytes != extent.length:
            raise LoadError(
                f"{extent.name}: library returned {flat.nbytes} bytes, expected {extent.length}"
            )
        if self._runs[index]:
            raise LoadError(f"{extent.name}: loaded twice")
        run = _Run(0)
        run.end = extent.length
        if self.verify:
            run.crc = zlib.crc32(flat.data)
        if self.keep:
            shaped = flat.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)
            self.arrays[index] = shaped
        self._runs[index].append(run)

    def place(self, index: int, data: np.ndarray) -> None:
        """Make ``data`` (contiguous bytes the strategy owns, e.g. a slice of a file mapping)
        tensor ``index``'s array as it is: a view, never a copy. Nothing counts as loaded
        until the strategy reports each piece it touched with ``filled_piece``."""
        extent = self.model.extents[index]
        if data.dtype != np.uint8 or data.ndim != 1 or not data.flags.c_contiguous:
            raise LoadError(f"{extent.name}: placed memory is not contiguous bytes")
        if data.nbytes != extent.length:
            raise LoadError(f"{extent.name}: {data.nbytes} bytes placed, expected {extent.length}")
        if not self.keep:
            return
        shaped = data.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)
        with self._lock:
            self.arrays[index] = shaped
            self._views[index] = data.data

    def spans(self) -> dict[int, list[Span]]:
        """Per tensor, the spans filled so far (call once the readers have stopped)."""
        with self._lock:
            return {
                index: [(run.start, run.end, run.crc) for run in runs]
                for index, runs in self._runs.items()
            }

    def filled_spans(self) -> tuple[tuple[int, int, int, int], ...]:
        """(tensor, start, end, crc32) of every span filled: what a worker that shared its
        work with others reports, so the parent can check and checksum the whole model."""
        return tuple((index, *span) for index, spans in self.spans().items() for span in spans)

    def check_complete(self, complete: bool = True) -> None:
        """Every tensor's runs tile it exactly, or a LoadError names the first that does not.
        ``complete=False``: only that no byte was filled twice (a share of shared work)."""
        with collector_paused():
            if complete and self._each_whole():
                return
            check_spans(self.model, self.spans(), complete)

    def _each_whole(self) -> bool:
        """Whether every tensor was filled in one run from its first byte to its last: the
        usual outcome, told without a list of spans per tensor."""
        extents = self.model.extents
        with self._lock:
            return all(
                len(runs) == 1 and runs[0].start == 0 and runs[0].end == extents[index].length
                for index, runs in self._runs.items()
            )

    def checksums(self) -> tuple[tuple[str, int], ...]:
        """Per-tensor crc32 (after ``check_complete``): the runs' crcs combined in order."""
        return span_checksums(self.model, self.spans())

    def array(self, index: int) -> np.ndarray:
        """Tensor ``index``'s array (once loaded): its own, placed, or a view of the arena."""
        array = self.arrays.get(index)
        if array is not None:
            return array
        if self._arena is None or self._arena.offsets[index] < 0:
            raise KeyError(index)
        return self._arena.array(self.model.extents[index], self._arena.offsets[index])

    def release(self) -> None:
        self._views.clear()
        self.arrays.clear()
        self._arena = None  # its mapping goes with the last array made from it
