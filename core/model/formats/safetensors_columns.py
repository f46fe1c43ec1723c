"""A safetensors header's tensors as columns, checked by the reference's rules a column at a time.

The reference reads the header's members in file order, then walks the tensors in offset
order; the first problem it meets is the one a user is told, naming its tensor. A Python loop
over a million entries takes seconds, so each rule is run here over whole columns (``map`` of C
functions, which stops at the first entry that fails it) and only that entry is then checked
rule by rule, by the functions that word each problem: ``checked_member``, ``range_problem``,
``layout_problem``, ``coverage_problem``. ``tests/core/model/formats/reference_walk.py`` is the
entry-by-entry walk these passes stand for; a property test holds the two to the same answers.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable
from typing import Any, NamedTuple

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.shapes import (
    INTPTR_LIMIT,
    MAX_ARRAY_DIMS,
    array_shape_problem,
)

METADATA = "__metadata__"

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

# (name, dtype, shape, begin, end) of one tensor, offsets relative to the data section
Entry = tuple[str, str, tuple[int, ...], int, int]


class TensorColumns(NamedTuple):
    """A header's tensors, one list per field: tensor ``i`` is item ``i`` of each."""

    names: list[str]
    dtypes: list[str]
    shapes: list[tuple[int, ...]]
    begins: list[int]  # data_offsets, relative to the data section
    ends: list[int]

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> TensorColumns:
        columns = [list(column) for column in zip(*entries, strict=True)]
        return cls(*columns) if columns else cls([], [], [], [], [])

    def picked(self, indices: list[int]) -> TensorColumns:
        """The tensors at ``indices``, in that order."""
        columns: list[Any] = [list(map(column.__getitem__, indices)) for column in self]
        return TensorColumns(*columns)


def first_true(flags: Iterable[object]) -> int | None:
    """The index of the first true flag, or None (a scan in C that stops there)."""
    return next(itertools.compress(itertools.count(), flags), None)


def deduplicated(columns: TensorColumns) -> TensorColumns:
    """The last entry of each name: the reference's map keeps the last one given."""
    if len(set(columns.names)) == len(columns.names):
        return columns
    last = dict(zip(columns.names, itertools.count()))
    return columns.picked(sorted(last.values()))


# --- the tensors, in offset order -------------------------------------------------------------


def checked_layout(
    file: str, columns: TensorColumns, data_start: int, data_len: int
) -> TensorColumns:
    """The tensors (names distinct) in offset order, checked as the reference walks them: each
    ends at or after its beginning and within the data section; then, in offset order, each
    begins where the previous one ended, has a shape numpy can hold and spans what its shape
    and dtype make; the last one ends the data section."""
    columns = _in_offset_order(columns)
    names, dtypes, shapes, begins, ends = columns
    if max(ends, default=0) > data_len or not all(map(operator.le, begins, ends)):
        beyond = map(operator.gt, ends, itertools.repeat(data_len))
        outside = first_true(map(operator.or_, map(operator.lt, ends, begins), beyond)) or 0
        for index in range(outside, len(names)):
            bounds = (begins[index], ends[index])
            problem = range_problem(file, names[index], bounds, data_start, data_len)
            if problem is not None:
                raise problem
    first = _first_layout_problem(columns)
    if first is not None:
        for index in range(first, len(names)):
            expected_begin = ends[index - 1] if index else 0
            entry = (names[index], dtypes[index], shapes[index], begins[index], ends[index])
            problem = layout_problem(file, expected_begin, entry, data_start)
            if problem is not None:
                raise problem
    covered = ends[-1] if ends else 0
    problem = coverage_problem(file, covered, data_start, data_len)
    if problem is not None:
        raise problem
    return columns


def range_problem(
    file: str, key: str, bounds: tuple[int, int], data_start: int, data_len: int
) -> ModelFormatError | None:
    """What is wrong with tensor ``key``'s data_offsets on their own, or None."""
    begin, end = bounds
    if end < begin:
        return ModelFormatError(file, f"tensor {key!r}: data_offsets end {end} < begin {begin}", 8)
    if end > data_len:
        return ModelFormatError(
            file,
            f"truncated: tensor {key!r} ends at {end}, past the {data_len}-byte data section",
            data_start + begin,
        )
    return None


