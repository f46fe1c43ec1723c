"""safetensors: header → tensor extents, validated the way the reference implementation does.

Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section. Every
length and offset is checked against the file size before anything is allocated. The JSON is
read by the reference's rules (``safetensors_json``): modelmon opens a file if and only if
``safetensors.safe_open`` does, but for one stricter check, said where it is made: a tensor
numpy cannot shape (over 64 dimensions, or past int64 bytes), which ``safe_open`` opens and
its ``get_tensor`` then fails on.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import struct

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.blocks import blocks_of
from modelmon.core.model.formats.safetensors_columns import (
    ARRAY_DTYPES,
    BITS,
    TensorColumns,
    checked_layout,
    deduplicated,
)
from modelmon.core.model.formats.safetensors_json import (
    HeaderProblem,
    decode,
    has_escapes,
    header_text,
    may_hold_negative_zero,
)
from modelmon.core.model.formats.safetensors_members import check_dtypes, document_columns
from modelmon.core.model.formats.safetensors_scan import scan_header
from modelmon.core.model.records import ModelFile, TensorExtent, collector_paused
from modelmon.core.storage.source import ByteSource, FileSource
from modelmon.core.system.model_files import MAX_HEADER_BYTES


def _fail(path: str, problem: str, offset: int | None = None) -> ModelFormatError:
    return ModelFormatError(path, problem, offset)


def read_header(path: str | os.PathLike[str]) -> tuple[bytes, int, int]:
    """The header's raw JSON bytes, where the data section starts and the file's size. Reads
    no more than the header length, itself bounded by the file size and the 100 MB limit."""
    with FileSource(path) as source:
        return header_of(source)


def header_of(source: ByteSource) -> tuple[bytes, int, int]:
    """``read_header`` of any byte source: a file, or an object read by ranged GETs (which
    then asks for the 8-byte length and the header only, never the data)."""
    name, size = source.name, source.size
    try:
        if size < 8:
            raise _fail(name, f"file is {size} bytes, too short for a safetensors header", 0)
        length_field = source.read_at(0, 8)
        if len(length_field) != 8:
            raise _fail(name, "file shrank while its header was read", 0)
        (header_len,) = struct.unpack("<Q", length_field)
        if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
            # A JSON header starts with "{" (serde allows whitespace first): without it,
            # the 8 bytes were never a header length (a text file, another format), and
            # their value means nothing to a user.
            if source.read_at(8, 64).lstrip(b" \t\r\n")[:1] != b"{":
                raise _fail(
                    name, "not a safetensors file: it does not begin with a safetensors header"
                )
            if header_len > MAX_HEADER_BYTES:
                raise _fail(name, f"header length {header_len} exceeds the 100 MB limit", 0)
            raise _fail(
                name,
                f"truncated: its header needs {8 + header_len} bytes, the file has {size}",
                0,
            )
        raw = source.read_at(8, header_len)
    except OSError as exc:  # an I/O error reading the header
        raise _fail(name, exc.strerror or str(exc)) from None
    if len(raw) != header_len:
        raise _fail(name, "file shrank while its header was read", 8)
    return raw, 8 + header_len, size


def parse_safetensors_file(
    path: str | os.PathLike[str],
) -> tuple[list[TensorExtent], ModelFile, dict[str, str]]:
    """Parse one .safetensors file into extents sorted by offset, its size and its metadata.

    A header in the form writers give it is read by one regular expression
    (``safetensors_scan``), any other by ``json.loads`` (``safetensors_members``); either way
    its tensors are checked in whole-column passes (``safetensors_columns``), and the first
    problem the reference would meet raises, naming its tensor.
    """
    with FileSource(path) as source:
        return parse_safetensors_source(source)


def parse_safetensors_source(
    source: ByteSource,
) -> tuple[list[TensorExtent], ModelFile, dict[str, str]]:
    """``parse_safetensors_file`` of any byte source; an object's ModelFile carries its
    facts (URL, size, ETag)."""
    name = source.name
    raw, data_start, size = header_of(source)
    try:
        text = header_text(raw)
    except HeaderProblem as exc:
        raise _fail(name, exc.problem, 8 + (exc.at or 0)) from None
    del raw
    with collector_paused():
        columns, metadata = _header_columns(name, text, data_start, size - data_start)
        del text
        extents = _extents(name, columns, data_start)
    return extents, ModelFile(path=name, size=size, remote=source.facts), metadata


def _header_columns(
    name: str, text: str, data_start: int, data_len: int
) -> tuple[TensorColumns, dict[str, str]]:
    """The tensors in offset order and the metadata, or the ModelFormatError that names the
    first problem."""
    scanned = scan_header(text)
    if scanned is not None:
        columns, metadata = scanned
        check_dtypes(name, columns)
    else:
        exact = may_hold_negative_zero(text)
        reread = None if exact else functools.partial(_decoded, name, text, True)
        columns, metadata = document_columns(
            name, _decoded(name, text, exact), has_escapes(text), reread
        )
    return checked_layout(name, deduplicated(columns), data_start, data_len), metadata


def _decoded(name: str, text: str, exact: bool) -> object:
    try:
        return decode(text, exact)
    except HeaderProblem as exc:
        raise _fail(name, exc.problem, 8 + (exc.at or 0)) from None


_new_extent = functools.partial(tuple.__new__, TensorExtent)
_SUB_BYTE = {dtype for dtype, bits in BITS.items() if bits % 8}  # loaded as raw bytes


def _extents(file: str, columns: TensorColumns, data_start: int) -> list[TensorExtent]:
    """The tensors as extents of ``file``: made from whole columns, each extent by C code."""
    names, dtypes, shapes, begins, ends = columns
    lengths = list(map(operator.sub, ends, begins))
    # numpy's shape of a loaded tensor: its own, or its bytes (flat) for sub-byte types
    array_shapes: list[tuple[int, ...]] = shapes
    if not _SUB_BYTE.isdisjoint(dtypes):
        array_shapes = list(map(_array_shape, dtypes, shapes, lengths))
    rows = zip(
        names,
        itertools.repeat(file),
        map(operator.add, begins, itertools.repeat(data_start)),
        lengths,
        dtypes,
        shapes,
        blocks_of(names),
        map(ARRAY_DTYPES.__getitem__, dtypes),
        array_shapes,
    )
    return list(map(_new_extent, rows))


def _array_shape(dtype: str, shape: tuple[int, ...], length: int) -> tuple[int, ...]:
    return (length,) if dtype in _SUB_BYTE else shape
