"""Whether a file is a model, judged by its first bytes, never by its name: what the output
guard (``system.outputs``) asks before a report replaces an existing file.

- a safetensors file: an 8-byte little-endian header length within bounds (at most
  ``MAX_HEADER_BYTES``, and inside the file), then a JSON object (``{``, after the
  whitespace serde allows);
- a GGUF file: the magic ``GGUF``;
- a safetensors shard index: a JSON object with a ``"weight_map"`` object among its first
  ``INDEX_SNIFF_BYTES`` (an index names its metadata, then its map);
- a transformers model's config (``config.json``): a JSON object with a ``"model_type"`` or
  ``"architectures"`` key among those bytes: what names the model's architecture, which
  servers (vLLM, SGLang) and the answer's lines read beside the weights.

The read is bounded and safe on anything a path may name: opened without blocking (a FIFO
put there since the caller's ``stat``), ``fstat`` on the descriptor refuses all but a regular
file, and at most ``INDEX_SNIFF_BYTES`` are read, by ``pread``.
"""

from __future__ import annotations

import os
import re
import stat
import struct

MAX_HEADER_BYTES = 100_000_000  # a safetensors header's bound: the reference's MAX_HEADER_SIZE
HEADER_START_BYTES = 64  # whitespace serde lets come before a header's "{", as the parser reads
INDEX_SNIFF_BYTES = 1 << 20  # an index's "weight_map" key comes after a few lines of metadata
GGUF_MAGIC = b"GGUF"
JSON_SPACE = b" \t\r\n"
UTF8_BOM = b"\xef\xbb\xbf"
WEIGHT_MAP = re.compile(rb'"weight_map"[ \t\r\n]*:[ \t\r\n]*\{')
CONFIG_KEY = re.compile(rb'"(?:model_type|architectures)"[ \t\r\n]*:')

SAFETENSORS = "a safetensors model"
GGUF = "a GGUF model"
SHARD_INDEX = "a safetensors shard index"
MODEL_CONFIG = "a model's config (it names the model's architecture)"


def model_kind(path: str | os.PathLike[str]) -> str | None:
    """What kind of model file ``path`` is ("a safetensors model", "a GGUF model", "a
    safetensors shard index"), or None: not one, not a regular file, or not readable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):  # ValueError: a NUL byte, which no file's name holds
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        return _kind_of(fd, status.st_size)
    except OSError:  # an I/O error: what it holds is unknown
        return None
    finally:
        os.close(fd)


def _kind_of(fd: int, size: int) -> str | None:
    start = os.pread(fd, 8 + HEADER_START_BYTES, 0)
    if start[:4] == GGUF_MAGIC:
        return GGUF
    if len(start) > 8:
        (header_len,) = struct.unpack("<Q", start[:8])
        body = start[8:].lstrip(JSON_SPACE)
        if 2 <= header_len <= MAX_HEADER_BYTES and 8 + header_len <= size and body[:1] == b"{":
            return SAFETENSORS
    text = start.removeprefix(UTF8_BOM).lstrip(JSON_SPACE)
    if text[:1] in (b"{", b""):  # a JSON object, or only whitespace so far
        head = os.pread(fd, INDEX_SNIFF_BYTES, 0)
        if head.removeprefix(UTF8_BOM).lstrip(JSON_SPACE)[:1] == b"{":
            if WEIGHT_MAP.search(head):
                return SHARD_INDEX
            if CONFIG_KEY.search(head):
                return MODEL_CONFIG
    return None
