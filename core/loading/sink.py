"""Where loaded bytes go, and the proof that every byte was touched.

``TensorSink`` hands out destination memory piece by piece (the tensor's own array, or a
bounded scratch buffer in discard mode), keeps a per-tensor crc32 when asked, and tracks which
bytes of each tensor have been filled (``loading.fills``): a strategy that skips bytes or
reads some twice is caught at the end (``check_complete``) instead of reporting a fast, false
number.
"""

from __future__ import annotations

import contextlib
import mmap
import threading
import zlib
from collections.abc import Sequence

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.fills import Fills, Span
from modelmon.core.loading.shared_copy import SharedCopy, tensor_view
from modelmon.core.model.records import Model, TensorExtent, collector_paused
from modelmon.core.model.tensor_parallel import KeptPart

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
        parts: dict[str, KeptPart] | None = None,
        shared: SharedCopy | None = None,
    ) -> None:
        self.model = model
        self.keep = keep
        self.verify = verify
        self.scratch_bytes = scratch_bytes
        self.arrays: dict[int, np.ndarray] = {}
        self._views: dict[int, memoryview] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        self.fills = Fills(model, indexes, verify)
        # Tensors read whole of which only a part is kept (a tensor-parallel rank's strided
        # part): read into a staging array, the part copied out once every byte is in.
        self._parts: dict[int, KeptPart] = {}
        if keep and parts:
            self._parts = {i: parts[e] for i in indexes if (e := model.extents[i].name) in parts}
        self._staging: dict[int, np.ndarray] = {}
        self._staged: dict[int, int] = {}  # bytes of each staged tensor in so far
        # A one-reader load's arrays: views of the node's shared copy (``shared_copy``).
        self._shared = shared.open(writable=True) if keep and shared is not None else None
        self._bases = shared.base_of() if shared is not None else {}
        with collector_paused():  # a million small tensors: no collection walks them all
            self._arena = _Arena(model, indexes) if keep and self._shared is None else None
            if keep and not lazy:
                for index in indexes:
                    # Pages are mapped lazily: the first write faults them in, which is part
                    # of loading for any real loader too, so it is inside the timed region.
                    if index in self._parts:
                        continue
                    if self._arena is None or self._arena.offsets[index] < 0:
                        self._allocate(index)

    @property
    def bytes_filled(self) -> int:
        return self.fills.filled_bytes

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
        if index < 0 or not self.keep:
            return self.scratch(length)
        if index in self._parts:
            return self._stage(index)[start : start + length].data
        arena = self._arena
        at = arena.offsets[index] if arena is not None else -1
        if arena is not None and at >= 0:
            return arena.view[at + start : at + start + length]
        view = self._views.get(index)
        if view is None:  # lazy: allocated on first use
            with self._lock:
                view = self._views.get(index)
                if view is None:
                    view = self._allocate(index)
        return view[start : start + length]

    def _stage(self, index: int) -> np.ndarray:
        """The whole-tensor staging bytes of a tensor kept in part (made on first use)."""
        staging = self._staging.get(index)
        if staging is None:
            with self._lock:
                staging = self._staging.get(index)
                if staging is None:
                    staging = allocate(self.model.extents[index]).reshape(-1).view(np.uint8)
                    self._staging[index] = staging
                    self._staged[index] = 0
        return staging

    def _staged_bytes(self, index: int, start: int, data: memoryview | bytes) -> None:
        """``data`` (bytes [start, ...) of a tensor kept in part) is in: into the staging
        bytes unless it was read there; the part is cut out once the whole tensor is in."""
        staging = self._stage(index)
        length = len(data)
        if length:
            into = staging[start : start + length]
            given = np.frombuffer(data, dtype=np.uint8)
            if given.ctypes.data != into.ctypes.data:
                into[:] = given
        with self._lock:
            self._staged[index] += length
            if self._staged[index] < staging.nbytes:
                return
            del self._staging[index], self._staged[index]
        self._keep_part(index, staging)

    def _keep_part(self, index: int, whole: np.ndarray) -> None:
        part = self._parts[index]
        rows = whole[: part.rows * part.row_bytes].reshape(part.rows, part.row_bytes)
        kept = np.ascontiguousarray(rows[:, part.start : part.stop]).reshape(-1)
        dtype = array_dtype(self.model.extents[index].array_dtype)
        with self._lock:
            self.arrays[index] = kept.view(dtype).reshape(part.array_shape)

    def _allocate(self, index: int) -> memoryview:
        extent = self.model.extents[index]
        if self._shared is not None:
            flat = tensor_view(self._shared, self._bases[extent.file], extent.offset, extent.length)
            array = flat.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)
        else:
            array = allocate(extent)
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
        """Record that ``data`` now holds bytes [start, start+len) of tensor ``index``, in any
        order, from any thread (``Fills.filled``); bytes between tensors (-1) count for none."""
        if index >= 0:
            self.fills.filled(index, start, data)
            if index in self._parts:
                self._staged_bytes(index, start, data)

    def adopt(self, index: int, array: np.ndarray) -> None:
        """Take a whole tensor produced elsewhere (the library strategy's own read)."""
        extent = self.model.extents[index]
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if flat.nbytes != extent.length:
            raise LoadError(
                f"{extent.name}: library returned {flat.nbytes} bytes, expected {extent.length}"
            )
        crc = zlib.crc32(flat.data) if self.verify else 0
        if not self.fills.whole(index, extent.length, crc):
            raise LoadError(f"{extent.name}: loaded twice")
        if index in self._parts:
            self._keep_part(index, flat)
        elif self.keep:
            shaped = flat.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)
            self.arrays[index] = shaped

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
        if index in self._parts:  # its part copied out: a view would keep all of it
            self._keep_part(index, data)
            return
        shaped = data.view(array_dtype(extent.array_dtype)).reshape(extent.array_shape)
        with self._lock:
            self.arrays[index] = shaped
            self._views[index] = data.data

    def spans(self) -> dict[int, list[Span]]:
        """Per tensor, the spans filled so far (call once the readers have stopped)."""
        return self.fills.spans()

    def filled_spans(self) -> np.ndarray:
        """(tensor, start, end, crc32) rows of every span filled: what a worker that shared
        its work reports, so the parent can check and checksum the whole model."""
        return self.fills.rows()

    def check_complete(self, complete: bool = True) -> None:
        """Every tensor's runs tile it exactly, or a LoadError names the first that does not.
        ``complete=False``: only that no byte was filled twice (a share of shared work)."""
        with collector_paused():
            self.fills.check(complete)

    def checksums(self) -> tuple[tuple[str, int], ...]:
        """Per-tensor crc32 (after ``check_complete``): the runs' crcs combined in order."""
        return self.fills.checksums()

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
        self._staging.clear()
        if self._shared is not None:  # the copy stays: the node's ranks map it
            with contextlib.suppress(BufferError):
                self._shared.close()
        self._arena = None  # its mapping goes with the last array made from it
