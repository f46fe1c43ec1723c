"""One copy of a model in memory that every rank of a node maps: what a one-reader load
fills (one process reads, the ranks share what it read, as a broadcast makes them).

The copy is a ``memfd``: anonymous shared memory with no name in any folder, freed when the
last descriptor and mapping of it go. A run killed at any instant leaves nothing behind in
``/dev/shm`` or anywhere else, its workers dying with it (their parent's death signal).
Every process that fills or maps it opens its own descriptor through the holder's
``/proc/PID/fd/N``.

The copy is an image of the model's files, one after another, each from a page boundary: a
tensor lies at its file's base plus its offset in the file, so its address is congruent to
its file offset modulo the page size, as an O_DIRECT read into it needs. Bytes that are no
tensor's (headers, padding) are never written, nor touched by a rank: they take no memory.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.model.records import Model

PAGE = mmap.PAGESIZE


@dataclass(frozen=True, slots=True)
class SharedCopy:
    """Where a one-reader load's arrays live: ``path`` (the holder's /proc/PID/fd/N) of
    ``size`` bytes, each model file from its base."""

    path: str
    size: int
    bases: tuple[tuple[str, int], ...]  # (file path, its first byte in the copy)

    def base_of(self) -> dict[str, int]:
        return dict(self.bases)

    def open(self, writable: bool) -> mmap.mmap:
        """This process's own mapping of the copy (its own descriptor, closed at once)."""
        fd = os.open(self.path, os.O_RDWR if writable else os.O_RDONLY)
        try:
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            return mmap.mmap(fd, self.size, flags=mmap.MAP_SHARED, access=access)
        finally:
            os.close(fd)


def layout(model: Model) -> tuple[tuple[tuple[str, int], ...], int]:
    """Each file's base in the copy, and the copy's size."""
    bases, at = [], 0
    for file in model.files:
        bases.append((file.path, at))
        at += -(-file.size // PAGE) * PAGE
    return tuple(bases), max(at, PAGE)


@contextlib.contextmanager
def shared_copy(model: Model) -> Iterator[SharedCopy]:
    """A copy of ``model``'s size for the block, held by this process; freed when the last of
    its descriptors and mappings (this one, the workers', the ranks') goes."""
    bases, size = layout(model)
    fd = os.memfd_create("modelmon-shared-copy", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
        yield SharedCopy(f"/proc/{os.getpid()}/fd/{fd}", size, bases)
    finally:
        os.close(fd)


def tensor_view(memory: mmap.mmap, base: int, offset: int, length: int) -> np.ndarray:
    """Bytes [offset, offset+length) of a file whose base in the copy is ``base``."""
    return np.frombuffer(memory, dtype=np.uint8, count=length, offset=base + offset)


def rank_main(conn: Connection, model: Model, copy: SharedCopy) -> None:
    """A rank of a one-reader load, in its own process: once told the copy is whole (``go``
    over ``conn``), map it and touch a byte of every page of every tensor, as a rank's first
    use of its weights faults them in; report (seconds, bytes touched, sum of the bytes
    read) or the error. The end of ``conn`` (the parent gone) ends it."""
    try:
        if not conn.poll(None) or conn.recv_bytes() != b"go":
            return
        started = time.perf_counter()
        memory = copy.open(writable=False)
        bases = copy.base_of()
        touched, total = 0, 0
        try:
            for extent in model.extents:
                if not extent.length:
                    continue
                view = tensor_view(memory, bases[extent.file], extent.offset, extent.length)
                first = (-(bases[extent.file] + extent.offset)) % PAGE
                total += int(view[first::PAGE].sum(dtype=np.uint64)) + int(view[0])
                touched += extent.length
                del view
        finally:
            memory.close()
        conn.send((time.perf_counter() - started, touched, total))
    except (OSError, ValueError, EOFError, LoadError) as exc:
        with contextlib.suppress(OSError):
            conn.send(f"{type(exc).__name__}: {exc}")
