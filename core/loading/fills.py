"""Which bytes of each tensor a load filled, and the proof that they tile every tensor exactly.

A strategy that skips bytes or reads some twice is caught at the end instead of reporting a
fast, false number. Pieces may arrive in any order and from any thread; each thread extends
its own run of a tensor in order (so its crc32 streams on), and the runs must tile the tensor.
Most tensors arrive whole, in one piece: those cost a bit and a crc in two arrays, not a run
object, so the state of a million-tensor load stays small. Runs are made only for the tensors
a load filled, so a worker handed a million tensors it may fill (shared work) holds state only
for those it did. A worker that shared its work reports its spans as one array of rows
(``Fills.rows``); the parent checks that all workers' rows tile the model (``tiled_checksums``).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Sequence

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.checksum import crc32_combine
from modelmon.core.model.records import Model

# Bytes [start, end) of one tensor and their crc32 (0 without verify).
Span = tuple[int, int, int]
ROW = 4  # a span row: tensor, start, end, crc32


class _Run:
    """Bytes [start, end) of one tensor, filled in order by one thread, and their crc32."""

    __slots__ = ("crc", "end", "start")

    def __init__(self, start: int, end: int | None = None, crc: int = 0) -> None:
        self.start = start
        self.end = start if end is None else end
        self.crc = crc


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


class Fills:
    """The fill state of ``indexes`` (tensors of ``model``); thread-safe."""

    def __init__(self, model: Model, indexes: Sequence[int], verify: bool) -> None:
        self.model = model
        self.indexes = indexes
        self.verify = verify
        count = len(model.extents)
        # Which of the model's tensors are this sink's: a strategy filling another is wrong.
        self._mine = np.zeros(count, dtype=np.bool_)
        self._mine[np.asarray(indexes, dtype=np.int64)] = True
        self._whole = np.zeros(count, dtype=np.bool_)  # filled in one piece
        self._whole_crc = np.zeros(count if verify else 0, dtype=np.uint32)
        self._whole_bytes = 0
        self._runs: dict[int, list[_Run]] = {}  # the tensors filled otherwise
        self._open: dict[tuple[int, int], _Run] = {}  # (tensor, end) → the run ending there
        self._lock = threading.Lock()

    @property
    def filled_bytes(self) -> int:
        with self._lock:
            runs = sum(run.end - run.start for runs in self._runs.values() for run in runs)
            return self._whole_bytes + runs

    def _runs_of(self, index: int) -> list[_Run]:
        """Tensor ``index``'s runs (the caller holds the lock); a KeyError if not this sink's."""
        runs = self._runs.get(index)
        if runs is None:
            if not self._mine[index]:
                raise KeyError(index)
            runs = self._runs[index] = []
        return runs

    def whole(self, index: int, length: int, crc: int) -> bool:
        """Tensor ``index`` arrived whole; False if it had already been filled at all (then it
        is kept as one more run, so the check names what was read twice)."""
        with self._lock:
            if not self._mine[index]:
                raise KeyError(index)
            if self._whole[index] or index in self._runs:
                self._runs_of(index).append(_Run(0, length, crc))
                return False
            self._whole[index] = True
            if self.verify:
                self._whole_crc[index] = crc
            self._whole_bytes += length
            return True

    def filled(self, index: int, start: int, data: memoryview | bytes) -> None:
        """``data`` now holds bytes [start, start+len) of tensor ``index``: any order, any
        thread. A piece continuing a run extends it (its crc streams on), any other starts one."""
        end = start + len(data)
        if start == 0 and end == self.model.extents[index].length:
            self.whole(index, end, zlib.crc32(data) if self.verify else 0)
            return
        with self._lock:
            run = self._open.pop((index, start), None)
            if run is None:
                run = _Run(start)
                self._runs_of(index).append(run)
        if self.verify:
            run.crc = zlib.crc32(data, run.crc)
        run.end = end
        with self._lock:
            self._open[(index, run.end)] = run

    def spans(self, indexes: Sequence[int] | None = None) -> dict[int, list[Span]]:
        """Per tensor, the spans filled (call once the readers have stopped): of ``indexes``,
        by default every tensor of the sink's."""
        extents = self.model.extents
        with self._lock:
            runs, whole, crcs = self._runs, self._whole, self._whole_crc
            found: dict[int, list[Span]] = {}
            for index in self.indexes if indexes is None else indexes:
                mine = [(run.start, run.end, run.crc) for run in runs.get(index, ())]
                if whole[index]:
                    mine.append((0, extents[index].length, int(crcs[index]) if self.verify else 0))
                found[index] = mine
            return found

    def each_whole(self) -> bool:
        """Whether every tensor arrived in one piece, once: the usual outcome, told without a
        list of spans per tensor."""
        with self._lock:
            return not self._runs and int(np.count_nonzero(self._whole)) == len(self.indexes)

    def check(self, complete: bool = True) -> None:
        """Every tensor's spans tile it exactly, or a LoadError names the first that does not.
        ``complete=False``: only that no byte was filled twice (a share of shared work)."""
        if complete and self.each_whole():
            return
        # A tensor that arrived whole, once, has no run: only the others can overlap.
        with self._lock:
            others = None if complete else sorted(self._runs)
        check_spans(self.model, self.spans(others), complete)

    def checksums(self) -> tuple[tuple[str, int], ...]:
        """Per-tensor crc32 (after ``check``): the spans' crcs combined in order."""
        return span_checksums(self.model, self.spans())

    def rows(self) -> np.ndarray:
        """(tensor, start, end, crc32) of every span filled, one int64 row each: what a worker
        that shared its work with others reports, so the parent can check the whole model."""
        whole = np.flatnonzero(self._whole)
        lengths = np.fromiter(
            (self.model.extents[i].length for i in whole.tolist()), np.int64, len(whole)
        )
        crcs = self._whole_crc[whole] if self.verify else np.zeros(len(whole), np.int64)
        found = [np.stack([whole, np.zeros(len(whole), np.int64), lengths, crcs], axis=1)]
        parts = [(i, r.start, r.end, r.crc) for i, runs in self._runs.items() for r in runs]
        if parts:
            found.append(np.asarray(parts, dtype=np.int64))
        return np.concatenate(found).astype(np.int64, copy=False)


