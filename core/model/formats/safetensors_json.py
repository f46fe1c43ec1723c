"""A safetensors header's JSON, taken exactly as the reference reader takes it.

The reference (the ``safetensors`` Rust crate under the Python package) reads the header with
serde_json into ``HashMetadata { "__metadata__": Option<HashMap<String, String>>, #[flatten]
tensors: HashMap<String, TensorInfo> }``, ``TensorInfo { dtype, shape: Vec<usize>,
data_offsets: (usize, usize) }``. What that accepts is not what ``json.loads`` and a dict view
of its result accept:

- ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON; a number past a float's range (1e400,
  a 400-digit integer) is refused; ``-0``, and an integer past 64 bits, are floats, so no
  shape or offset;
- 128 nested arrays or objects are refused (serde_json's recursion limit);
- a ``\\u`` escape of a lone surrogate is refused;
- a field named twice in one tensor entry is refused, and so is ``__metadata__`` twice; a
  tensor named twice keeps its last entry, but every entry must be a valid one;
- an entry may also be a list ``[dtype, shape, data_offsets]``, and a dtype ``{"F16": null}``;
  fields an entry does not define are ignored; ``"__metadata__": null`` is no metadata.

So objects are decoded as tuples of their members (``object_pairs_hook=tuple``), duplicates
kept, and ``checked_entry``/``checked_metadata``/``check_value`` apply serde's rules.
``tests/core/model/formats/test_safetensors_reference.py`` checks them against the library.
"""

from __future__ import annotations

import json
import math
import operator
import re
from typing import Any

MAX_DEPTH = 127  # serde_json refuses a 128th level of nested arrays and objects
U64_LIMIT = 1 << 64
I64_MIN = -(1 << 63)
ENTRY_FIELDS = ("dtype", "shape", "data_offsets")

Members = tuple[tuple[str, Any], ...]  # a JSON object: its members in file order, duplicates kept

# "-0" where a number may begin: json.loads makes it the integer 0, serde_json the float -0.0.
_NEGATIVE_ZERO = re.compile(r"[\[,:][ \t\n\r]*-0(?![0-9.eE])")
_SURROGATE = re.compile("[\ud800-\udfff]")


class HeaderProblem(ValueError):
    """Why the header is not one the reference reads; ``at``: its offset in the JSON, if known."""

    def __init__(self, problem: str, at: int | None = None) -> None:
        super().__init__(problem)
        self.problem, self.at = problem, at


def _not_json(constant: str) -> float:
    raise HeaderProblem(f"{constant} is not JSON")


def _integer(text: str) -> int | float:
    """An integer as serde_json types it: u64 or i64, else a float ("-0" is one)."""
    if len(text) <= 20:
        value = int(text)
        if (value or not text.startswith("-")) and I64_MIN <= value < U64_LIMIT:
            return value
    return _float(text)


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = f"of {len(text)} digits" if len(text) > 24 else text
        raise HeaderProblem(f"number {shown} is out of range")
    return value


