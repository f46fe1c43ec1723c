"""Reads of a GGUF header that never run past the end of the file: each is checked against
the bytes left before anything is read, and over the network the prefix read so far grows to
hold it first. A problem raises a ``ModelFormatError`` naming the byte offset.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable

from modelmon.core.errors import ModelFormatError


class BoundedReads:
    """A position in a GGUF file (or the prefix of one) and the reads from it."""

    def __init__(
        self,
        file: str,
        buf: mmap.mmap | bytearray,
        size: int,
        grow: Callable[[int], int] | None = None,
    ) -> None:
        self.file, self.buf, self.size = file, buf, size
        # A mapped file holds every byte; a prefix read over the network holds ``have``, and
        # ``grow(end)`` reads on until it holds ``end`` (bytes are read before they are used).
        self.grow = grow
        self.have = size if grow is None else len(buf)
        self.pos = 0
        self.order = "<"

    def fail(self, problem: str, offset: int | None = None) -> ModelFormatError:
        return ModelFormatError(self.file, problem, self.pos if offset is None else offset)

    def need(self, end: int) -> None:
        """Hold bytes up to ``end`` (within the file: ``skip`` checked it) before reading them."""
        if end > self.have and self.grow is not None:
            self.have = self.grow(end)

    def skip(self, length: int, what: str) -> int:
        """Step over ``length`` bytes; where they start."""
        start = self.pos
        if length > self.size - start:
            problem = f"truncated: {what} needs {length} bytes, {self.size - start} left in file"
            raise self.fail(problem, start)
        self.pos = start + length
        return start

    def unpack(self, fmt: str, what: str) -> int | float | bool:
        start = self.skip(struct.calcsize(fmt), what)
        if self.pos > self.have:
            self.need(self.pos)
        value: int | float | bool = struct.unpack_from(self.order + fmt, self.buf, start)[0]
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack("I", what))

    def u64(self, what: str) -> int:
        return int(self.unpack("Q", what))

    def string(self, what: str) -> tuple[int, int]:
        """Step over one string; its start and length."""
        length_at = self.pos
        length = self.u64(f"{what} length")
        if length > self.size - self.pos:
            raise self.fail(f"{what} length {length} runs past the end of the file", length_at)
        return self.skip(length, what), length

    def text(self, what: str) -> str:
        """A string that must be UTF-8 (keys and tensor names; GGUFReader decodes them too)."""
        start, length = self.string(what)
        self.need(start + length)
        try:
            return self.buf[start : start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8", start) from None

    def unique_text(self, what: str, kind: str, seen: set[str]) -> str:
        """A ``text`` that must not be in ``seen`` (a KV key, a tensor name); adds it there."""
        start = self.pos
        name = self.text(what)
        if name in seen:
            raise self.fail(f"duplicate {kind} {show_name(name)}", start)
        seen.add(name)
        return name


def show_name(name: str) -> str:
    """A name fit for a one-line message: quoted, escaped if odd, and not too long."""
    shown = repr(name) if name.isprintable() else ascii(name)
    return shown if len(shown) <= 80 else shown[:77] + "..."
