"""Work shared by the worker processes of one load: one ``ShareQueue`` state in shared memory.

Without it each worker process is dealt a fixed share of the tensors up front and the load
lasts as long as the slowest share. With it, every reader thread of every worker draws reads
(or tensors) from one queue: each starts on its own contiguous stretch and then takes the back
half of the largest stretch still unread, so the workers finish together. Every process builds
the same items from the same model and options; only the shares (two integers per reader) and
a lock are shared. A worker then fills only some of each tensor's bytes: it reports the spans
it filled (``TensorSink.filled_spans``) and the parent proves that they tile the model.

The shares live in a memfd handed to each spawned worker with its arguments (multiprocessing's
own heap would keep a descriptor open in the parent for the rest of its life).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import MutableSequence
from multiprocessing import reduction
from typing import Any, cast

import numpy as np

from modelmon.core.model.plan import ShareState

_INT = np.dtype(np.int64)


class SharedShares:
    """The parent's handle on the shares of ``readers`` reader threads in all: created before
    the workers start, passed to each in its arguments (``attach`` there), closed after."""

    def __init__(self, context: Any, readers: int) -> None:
        self.readers = readers
        self.lock = context.Lock()
        self._fd = os.memfd_create("modelmon-shares", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, self._size)  # zeros: no shares dealt yet
        self._mapping: mmap.mmap | None = None

    @property
    def _size(self) -> int:
        return _INT.itemsize * (2 * self.readers + 1)

    def __getstate__(self) -> dict[str, Any]:  # only while spawning a worker
        return {"readers": self.readers, "lock": self.lock, "fd": reduction.DupFd(self._fd)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.readers, self.lock = state["readers"], state["lock"]
        self._fd = state["fd"].detach()
        self._mapping = None

    def attach(self) -> ShareState:
        """The share state over the shared memory (once per process)."""
        self._mapping = mmap.mmap(self._fd, self._size)
        # numpy int64 arrays: item and slice assignment, len: what ShareQueue uses.
        ints = cast(MutableSequence[int], np.frombuffer(self._mapping, dtype=_INT))
        readers = self.readers
        return ShareState(
            ints[:readers], ints[readers : 2 * readers], self.lock, ints[2 * readers :]
        )

    def close(self) -> None:
        """Close the memfd (and the mapping, once no share state over it is left)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._mapping is not None:
            # A worker's own queue may still view it: the mapping then goes with the process.
            with contextlib.suppress(BufferError):
                self._mapping.close()
            self._mapping = None
