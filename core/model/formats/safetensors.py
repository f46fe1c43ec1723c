"""safetensors: header → tensor extents, validated the way the reference implementation does.

Layout: 8-byte little-endian header length N, N bytes of JSON, then the data section. Every
length and offset is checked against the file size before anything is allocated.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from modelmon.core.errors import ModelFormatError, one_line
from modelmon.core.model.blocks import blocks_of
from modelmon.core.model.formats.opening import open_model_file
from modelmon.core.model.formats.shapes import (
    INTPTR_LIMIT,
    MAX_ARRAY_DIMS,
    array_shape_problem,
)
from modelmon.core.model.records import ModelFile, TensorExtent, collector_paused
from modelmon.core.system.files import UnusableFile, parse_json, read_small_file

MAX_HEADER_BYTES = 100_000_000  # the reference's MAX_HEADER_SIZE

# dtype → (bits per element, numpy dtype name of the loaded array). Sub-byte and 6-bit types
# load as raw bytes ("uint8", flat), which is what they are until a kernel unpacks them.
DTYPES: dict[str, tuple[int, str]] = {
    "BOOL": (8, "bool"),
    "U8": (8, "uint8"),
    "I8": (8, "int8"),
    "F8_E5M2": (8, "float8_e5m2"),
    "F8_E4M3": (8, "float8_e4m3fn"),
    "F8_E8M0": (8, "uint8"),
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


def read_header(path: str | os.PathLike[str]) -> tuple[dict[str, object], int, int]:
    """Read and decode the JSON header: (header, data_start, file_size). Bounded by file size."""
    name = str(path)
    try:
        with open_model_file(name) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 8:
                raise _fail(name, f"file is {size} bytes, too short for a safetensors header", 0)
            (header_len,) = struct.unpack("<Q", handle.read(8))
            if header_len > MAX_HEADER_BYTES or 8 + header_len > size:
                # A JSON header starts with "{": without it, the 8 bytes were never a header
                # length (a text file, another format), and its value means nothing to a user.
                if handle.read(1) != b"{":
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
            raw = handle.read(header_len)
    except OSError as exc:  # an I/O error reading the header
        raise _fail(name, exc.strerror or str(exc)) from None
    if len(raw) != header_len:
        raise _fail(name, "file shrank while its header was read", 8)
    if not raw.startswith(b"{"):
        raise _fail(name, "header does not start with '{' (not a safetensors file?)", 8)
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _fail(name, "header is not valid UTF-8", 8 + exc.start) from None
    except json.JSONDecodeError as exc:
        raise _fail(name, f"header is not valid JSON: {exc.msg}", 8 + exc.pos) from None
    except RecursionError:
        raise _fail(name, "header JSON is nested too deep", 8) from None
    except ValueError as exc:  # an integer of over 4300 digits
        raise _fail(name, f"header JSON is not usable: {one_line(exc)}", 8) from None
    if not isinstance(header, dict):
        raise _fail(name, "header JSON is not an object", 8)
    return header, 8 + header_len, size


def _int_list(value: object, length: int | None) -> list[int] | None:
    """``value`` if it is a list of non-negative ints (of ``length``), else None."""
    if type(value) is not list or (length is not None and len(value) != length):
        return None
    for item in value:
        if type(item) is not int or item < 0:  # type(), not isinstance: bool is no dimension
            return None
    return value


# (begin, end, name, dtype, shape) of one tensor, offsets relative to the data section
Entry = tuple[int, int, str, str, tuple[int, ...]]


def parse_safetensors_file(
    path: str | os.PathLike[str],
) -> tuple[list[TensorExtent], ModelFile, dict[str, str]]:
    """Parse one .safetensors file into extents sorted by offset, its size and its metadata.

    A header is checked all at once first (``_columns_if_valid``: whole-column passes, fast on
    100k-tensor files); at any doubt the tensor-by-tensor walk (``_checked_entries``) decides,
    which names the first bad tensor.
    """
    name = str(path)
    with collector_paused():
        header, data_start, size = read_header(name)
        data_len = size - data_start
        checked = _columns_if_valid(header, data_len)
        if checked is None:
            entries, metadata = _checked_entries(name, header, data_start, data_len)
            columns = [list(column) for column in zip(*entries, strict=True)] or [
                [] for _ in range(5)
            ]
        else:
            columns, metadata = checked
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
    return extents, ModelFile(path=name, size=size), metadata


def _array_shape(dtype: str, shape: tuple[int, ...], begin: int, end: int) -> tuple[int, ...]:
    """numpy's shape of a loaded tensor: its own, or its bytes (flat) for sub-byte types."""
    return shape if BITS[dtype] % 8 == 0 else (end - begin,)


