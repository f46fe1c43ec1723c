"""What a run's parent and its worker processes share in memory: the stop flag, and the shares
of one ``ShareQueue`` when the workers share their work.

Without shared work each worker process is dealt a fixed share of the tensors up front and the
load lasts as long as the slowest share. With it, every reader thread of every worker draws
reads (or tensors) from one queue: each starts on its own contiguous stretch and then takes the
back half of the largest stretch still unread, so the workers finish together. Every process
builds the same items from the same model and options; only the shares (two integers per
reader) are shared. A worker then fills only some of each tensor's bytes: it reports the spans
it filled (``TensorSink.filled_spans``) and the parent proves that they tile the model.

Nothing here can be held by a process that dies, so a worker killed at any instant (the OOM
killer's SIGKILL) never blocks the others or the parent:

- The stop flag is a word the parent writes and every reader polls (``StopFlag.is_set``): no
  lock, no wake-up to wait for.
- The queue's lock is a POSIX record lock (``fcntl``, ``F_SETLKW``) on the memfd: the kernel
  drops it when its holder exits, however it exits. A record lock belongs to a process, so a
  thread lock in each process makes its own reader threads take turns first. Not an OFD lock:
  the workers inherit one open file description of the memfd, so OFD locks would all have one
  owner (excluding nobody), and one held by a dead worker would stay held while any other
  process kept that description open. A process's POSIX locks drop when it closes *any*
  descriptor of the file: each process holds exactly one, closed only at its end.

The memory is a memfd handed to each spawned worker with its arguments (multiprocessing's own
heap would keep a descriptor open in the parent for the rest of its life).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import threading
from collections.abc import MutableSequence
from multiprocessing import reduction
from types import TracebackType
from typing import Any, cast

import numpy as np

from modelmon.core.model.plan import ShareState

_INT = np.dtype(np.int64)
STOP = 0  # index of the stop flag; the shares follow it: dealt, next[readers], end[readers]


class RecordLock:
    """Mutual exclusion among every thread of every process holding descriptor ``fd`` of one
    file: a thread lock in this process, then a POSIX record lock over the whole file."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._threads = threading.Lock()

    def __enter__(self) -> RecordLock:
        self._threads.acquire()
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)  # waits; retried by Python on EINTR
        except BaseException:
            self._threads.release()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            self._threads.release()


class StopFlag:
    """The run's stop flag as a worker sees it: polled, never waited on."""

    def __init__(self, mapping: mmap.mmap) -> None:
        self._mapping = mapping

    def is_set(self) -> bool:
        return self._mapping[STOP] != 0  # the low byte of the flag's int64


class RunMemory:
    """The parent's handle on one run's shared memory: the stop flag, and the shares of
    ``readers`` reader threads in all (0: the workers keep fixed shares). Created before the
    workers start, passed to each in its arguments (``attach`` there), closed after."""

    def __init__(self, readers: int = 0) -> None:
        self.readers = readers
        self._fd = os.memfd_create("modelmon-run", os.MFD_CLOEXEC)
        os.ftruncate(self._fd, self._size)  # zeros: not stopped, no shares dealt yet
        self._mapping: mmap.mmap | None = mmap.mmap(self._fd, self._size)

    @property
    def _size(self) -> int:
        return _INT.itemsize * (1 + (2 * self.readers + 1 if self.readers else 0))

    def __getstate__(self) -> dict[str, Any]:  # only while spawning a worker
        return {"readers": self.readers, "fd": reduction.DupFd(self._fd)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.readers = state["readers"]
        self._fd = state["fd"].detach()
        self._mapping = None

    def stop(self) -> None:
        """Tell every worker to stop (the parent's side; they see it at their next check)."""
        if self._mapping is not None:
            self._mapping[STOP] = 1

    def attach(self) -> tuple[StopFlag, ShareState | None]:
        """The worker's side, once per process: the stop flag and, with shared work, the
        share state over the shared memory."""
        self._mapping = mmap.mmap(self._fd, self._size)
        flag = StopFlag(self._mapping)
        if not self.readers:
            return flag, None
        # numpy int64 arrays: item and slice assignment, len: what ShareQueue uses.
        ints = cast(MutableSequence[int], np.frombuffer(self._mapping, dtype=_INT))
        readers = self.readers
        shares = ShareState(
            ints[2 : 2 + readers],
            ints[2 + readers : 2 + 2 * readers],
            RecordLock(self._fd),
            ints[1:2],
        )
        return flag, shares

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