def tiled_checksums(model: Model, filled: list[np.ndarray], verify: bool) -> dict[str, int]:
    """The span rows (``Fills.rows``) several workers filled tile every tensor of ``model``
    exactly, or a LoadError says where not; the per-tensor crc32s combined from them when
    ``verify``. Checked over whole columns: a million tensors take no loop of Python's."""
    rows = np.concatenate(
        [np.asarray(f, np.int64).reshape(-1, ROW) for f in filled] or [np.zeros((0, ROW), np.int64)]
    )
    rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    index, start, end = rows[:, 0], rows[:, 1], rows[:, 2]
    count = len(model.extents)
    lengths = np.fromiter((e.length for e in model.extents), np.int64, count)
    first = np.ones(len(rows), dtype=np.bool_)
    first[1:] = index[1:] != index[:-1]
    last = np.ones(len(rows), dtype=np.bool_)
    last[:-1] = first[1:]
    follows = np.flatnonzero(~first)
    tiled = (
        bool(np.all(end >= start))
        and np.array_equal(index[first], np.arange(count))
        and bool(np.all(start[first] == 0))
        and bool(np.all(start[follows] == end[follows - 1]))
        and np.array_equal(end[last], lengths)
    )
    if not tiled or (verify and len(follows)):  # the slow path names what is wrong, combines
        spans: dict[int, list[Span]] = {i: [] for i in range(count)}
        for tensor, begin, stop, crc in rows.tolist():
            spans[tensor].append((begin, stop, crc))
        check_spans(model, spans)
        return dict(span_checksums(model, spans)) if verify else {}
    if not verify:
        return {}
    return dict(zip((e.name for e in model.extents), rows[:, 3].tolist(), strict=True))


def shared_work_checksums(
    model: Model, spans: Iterable[np.ndarray | None], verify: bool
) -> tuple[dict[str, int], str | None]:
    """The outcome of ``tiled_checksums`` over the spans the workers that shared their work
    reported: the per-tensor crc32s (when ``verify``) and no failure, or none and the run's
    failure, saying where the spans do not tile the model."""
    filled = [rows for rows in spans if rows is not None]
    try:
        return tiled_checksums(model, filled, verify), None
    except LoadError as exc:
        return {}, f"the workers' shared work: {exc}"
