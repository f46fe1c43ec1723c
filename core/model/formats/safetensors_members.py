"""A safetensors header's members, read in file order as the reference reads them.

Entries in the plain form every writer gives them (an object of exactly dtype, shape and
data_offsets, of the types they must have) are read and checked a column at a time; any other
member, one by one (``checked_member``, the reference's reading of one member). The first
problem in file order is the one raised, naming its member, as the reference's walk does.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable
from typing import Any

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.safetensors_columns import (
    DTYPES,
    METADATA,
    Entry,
    TensorColumns,
    first_true,
)
from modelmon.core.model.formats.safetensors_json import (
    ENTRY_FIELDS,
    U64_LIMIT,
    HeaderProblem,
    checked_entry,
    checked_metadata,
    holds_inexact_number,
    lone_surrogate,
)


def checked_member(file: str, key: str, info: Any, metadata_seen: bool) -> Entry | dict[str, str]:
    """One member of the header, read and checked as the reference reads it: the tensor entry
    named ``key``, or for ``__metadata__`` the metadata. The problem raises, naming it."""
    if lone_surrogate(key):
        raise ModelFormatError(
            file, f"tensor name {ascii(key)[:40]} holds a lone surrogate escape", 8
        )
    try:
        if key == METADATA:
            if metadata_seen:
                raise HeaderProblem("given twice")
            return checked_metadata(info)
        dtype, shape, (begin, end) = checked_entry(info)
    except HeaderProblem as exc:
        what = METADATA if key == METADATA else f"tensor {key!r}"
        raise ModelFormatError(file, f"{what}: {exc.problem}", 8) from None
    if dtype not in DTYPES:
        raise unknown_dtype(file, key, dtype)
    return key, dtype, shape, begin, end


def unknown_dtype(file: str, key: str, dtype: str) -> ModelFormatError:
    return ModelFormatError(file, f"tensor {key!r}: unknown dtype {dtype!r}", 8)


def check_dtypes(file: str, columns: TensorColumns) -> None:
    """Raise for the first tensor, in file order, whose dtype the reference does not know."""
    unknown = first_true(map(operator.not_, map(DTYPES.__contains__, columns.dtypes)))
    if unknown is not None:
        raise unknown_dtype(file, columns.names[unknown], columns.dtypes[unknown])


def document_columns(
    file: str, document: Any, escapes: bool, exact_reading: Callable[[], Any] | None
) -> tuple[TensorColumns, dict[str, str]]:
    """The tensor entries of a decoded header (objects as ``Members``) in file order, and its
    metadata. Every member is checked, also one a later one of the same name replaces; the
    first problem in file order raises, naming its member. ``escapes``: the header holds
    ``\\u`` escapes (a name may hold a lone surrogate).

    Entries in the plain form (exactly dtype, shape and data_offsets, of the types they must
    have) are checked a column at a time; the others one by one. ``exact_reading``: None if
    the document's numbers are typed as serde types them, else how to read it so, which is
    done if a member of another form holds a number the two readings take differently.
    """
    if type(document) is not tuple:
        raise ModelFormatError(file, "header JSON is not an object", 8)
    keys: list[Any] = list(map(_key, document))
    infos: list[Any] = list(map(_value, document))
    count = itertools.count
    special = set(itertools.compress(count(), map(operator.eq, keys, _repeat(METADATA))))
    if escapes:
        special.update(itertools.compress(count(), map(lone_surrogate, keys)))
    fields, suspects = _plain_fields(infos)
    # Members read alone: those the columns cannot vouch for, and __metadata__ (or a name with
    # a lone surrogate), never a tensor whatever it holds. None: not a plain entry.
    rows = {
        index: None if index in special else _plain_entry(keys[index], infos[index])
        for index in sorted({*suspects, *special})
    }
    odd = [index for index, row in rows.items() if row is None]
    if exact_reading is not None and any(holds_inexact_number(infos[i]) for i in odd):
        del keys, infos, fields, rows, document
        return document_columns(file, exact_reading(), escapes, None)
    metadata: dict[str, str] | None = None
    for index in odd:
        checked = checked_member(file, keys[index], infos[index], metadata is not None)
        if isinstance(checked, dict):
            metadata = checked
        else:
            rows[index] = checked
    return _columns(keys, fields, rows), metadata or {}


_key, _value = operator.itemgetter(0), operator.itemgetter(1)
_first, _second, _third = (operator.itemgetter(n) for n in range(3))
# Entries are checked in runs of this many, and those of a run where one is not plain read
# alone: a hostile entry among a million costs one run.
_RUN = 1024

Fields = tuple[list[Any], list[Any], list[Any]]  # dtypes, shapes, data_offsets, as decoded


def _repeat(value: object) -> Iterable[Any]:
    return itertools.repeat(value)


def _only(values: Iterable[object], kind: type) -> bool:
    """Every value is exactly of ``kind`` (type(), not isinstance: a bool is no int)."""
    return set(map(type, values)) <= {kind}


def _plain_fields(infos: list[Any]) -> tuple[Fields, list[int]]:
    """The fields of every member, and the members they are not vouched for (placeholders
    stand for those fields): those of each run of ``_RUN`` where one is not a plain entry."""
    whole = _entry_fields(infos)  # else each run's own: the entries' fields are not uniform
    fields: Fields = whole or ([], [], [])
    suspects: list[int] = []
    for start in range(0, len(infos), _RUN):
        stop = min(start + _RUN, len(infos))
        run = _entry_fields(infos[start:stop]) if whole is None else _sliced(whole, start, stop)
        if run is None or not _plain_values(*run):
            suspects.extend(range(start, stop))
            run = ([""] * (stop - start), [[]] * (stop - start), [[0, 0]] * (stop - start))
        elif whole is not None:
            continue  # the whole's fields, vouched for
        for column, values in zip(fields, run, strict=True):
            column[start:stop] = values
    return fields, suspects


def _sliced(fields: Fields, start: int, stop: int) -> Fields:
    dtypes, shapes, bounds = fields
    return dtypes[start:stop], shapes[start:stop], bounds[start:stop]


def _plain_values(dtypes: list[Any], shapes: list[Any], bounds: list[Any]) -> bool:
    """Whether entries' fields are all plain: a dtype the reference knows, a list of u64
    integers, a list of two."""
    if not (_only(dtypes, str) and set(dtypes) <= DTYPES.keys()):
        return False
    if not (_only(shapes, list) and _only(bounds, list) and set(map(len, bounds)) == {2}):
        return False
    dims: list[Any] = list(itertools.chain.from_iterable(shapes))
    offsets: list[Any] = list(itertools.chain.from_iterable(bounds))
    if not (_only(dims, int) and _only(offsets, int)):
        return False
    if min(offsets) < 0 or max(offsets) >= U64_LIMIT:
        return False
    return not dims or (min(dims) >= 0 and max(dims) < U64_LIMIT)


def _columns(keys: list[Any], fields: Fields, rows: dict[int, Entry | None]) -> TensorColumns:
    """The tensors in file order: each member's fields, or where it was read alone its row
    (None: no tensor)."""
    dtypes, shapes, bounds = fields
    offsets: list[Any] = list(itertools.chain.from_iterable(bounds))
    columns = TensorColumns(keys, dtypes, list(map(tuple, shapes)), offsets[0::2], offsets[1::2])
    if not rows:
        return columns
    entries: list[Entry | None] = list(zip(*columns, strict=True))
    for index, row in rows.items():
        entries[index] = row
    return TensorColumns.of(filter(None, entries))


def _entry_fields(infos: list[Any]) -> Fields | None:
    """The dtype, shape and data_offsets columns of entries, or None unless every entry is an
    object of exactly those three fields.

    Writers put the fields in one order: taken by position when every entry uses the same
    order (no dict per entry), else through a dict per entry.
    """
    if not infos or not _only(infos, tuple) or set(map(len, infos)) != {3}:
        return None
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
    get = dict.get
    return (
        list(map(get, entries_info, _repeat("dtype"))),
        list(map(get, entries_info, _repeat("shape"))),
        list(map(get, entries_info, _repeat("data_offsets"))),
    )


def _plain_entry(key: Any, info: Any) -> Entry | None:
    """``checked_member``'s reading of an entry in the plain form, None for any other form."""
    if type(info) is not tuple or len(info) != 3:
        return None
    fields = dict(info)
    dtype, shape, bounds = fields.get("dtype"), fields.get("shape"), fields.get("data_offsets")
    if len(fields) != 3 or type(dtype) is not str or dtype not in DTYPES:
        return None
    if type(shape) is not list or type(bounds) is not list or len(bounds) != 2:
        return None
    numbers = shape + bounds
    if not _only(numbers, int) or min(numbers) < 0 or max(numbers) >= U64_LIMIT:
        return None
    return key, dtype, tuple(shape), bounds[0], bounds[1]
