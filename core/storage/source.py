"""Where a parser's bytes come from: the ``ByteSource`` a format parser reads a header
through, and its file kind.

The format parsers (``model/formats``) read through a ``ByteSource``: its ``name`` (the path
or the URL, for errors), its ``size``, and ``read_at(offset, length)``. A ``FileSource`` is a
regular file opened through ``system.files`` (no FIFO, no device, no /proc file); an object
read by ranged GETs is ``objects.ObjectSource`` (kept apart so that reading a file imports
no network code). A parser bounds its reads by the size first, so a header that claims more
than its file or object holds fails before any byte past the end is asked for.
"""

from __future__ import annotations

import os
from typing import Protocol

from modelmon.core.errors import ModelFormatError
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.system.files import UnusableFile, open_regular, size_problem


class ByteSource(Protocol):
    name: str  # what errors name: the path, or the URL's text
    size: int

    @property
    def facts(self) -> ObjectFacts | None:
        """The object's facts; None for a file."""
        ...

    def read_at(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes at ``offset`` (fewer only where the source ends)."""
        ...

    def close(self) -> None: ...


def open_checked(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on the regular file at ``path`` whose size is what it holds
    (not a /proc or /sys file); ModelFormatError otherwise."""
    try:
        fd = open_regular(path)
    except UnusableFile as exc:
        raise ModelFormatError(str(path), exc.reason) from None
    try:
        problem = size_problem(fd)
    except OSError as exc:
        problem = (exc.strerror or str(exc)).lower()
    if problem is not None:
        os.close(fd)
        raise ModelFormatError(str(path), problem)
    return fd


class FileSource:
    """A regular file, read with ``pread``."""

    facts = None

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.name = str(path)
        self._fd = open_checked(path)
        self.size = os.fstat(self._fd).st_size

    def fileno(self) -> int:
        return self._fd

    def read_at(self, offset: int, length: int) -> bytes:
        chunks: list[bytes] = []
        while length > 0:
            chunk = os.pread(self._fd, length, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
            length -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