def layout_problem(
    file: str, expected_begin: int, entry: Entry, data_start: int
) -> ModelFormatError | None:
    """What is wrong with a tensor where the previous one (in offset order) ended at
    ``expected_begin``, or None."""
    key, dtype, shape, begin, end = entry
    # Like the reference: tensors tile the data section with neither gap nor overlap.
    if begin != expected_begin:
        kind = "overlaps the previous tensor" if begin < expected_begin else "leaves a gap"
        return ModelFormatError(file, f"tensor {key!r}: data_offsets {kind}", data_start + begin)
    bits = BITS[dtype]
    problem = array_shape_problem(shape, ITEMSIZES[dtype])
    if problem is not None:
        return ModelFormatError(file, f"tensor {key!r}: {problem}", data_start + begin)
    elements = math.prod(shape)
    if (elements * bits) % 8:
        return ModelFormatError(file, f"tensor {key!r}: {elements} x {bits}-bit is not whole bytes")
    if elements * bits // 8 != end - begin:
        return ModelFormatError(
            file,
            f"tensor {key!r}: shape {list(shape)} x {dtype} is {elements * bits // 8} bytes "
            f"but data_offsets span {end - begin}",
            data_start + begin,
        )
    return None


def coverage_problem(
    file: str, covered: int, data_start: int, data_len: int
) -> ModelFormatError | None:
    """Whether the tensors, ending at ``covered``, leave the end of the data section over."""
    if covered == data_len:
        return None
    return ModelFormatError(
        file,
        f"tensors cover {covered} bytes but the data section has {data_len}",
        data_start + covered,
    )


def _in_offset_order(columns: TensorColumns) -> TensorColumns:
    """The tensors sorted as the reference sorts them: by (begin, end, name)."""
    begins = columns.begins
    if all(map(operator.lt, begins, itertools.islice(begins, 1, None))):
        return columns
    order = sorted(zip(begins, columns.ends, columns.names, itertools.count()))
    return columns.picked(list(map(_fourth, order)))


_fourth = operator.itemgetter(3)


def _first_layout_problem(columns: TensorColumns) -> int | None:
    """The first tensor (in offset order, every one within the data section) that
    ``layout_problem`` finds wrong, or None. Each rule is checked over all tensors at once, and
    searched for its first failure only if it fails."""
    _, dtypes, shapes, begins, ends = columns
    repeat, islice = itertools.repeat, itertools.islice
    firsts: list[int | None] = []
    if begins[:1] != [0] or begins[1:] != ends[:-1]:  # each begins where the one before ended
        firsts.append(first_true(map(operator.ne, begins, itertools.chain((0,), ends))))
    held = len(shapes)
    if max(map(len, shapes), default=0) > MAX_ARRAY_DIMS:
        # numpy's dimensions past the first shape it cannot hold are never multiplied
        held = first_true(map(operator.gt, map(len, shapes), repeat(MAX_ARRAY_DIMS))) or 0
        firsts.append(held)
    elements = list(map(math.prod, islice(shapes, held)))
    itemsizes = list(map(ITEMSIZES.__getitem__, islice(dtypes, held)))
    sizes = list(map(operator.mul, elements, itemsizes))  # numpy's bytes for each array
    if max(sizes, default=0) >= INTPTR_LIMIT:
        firsts.append(first_true(map(operator.ge, sizes, repeat(INTPTR_LIMIT))))
    if 0 in elements:  # an empty tensor's non-zero dimensions may still overflow numpy's size
        for index in itertools.compress(itertools.count(), map(operator.not_, elements)):
            if array_shape_problem(shapes[index], itemsizes[index]) is not None:
                firsts.append(index)
                break
    # What the offsets span is what the shape's elements make, in whole bytes: for whole-byte
    # dtypes numpy's bytes, else elements x bits == 8 x span.
    spans = list(map(operator.sub, islice(ends, held), begins))
    if _SUB_BYTE.isdisjoint(dtypes):
        if sizes != spans:
            firsts.append(first_true(map(operator.ne, sizes, spans)))
    else:
        bits = map(operator.mul, elements, map(BITS.__getitem__, dtypes))
        firsts.append(first_true(map(operator.ne, bits, map(operator.mul, spans, repeat(8)))))
    found = [index for index in firsts if index is not None]
    return min(found) if found else None


_SUB_BYTE = {dtype for dtype, bits in BITS.items() if bits % 8}
