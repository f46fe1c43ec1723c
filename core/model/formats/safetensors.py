"""safetensors: header → tensor extents, validated the way the reference implementation does.

Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section. Every
length and offset is checked against the file size before anything is allocated. The JSON is
read by the reference's rules (``safetensors_json``): modelmon opens a file if and only if
``safetensors.safe_open`` does, but for one stricter check, said where it is made: a tensor
numpy cannot shape (over 64 dimensions, or past int64 bytes), which ``safe_open`` opens and
its ``get_tensor`` then fails on.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
import struct
from collections.abc import Callable, Iterable
from typing import Any

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.blocks import blocks_of
from modelmon.core.model.formats.safetensors_json import (
    ENTRY_FIELDS,
    U64_LIMIT,
    HeaderProblem,
    Members,
    checked_entry,
    checked_metadata,
    decode,
    has_escapes,
    lone_surrogate,
    may_hold_negative_zero,
)
from modelmon.core.model.formats.shapes import (
    INTPTR_LIMIT,
    MAX_ARRAY_DIMS,
    array_shape_problem,
)
from modelmon.core.model.records import ModelFile, TensorExtent, collector_paused
from modelmon.core.storage.source import ByteSource, FileSource
from modelmon.core.system.model_files import MAX_HEADER_BYTES

# dtype → (bits per element, numpy dtype name of the loaded array): the reference's ``Dtype``
# (safetensors 0.8). Sub-byte and 6-bit types load as raw bytes ("uint8", flat), which is what
# they are until a kernel unpacks them.
DTYPES: dict[str, tuple[int, str]] = {
    "BOOL": (8, "bool"),
    "U8": (8, "uint8"),
    "I8": (8, "int8"),
    "F8_E5M2": (8, "float8_e5m2"),
    "F8_E4M3": (8, "float8_e4m3fn"),
    "F8_E8M0": (8, "uint8"),
    "F8_E4M3FNUZ": (8, "float8_e4m3fnuz"),
    "F8_E5M2FNUZ": (8, "float8_e5m2fnuz"),
    "I16": (16, "int16"),
    "U16": (16, "uint16"),
    "F16": (16, "float16"),
    "BF16": (16, "bfloat16"),
    "I32": (32, "int32"),
    "U32": (32, "uint32"),
    "F32": (32, "float32"),
    "F64": (64, "float64"),
    "I64": (64, "int64"),
    "U64": (64, "uint64"),
    "C64": (64, "complex64"),
    "F4": (4, "uint8"),
    "F6_E2M3": (6, "uint8"),
    "F6_E3M2": (6, "uint8"),
}
BITS = {dtype: bits for dtype, (bits, _) in DTYPES.items()}
# numpy's item size of the loaded array: whole bytes, or 1 for the raw bytes of sub-byte types
ITEMSIZES = {dtype: max(1, bits // 8) for dtype, bits in BITS.items()}
ARRAY_DTYPES = {dtype: array_dtype for dtype, (_, array_dtype) in DTYPES.items()}


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
                    name,
                    "not a safetensors file (it does not begin with a safetensors header)",
                    0,
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


# (begin, end, name, dtype, shape) of one tensor, offsets relative to the data section
Entry = tuple[int, int, str, str, tuple[int, ...]]


def parse_safetensors_file(
    path: str | os.PathLike[str],
) -> tuple[list[TensorExtent], ModelFile, dict[str, str]]:
    """Parse one .safetensors file into extents sorted by offset, its size and its metadata.

    A header is checked all at once first (``_columns_if_valid``: whole-column passes, fast on
    100k-tensor files); at any doubt the entry-by-entry walk (``_checked_entries``) decides,
    which names the first bad tensor.
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
    data_len = size - data_start
    with collector_paused():
        columns, metadata = _header_columns(name, raw, data_start, data_len)
        del raw
        begins, ends, names, dtypes, shapes = columns
        extents = list(
            map(
                TensorExtent,
                names,
                itertools.repeat(name),
                map(operator.add, begins, itertools.repeat(data_start)),
                map(operator.sub, ends, begins),
                dtypes,
                shapes,
                blocks_of(names),
                map(ARRAY_DTYPES.__getitem__, dtypes),
                map(_array_shape, dtypes, shapes, begins, ends),
            )
        )
    return extents, ModelFile(path=name, size=size, remote=source.facts), metadata