def header_text(raw: bytes) -> str:
    """The header's JSON text: it must be UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HeaderProblem("header is not valid UTF-8", exc.start) from None


def decode(text: str, exact: bool) -> Any:
    """The header's JSON value, objects as ``Members``. ``exact``: numbers typed as serde_json
    types them (a Python call per number: only where a number may be read otherwise, see
    ``holds_inexact_number`` and ``may_hold_negative_zero``)."""
    numbers: dict[str, Any] = {"parse_int": _integer, "parse_float": _float} if exact else {}
    try:
        return json.loads(text, object_pairs_hook=tuple, parse_constant=_not_json, **numbers)
    except json.JSONDecodeError as exc:
        problem = HeaderProblem(f"header is not valid JSON: {exc.msg}", exc.pos)
    except RecursionError:
        problem = HeaderProblem(f"header JSON is nested too deep (over {MAX_DEPTH} levels)")
    except HeaderProblem as exc:
        problem = exc
    except ValueError:  # an integer of over 4300 digits, which int() refuses: serde's way
        if exact:
            raise
        return decode(text, exact=True)
    if exact:
        raise problem
    return decode(text, exact=True)  # which may meet first a number serde refuses (1e400)


def may_hold_negative_zero(text: str) -> bool:
    """Whether ``-0`` may stand as a number in the header (a quick scan; strings may match)."""
    return "-0" in text and _NEGATIVE_ZERO.search(text) is not None


def has_escapes(text: str) -> bool:
    """Whether any string in the header may hold a ``\\u`` escape (and so a lone surrogate)."""
    return "\\u" in text


def lone_surrogate(text: str) -> bool:
    """Whether a decoded string holds half of a surrogate pair (escaped alone: serde refuses)."""
    return _SURROGATE.search(text) is not None


def check_value(value: Any, depth: int) -> None:
    """Refuse what serde_json refuses anywhere in a value that is, if an array or object, at
    nesting level ``depth`` (the header's object is level 1): a level past ``MAX_DEPTH``, or
    a lone surrogate in a key or a string."""
    pending = [(value, depth)]
    while pending:
        item, level = pending.pop()
        if isinstance(item, str):
            if lone_surrogate(item):
                raise HeaderProblem(f"string {ascii(item)[:40]} holds a lone surrogate escape")
        elif isinstance(item, tuple | list):
            if level > MAX_DEPTH:
                raise HeaderProblem(f"header JSON is nested too deep (over {MAX_DEPTH} levels)")
            is_object = isinstance(item, tuple)
            for member in item:
                if is_object:  # an object's (key, value)
                    pending.append((member[0], level))
                    member = member[1]
                pending.append((member, level + 1))


def holds_inexact_number(value: Any) -> bool:
    """Whether a value decoded without ``exact`` holds a number serde_json reads otherwise: an
    integer past i64/u64 (a float to serde) or a float past its range (refused). With no
    ``-0`` in the header (``may_hold_negative_zero``), the two readings differ only there."""
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is int:
            if not I64_MIN <= item < U64_LIMIT:
                return True
        elif kind is float:
            if math.isinf(item):
                return True
        elif kind is list:
            pending.extend(item)
        elif kind is tuple:  # an object's (key, value) members
            pending.extend(map(_member_value, item))
    return False


_member_value = operator.itemgetter(1)


def _usize(value: Any) -> bool:
    return type(value) is int and 0 <= value < U64_LIMIT


def checked_entry(value: Any) -> tuple[str, tuple[int, ...], tuple[int, int]]:
    """(dtype, shape, (begin, end)) of one tensor entry, as serde reads a ``TensorInfo``;
    HeaderProblem says what is wrong. The dtype is checked against the table by the caller."""
    check_value(value, 2)
    if isinstance(value, list):
        if len(value) != len(ENTRY_FIELDS):
            problem = f"entry is a list of {len(value)} items, not [dtype, shape, data_offsets]"
            raise HeaderProblem(problem)
        dtype, shape, offsets = value
    elif isinstance(value, tuple):
        fields: dict[str, Any] = {}
        for key, item in value:
            if key in ENTRY_FIELDS:
                if key in fields:
                    raise HeaderProblem(f"field {key!r} given twice")
                fields[key] = item
        missing = [key for key in ENTRY_FIELDS if key not in fields]
        if missing:
            raise HeaderProblem(f"field {missing[0]!r} missing")
        dtype, shape, offsets = (fields[key] for key in ENTRY_FIELDS)
    else:
        raise HeaderProblem("entry is not an object")
    if isinstance(dtype, tuple) and len(dtype) == 1 and dtype[0][1] is None:
        dtype = dtype[0][0]  # serde's map form of an enum: {"F16": null}
    if not isinstance(dtype, str):
        raise HeaderProblem(f"dtype {_shown(dtype)} is not a name")
    if not (isinstance(shape, list) and all(map(_usize, shape))):
        raise HeaderProblem(f"shape {_shown(shape)} is not a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_usize, offsets))):
        raise HeaderProblem(f"data_offsets {_shown(offsets)} is not [begin, end]")
    return dtype, tuple(shape), (offsets[0], offsets[1])


def checked_metadata(value: Any) -> dict[str, str]:
    """``__metadata__``: null, or an object of strings (a key given twice keeps its last)."""
    check_value(value, 2)
    if value is None:
        return {}
    if not (isinstance(value, tuple) and all(type(item) is str for _, item in value)):
        raise HeaderProblem("__metadata__ must map strings to strings")
    return dict(value)


def _shown(value: Any) -> str:
    """A decoded JSON value as it was written, shortened: for a one-line message."""
    if isinstance(value, tuple):
        value = dict(value)
    try:
        text = json.dumps(value)
    except ValueError:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
