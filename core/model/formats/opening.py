"""Opening a model file for parsing: through ``core.system.files`` (regular files only, so a
FIFO or device named as a model never hangs a parse), every refusal a ModelFormatError."""

from __future__ import annotations

import os
from typing import BinaryIO

from modelmon.core.errors import ModelFormatError
from modelmon.core.storage.source import open_checked


def open_model_file(path: str | os.PathLike[str]) -> BinaryIO:
    """A binary file object on the regular file at ``path`` whose size is what it holds (not
    a /proc or /sys file); ModelFormatError otherwise."""
    return os.fdopen(open_checked(path), "rb")


GGUF_MAGIC = b"GGUF"
# GGUF's magic read as a big-endian number: a file written wholly byte-swapped. gguf-py's
# reader and llama.cpp read the magic as bytes and refuse it; so does modelmon, saying so.
SWAPPED_GGUF_MAGIC = GGUF_MAGIC[::-1]


def shown_bytes(data: bytes) -> str:
    """A file's first bytes as a user reads them: in quotes where they are printable ASCII
    (a text file's "this"), in hex otherwise (Python's ``b'\\x89PNG'`` means nothing to most)."""
    if data and all(0x20 <= byte < 0x7F for byte in data):
        return f'"{data.decode("ascii")}"'
    return f"0x{data.hex()}"


def not_gguf_magic(magic: bytes) -> str:
    """Why a file is no GGUF, by its first bytes."""
    if len(magic) < len(GGUF_MAGIC):
        held = f"{len(magic)} byte" + ("" if len(magic) == 1 else "s")
        return f"it holds {held}, fewer than GGUF's magic {shown_bytes(GGUF_MAGIC)}"
    return f"it begins with {shown_bytes(magic)}, not GGUF's magic {shown_bytes(GGUF_MAGIC)}"


def format_of(name: str, magic: bytes) -> str:
    """ "gguf" or "safetensors" (whose header the parser then checks), by a file's first four
    bytes; ModelFormatError for an empty or byte-swapped file."""
    if not magic:
        raise ModelFormatError(name, "empty file (0 bytes)")
    if magic == SWAPPED_GGUF_MAGIC:
        raise ModelFormatError(
            name,
            f"a byte-swapped GGUF ({not_gguf_magic(magic)}): written in the wrong byte order, "
            "which the gguf reader and llama.cpp refuse too",
        )
    return "gguf" if magic == GGUF_MAGIC else "safetensors"