def _header_columns(
    name: str, raw: bytes, data_start: int, data_len: int
) -> tuple[Columns, dict[str, str]]:
    """The tensors' columns in offset order and the metadata, or the ModelFormatError that
    names the first problem. Numbers are typed as serde types them only where it matters."""
    exact = may_hold_negative_zero(raw)
    if not exact:
        checked = _columns_if_valid(_decoded(name, raw, exact), data_len, has_escapes(raw))
        if checked is not None:
            return checked
    entries, metadata = _checked_entries(name, _decoded(name, raw, True), data_start, data_len)
    columns = [list(column) for column in zip(*entries, strict=True)] or [[] for _ in range(5)]
    return columns, metadata


def _decoded(name: str, raw: bytes, exact: bool) -> Any:
    try:
        return decode(raw, exact)
    except HeaderProblem as exc:
        raise _fail(name, exc.problem, 8 + (exc.at or 0)) from None


def _array_shape(dtype: str, shape: tuple[int, ...], begin: int, end: int) -> tuple[int, ...]:
    """numpy's shape of a loaded tensor: its own, or its bytes (flat) for sub-byte types."""
    return shape if BITS[dtype] % 8 == 0 else (end - begin,)


def _field(infos: list[dict[str, Any]], key: str) -> list[Any]:
    """``info.get(key)`` of every entry, in one C-level pass."""
    get: Callable[[dict[str, Any], str], Any] = dict.get
    return list(map(get, infos, itertools.repeat(key)))


_key, _value = operator.itemgetter(0), operator.itemgetter(1)
_first, _second, _third = (operator.itemgetter(n) for n in range(3))


def _entry_fields(infos: list[Members]) -> tuple[list[Any], list[Any], list[Any]] | None:
    """The dtype, shape and data_offsets columns of entries of three members each, or None
    unless every entry holds exactly those three fields once.

    Writers put the fields in one order: taken by position when every entry uses the same
    order (no dict per entry), else through a dict per entry.
    """
    members = [list(map(getter, infos)) for getter in (_first, _second, _third)]
    keys = [set(map(_key, column)) for column in members]
    if all(len(names) == 1 for names in keys):
        order = [next(iter(names)) for names in keys]
        if sorted(order) != sorted(ENTRY_FIELDS):
            return None
        values = {
            name: list(map(_value, column)) for name, column in zip(order, members, strict=True)
        }
        return values["dtype"], values["shape"], values["data_offsets"]
    del members
    entries_info = list(map(dict, infos))
    if set(map(len, entries_info)) != {3}:  # a field given twice
        return None
    return (
        _field(entries_info, "dtype"),
        _field(entries_info, "shape"),
        _field(entries_info, "data_offsets"),
    )


def _only(values: Iterable[object], kind: type) -> bool:
    """Every value is exactly of ``kind`` (type(), not isinstance: a bool is no int)."""
    return set(map(type, values)) <= {kind}


Columns = list[list[Any]]  # begins, ends, names, dtypes, shapes: one list each, in offset order


def _columns_if_valid(
    document: Any, data_len: int, escapes: bool
) -> tuple[Columns, dict[str, str]] | None:
    """The tensors' columns in offset order and the metadata, if every check that
    ``_checked_entries`` makes passes; None if any might not. ``escapes``: the header holds
    ``\\u`` escapes (a name may hold a lone surrogate).

    Each check is a pass over a whole column at C speed (map, set, min, list equality) instead
    of a Python loop per tensor; the integers stay Python ints, so nothing can overflow. Only
    the plain form passes: distinct names, each entry an object of exactly dtype (a name),
    shape and data_offsets (lists of integers), so nothing nests deeper than 3 levels.
    """
    if type(document) is not tuple:
        return None
    names: list[Any] = list(map(_key, document))
    infos: list[Any] = list(map(_value, document))
    if len(set(names)) != len(names):  # a name given twice: the walk checks every entry
        return None
    metadata: dict[str, str] = {}
    if "__metadata__" in names:
        at = names.index("__metadata__")
        info = infos[at]
        if info is not None:
            if type(info) is not tuple or not _only(map(_value, info), str):
                return None
            metadata = dict(info)
        del names[at], infos[at]
    if escapes and any(map(lone_surrogate, [*names, *metadata, *metadata.values()])):
        return None
    if not infos:
        return ([[], [], [], [], []], metadata) if data_len == 0 else None
    if not _only(infos, tuple) or set(map(len, infos)) != {3}:
        return None
    fields = _entry_fields(infos)
    if fields is None:
        return None
    dtypes, shape_lists, bounds = fields
    if not (_only(dtypes, str) and set(dtypes) <= DTYPES.keys()):
        return None
    if not (_only(shape_lists, list) and _only(bounds, list) and set(map(len, bounds)) == {2}):
        return None
    dims: list[Any] = list(itertools.chain.from_iterable(shape_lists))
    offsets: list[Any] = list(itertools.chain.from_iterable(bounds))
    if not (_only(dims, int) and _only(offsets, int)) or min(offsets) < 0:
        return None
    if dims and (min(dims) < 0 or max(dims) >= U64_LIMIT):
        return None
    begins, ends = offsets[0::2], offsets[1::2]
    if not all(map(operator.le, begins, ends)) or max(ends) > data_len:
        return None
    shapes = list(map(tuple, shape_lists))
    if not all(map(operator.lt, begins, begins[1:])):  # not already in offset order
        entries = sorted(zip(begins, ends, names, dtypes, shapes, strict=True))
        begins, ends, names, dtypes, shapes = (
            list(column) for column in zip(*entries, strict=True)
        )
    # Tensors tile the data section: each begins where the previous ended, the last ends it.
    if begins[0] != 0 or begins[1:] != ends[:-1] or ends[-1] != data_len:
        return None
    if max(map(len, shapes)) > MAX_ARRAY_DIMS:
        return None
    elements = list(map(math.prod, shapes))
    itemsizes = list(map(ITEMSIZES.__getitem__, dtypes))
    if max(map(operator.mul, elements, itemsizes)) >= INTPTR_LIMIT:
        return None
    # An empty tensor's non-zero dimensions may still overflow numpy's size: check those alone.
    for index in itertools.compress(range(len(shapes)), map(operator.not_, elements)):
        if array_shape_problem(shapes[index], itemsizes[index]) is not None:
            return None
    # elements x bits == 8 x span: whole bytes, and the shape's size is what the offsets span
    bits = map(BITS.__getitem__, dtypes)
    spans = map(operator.sub, ends, begins)
    if list(map(operator.mul, elements, bits)) != list(
        map(operator.mul, spans, itertools.repeat(8))
    ):
        return None
    return [begins, ends, names, dtypes, shapes], metadata