def _field(infos: list[dict[str, Any]], key: str) -> list[Any]:
    """``info.get(key)`` of every entry, in one C-level pass."""
    get: Callable[[dict[str, Any], str], Any] = dict.get
    return list(map(get, infos, itertools.repeat(key)))


def _only(values: Iterable[object], kind: type) -> bool:
    """Every value is exactly of ``kind`` (type(), not isinstance: a bool is no int)."""
    return set(map(type, values)) <= {kind}


Columns = list[list[Any]]  # begins, ends, names, dtypes, shapes: one list each, in offset order


def _columns_if_valid(
    header: dict[str, object], data_len: int
) -> tuple[Columns, dict[str, str]] | None:
    """The tensors' columns in offset order and the metadata, if every check that
    ``_checked_entries`` makes passes; None if any might not.

    Each check is a pass over a whole column at C speed (map, set, min, list equality) instead
    of a Python loop per tensor; the integers stay Python ints, so nothing can overflow.
    """
    names = list(header)
    infos = list(header.values())
    metadata: dict[str, str] = {}
    if "__metadata__" in header:
        at = names.index("__metadata__")
        info = infos[at]
        if type(info) is not dict or not (_only(info, str) and _only(info.values(), str)):
            return None
        metadata = dict(info)
        del names[at], infos[at]
    if not infos:
        return ([[], [], [], [], []], metadata) if data_len == 0 else None
    if not _only(infos, dict):
        return None
    entries_info = cast(list[dict[str, Any]], infos)
    dtypes = _field(entries_info, "dtype")
    shape_lists = _field(entries_info, "shape")
    bounds = _field(entries_info, "data_offsets")
    if not (_only(dtypes, str) and set(dtypes) <= DTYPES.keys()):
        return None
    if not (_only(shape_lists, list) and _only(bounds, list) and set(map(len, bounds)) == {2}):
        return None
    dims: list[Any] = list(itertools.chain.from_iterable(shape_lists))
    offsets: list[Any] = list(itertools.chain.from_iterable(bounds))
    if (
        not (_only(dims, int) and _only(offsets, int))
        or min(offsets) < 0
        or min(dims, default=0) < 0
    ):
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
    name: str, header: dict[str, object], data_start: int, data_len: int
) -> tuple[list[Entry], dict[str, str]]:
    """The entries sorted by offset and the metadata, checked tensor by tensor in header order
    and then in offset order: the first problem met raises, naming its tensor."""
    metadata: dict[str, str] = {}
    entries: list[Entry] = []
    for key, info in header.items():
        if key == "__metadata__":
            if not isinstance(info, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in info.items()
            ):
                raise _fail(name, "__metadata__ must map strings to strings", 8)
            metadata = dict(info)
            continue
        if not isinstance(info, dict):
            raise _fail(name, f"tensor {key!r}: entry is not an object", 8)
        dtype = info.get("dtype")
        if not isinstance(dtype, str) or dtype not in DTYPES:
            raise _fail(name, f"tensor {key!r}: unknown dtype {dtype!r}", 8)
        dims = _int_list(info.get("shape"), None)
        if dims is None:
            raise _fail(name, f"tensor {key!r}: shape must be a list of non-negative integers", 8)
        offsets = _int_list(info.get("data_offsets"), 2)
        if offsets is None:
            raise _fail(name, f"tensor {key!r}: data_offsets must be [begin, end]", 8)
        begin, end = offsets
        if end < begin:
            raise _fail(name, f"tensor {key!r}: data_offsets end {end} < begin {begin}", 8)
        if end > data_len:
            raise _fail(
                name,
                f"truncated: tensor {key!r} ends at {end}, past the {data_len}-byte data section",
                data_start + begin,
            )
        entries.append((begin, end, key, dtype, tuple(dims)))

    entries.sort()
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
        elements = 1
        for dim in shape:
            elements *= dim
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
    return entries, metadata


def parse_index(index_path: str | os.PathLike[str]) -> dict[str, str]:
    """``*.safetensors.index.json`` → {tensor name: shard path}. Shards must sit beside it."""
    name = str(index_path)
    try:
        document = parse_json(read_small_file(name, MAX_HEADER_BYTES))
    except UnusableFile as exc:
        raise _fail(name, f"index: {exc.reason}") from None
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise _fail(name, "index has no 'weight_map' object")
    folder = Path(name).parent
    result: dict[str, str] = {}
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or "/" in shard or shard in (".", ".."):
            raise _fail(name, f"weight_map[{tensor!r}] is not a file name beside the index")
        result[tensor] = str(folder / shard)
    return result