def _checked_entries(
    name: str, document: Any, data_start: int, data_len: int
) -> tuple[list[Entry], dict[str, str]]:
    """The entries sorted by offset and the metadata, checked entry by entry in header order
    (every entry, also one a later entry of the same name replaces, as the reference does),
    then in offset order: the first problem met raises, naming its tensor."""
    if type(document) is not tuple:
        raise _fail(name, "header JSON is not an object", 8)
    metadata: dict[str, str] | None = None
    by_name: dict[str, Entry] = {}
    for key, info in document:
        if lone_surrogate(key):
            raise _fail(name, f"tensor name {ascii(key)[:40]} holds a lone surrogate escape", 8)
        try:
            if key == "__metadata__":
                if metadata is not None:
                    raise HeaderProblem("given twice")
                metadata = checked_metadata(info)
                continue
            dtype, shape, (begin, end) = checked_entry(info)
        except HeaderProblem as exc:
            what = "__metadata__" if key == "__metadata__" else f"tensor {key!r}"
            raise _fail(name, f"{what}: {exc.problem}", 8) from None
        if dtype not in DTYPES:
            raise _fail(name, f"tensor {key!r}: unknown dtype {dtype!r}", 8)
        by_name[key] = (begin, end, key, dtype, shape)  # a name given again: the last counts

    entries = sorted(by_name.values())
    for begin, end, key, _, _ in entries:
        if end < begin:
            raise _fail(name, f"tensor {key!r}: data_offsets end {end} < begin {begin}", 8)
        if end > data_len:
            raise _fail(
                name,
                f"truncated: tensor {key!r} ends at {end}, past the {data_len}-byte data section",
                data_start + begin,
            )
    expected_begin = 0
    for begin, end, key, dtype, shape in entries:
        # Like the reference: tensors tile the data section with neither gap nor overlap.
        if begin != expected_begin:
            kind = "overlaps the previous tensor" if begin < expected_begin else "leaves a gap"
            raise _fail(name, f"tensor {key!r}: data_offsets {kind}", data_start + begin)
        bits = BITS[dtype]
        problem = array_shape_problem(shape, ITEMSIZES[dtype])
        if problem is not None:
            raise _fail(name, f"tensor {key!r}: {problem}", data_start + begin)
        elements = math.prod(shape)
        if (elements * bits) % 8:
            raise _fail(name, f"tensor {key!r}: {elements} x {bits}-bit is not whole bytes")
        if elements * bits // 8 != end - begin:
            raise _fail(
                name,
                f"tensor {key!r}: shape {list(shape)} x {dtype} is {elements * bits // 8} bytes "
                f"but data_offsets span {end - begin}",
                data_start + begin,
            )
        expected_begin = end
    if expected_begin != data_len:
        raise _fail(
            name,
            f"tensors cover {expected_begin} bytes but the data section has {data_len}",
            data_start + expected_begin,
        )
    return entries, metadata or {}
