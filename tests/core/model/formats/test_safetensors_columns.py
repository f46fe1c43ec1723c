"""The quick reading of safetensors headers (the writers'-form scan, the whole-column checks)
agrees with the entry-by-entry reference walk (``reference_walk``) on hostile headers: the
same tensors and metadata, or the same first problem, worded the same, naming the same tensor.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import safetensors_members
from modelmon.core.model.formats.safetensors import _decoded, _header_columns
from modelmon.core.model.formats.safetensors_columns import (
    BITS,
    TensorColumns,
    checked_layout,
    deduplicated,
)
from modelmon.core.model.formats.safetensors_json import has_escapes, may_hold_negative_zero
from modelmon.core.model.formats.safetensors_members import document_columns
from modelmon.core.model.formats.safetensors_scan import scan_header

from .reference_walk import reference_walk

FILE = "hostile.safetensors"
DATA_START = 1000  # where the data section would begin: only offsets in messages show it

# A tensor's fields as JSON texts, changed one at a time: (field, new JSON text). A fault may be
# no fault at all (another form of a valid entry): which, the reference walk says.
FAULTS = [
    ("dtype", '"f16"'),
    ("dtype", '"F12"'),
    ("dtype", '""'),
    ("dtype", '"__metadata__"'),
    ("dtype", '{"U8":null}'),
    ("dtype", "null"),
    ("dtype", "7"),
    ("shape", "[true]"),
    ("shape", "[1.0]"),
    ("shape", "[-1]"),
    ("shape", "[-0]"),
    ("shape", f"[{2**64}]"),
    ("shape", f"[{2**64 - 1},0]"),
    ("shape", f"[0,{2**62},4]"),
    ("shape", f"[{2**32},{2**32},0]"),
    ("shape", str([1] * 65)),
    ("shape", str([0] * 65)),
    ("shape", '"x"'),
    ("shape", "{}"),
    ("shape", "[3]"),
    ("data_offsets", "[0.0,1]"),
    ("data_offsets", '["0","1"]'),
    ("data_offsets", "[0]"),
    ("data_offsets", "[0,1,1]"),
    ("data_offsets", f"[{2**64},{2**64}]"),
    ("data_offsets", "[7,3]"),
    ("data_offsets", "[0,100000]"),
    ("x", "1"),
    ("x", "NaN"),
    ("x", "1e400"),
    ("x", '"\\udc00"'),
    ("x", "1" + "0" * 30),
    ("x", "[" * 130 + "]" * 130),
]
NAMES = ["", "é", "\\u00e9", "\\ud800", 'a\\"b', "__metadata__", "model.layers.0.w", "t0"]
METADATA = ['{"format":"pt"}', "null", "{}", "[]", '{"a":1}', '{"a":"\\ud800"}', '{"a":"x\\"}"}']
FORMS = [(":", ","), (": ", ", "), (" : ", " ,\n  ")]


@st.composite
def hostile_headers(draw: st.DrawFn) -> tuple[str, int]:
    """A header's JSON text and its data section's length: tensors laid end to end, then
    faults: fields changed, entries moved, given twice, in another form; names and metadata of
    every kind; the writers' separators or others."""
    count = draw(st.sampled_from([0, 1, 2, 3, 5, 8, 40]))
    colon, comma = draw(st.sampled_from(FORMS))
    rarity = draw(st.sampled_from([0, 0, 60, 12, 3]))  # 1 in this many entries is changed

    def now() -> bool:
        return rarity > 0 and draw(st.integers(1, rarity)) == 1

    members: list[str] = []
    offset = 0
    for index in range(count):
        dtype = draw(st.sampled_from(sorted(BITS)))
        shape = draw(st.sampled_from([[], [0], [1], [2], [3], [2, 3], [4, 0], [1, 1, 8]]))
        elements = 1
        for dim in shape:
            elements *= dim
        size = elements * BITS[dtype] // 8
        if elements * BITS[dtype] % 8:  # not whole bytes: sometimes made so, else left bad
            shape, size = (shape, size + 1) if now() else ([2, 4], BITS[dtype])
        fields = {
            "dtype": json.dumps(dtype),
            "shape": json.dumps(shape, separators=(comma, colon)),
            "data_offsets": f"[{offset}{comma}{offset + size}]",
        }
        offset += size
        if now():
            field, value = draw(st.sampled_from(FAULTS))
            fields[field] = value
        written = list(fields.items())
        form = draw(st.integers(0, 3)) if now() else -1
        if form == 0:
            written = draw(st.permutations(written))
        elif form == 1:
            written.append(draw(st.sampled_from(written)))  # a field given twice
        elif form == 2:
            written = written[:2]
        if form == 3:
            entry = "[" + comma.join(value for _, value in written) + "]"
        else:
            entry = "{" + comma.join(f'"{k}"{colon}{v}' for k, v in written) + "}"
        name = draw(st.sampled_from(NAMES)) if now() else f"model.layers.{index // 3}.t{index % 3}"
        members.append(f'"{name}"{colon}{entry}')
    if members and now():  # a member given again, somewhere
        members.insert(draw(st.integers(0, len(members))), draw(st.sampled_from(members)))
    if draw(st.integers(0, 2)) == 0:  # out of offset order
        members = draw(st.permutations(members))
    if draw(st.booleans()):
        value = draw(st.sampled_from(METADATA)) if now() else '{"format":"pt"}'
        value = value.replace(":", colon).replace(",", comma) if value.startswith("{") else value
        at = 0 if draw(st.booleans()) else draw(st.integers(0, len(members)))
        for _ in range(1 + now()):
            members.insert(at, f'"__metadata__"{colon}{value}')
    text = "{" + comma.join(members) + "}"
    text = draw(st.sampled_from([" ", "\n"])) + text if now() else text
    text += " " * draw(st.sampled_from([0, 0, 3, 7, 63, 64, 65]))
    text += draw(st.sampled_from(["", "\t"]))
    data_len = offset + (draw(st.sampled_from([1, -1])) if now() else 0)
    return text, max(data_len, 0)


Outcome = tuple[str, Any, Any]


def outcome(read: Any) -> Outcome:
    try:
        columns, metadata = read()
    except ModelFormatError as exc:
        return ("refused", str(exc), None)
    return ("opened", columns, metadata)


def document_path(text: str, data_len: int) -> tuple[TensorColumns, dict[str, str]]:
    """The json.loads path alone, as it reads a header the scan does not."""
    exact = may_hold_negative_zero(text)
    reread = None if exact else lambda: _decoded(FILE, text, True)
    columns, metadata = document_columns(
        FILE, _decoded(FILE, text, exact), has_escapes(text), reread
    )
    return checked_layout(FILE, deduplicated(columns), DATA_START, data_len), metadata


@pytest.mark.parametrize("run", [3, safetensors_members._RUN])
def test_quick_reading_agrees_with_the_reference_walk(
    monkeypatch: pytest.MonkeyPatch, run: int
) -> None:
    """Every header: the parser (scan, else json.loads and whole columns), the json.loads
    path alone, and the reference walk give one answer; the json.loads path's runs of entries
    also as short as 3 (more runs, each holding fewer faults). The generator must make
    headers the scan reads, headers it leaves to json.loads, and both outcomes."""
    monkeypatch.setattr(safetensors_members, "_RUN", run)
    seen: Counter[str] = Counter()

    @settings(
        max_examples=600,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(header=hostile_headers())
    def agree(header: tuple[str, int]) -> None:
        text, data_len = header
        expected = outcome(lambda: reference_walk(FILE, text, DATA_START, data_len))
        assert outcome(lambda: _header_columns(FILE, text, DATA_START, data_len)) == expected
        assert outcome(lambda: document_path(text, data_len)) == expected
        seen[expected[0]] += 1
        seen["scanned" if scan_header(text) is not None else "json.loads"] += 1

    agree()
    assert min(seen["opened"], seen["refused"]) > 120, seen
    assert min(seen["scanned"], seen["json.loads"]) > 120, seen


def many_entries(count: int) -> dict[str, Any]:
    return {
        f"model.layers.{i // 10}.t{i % 10}": {
            "dtype": "U8",
            "shape": [2],
            "data_offsets": [2 * i, 2 * i + 2],
        }
        for i in range(count)
    }


@pytest.mark.parametrize("separators", [(",", ":"), (", ", ": "), (",", " : ")])
@pytest.mark.parametrize(
    "fault",
    ["none", "gap", "overlap", "dtype", "bool", "size", "duplicate", "reversed", "metadata"],
)
def test_one_fault_among_thousands(separators: tuple[str, str], fault: str) -> None:
    """A fault deep in a long header is found where the walk finds it, whichever way the
    header is read (the scan, the whole columns, the entries one by one)."""
    header = many_entries(3000)
    names = list(header)
    bad = names[2000]
    if fault == "gap":
        header[bad]["data_offsets"] = [4001, 4003]
    elif fault == "overlap":
        header[bad]["data_offsets"] = [3999, 4001]
    elif fault == "dtype":
        header[bad]["dtype"] = "U9"
    elif fault == "bool":
        header[bad]["shape"] = [True, 2]
    elif fault == "size":
        header[bad]["dtype"] = "BF16"
    elif fault == "duplicate":
        header = dict([*header.items(), (names[10], header[names[10]])])
    elif fault == "reversed":
        header = dict(reversed(header.items()))
    elif fault == "metadata":
        header = {**header, "__metadata__": {"format": "pt", names[5]: "x"}}
    text = json.dumps(header, separators=separators)
    data_len = 2 * 3000
    expected = outcome(lambda: reference_walk(FILE, text, DATA_START, data_len))
    assert outcome(lambda: _header_columns(FILE, text, DATA_START, data_len)) == expected
    assert outcome(lambda: document_path(text, data_len)) == expected
    if fault in ("gap", "overlap", "dtype", "bool", "size"):
        assert expected[0] == "refused" and f"tensor {bad!r}" in expected[1]
    else:
        assert expected[0] == "opened"


def u8(begin: int) -> str:
    return f'{{"dtype":"U8","shape":[1],"data_offsets":[{begin},{begin + 1}]}}'


def members(*texts: str) -> str:
    return "{" + ",".join(texts) + "}"


A, B, META = f'"a":{u8(0)}', f'"b":{u8(1)}', '"__metadata__":{"format":"pt"}'
NAMED_METADATA = f'"__metadata__":{u8(1)}'  # a tensor named so
# A header in the writers' form but for its metadata, and whether the scan reads it
WRITER_FORM = {
    "metadata first": (members(META, A, B), True),
    "metadata between": (members(A, META, B), True),
    "metadata last": (members(A, B, META), True),
    "metadata null": (members(A, '"__metadata__":null', B), True),
    "metadata escaped": (members('"__metadata__":{"k":"a\\"},\\"b\\u00e9"}', A, B), True),
    "metadata lone surrogate": (members('"__metadata__":{"k":"\\ud800"}', A, B), False),
    "metadata twice": (members('"__metadata__":{}', A, '"__metadata__":{}', B), False),
    "a tensor named __metadata__": (members('"__metadata__":{}', A, NAMED_METADATA), False),
    "only a tensor named __metadata__": (members(A, NAMED_METADATA), False),
    "dtype __metadata__": (members(A, B.replace('"U8"', '"__metadata__"')), False),
    "metadata of a number": (members(A, B, '"__metadata__":{"k":1}'), False),
    "metadata a list": (members('"__metadata__":[]', A, B), False),
    "a name given twice": (members(A, A.replace("[0,1]", "[1,2]")), True),
}


@pytest.mark.parametrize("case", sorted(WRITER_FORM))
def test_writer_form_headers_with_metadata_anywhere(case: str) -> None:
    """Headers in the writers' form but for their metadata: wherever it is, whatever it
    holds, given twice, or a tensor of its name. The scan reads the good ones."""
    text, scanned = WRITER_FORM[case]
    expected = outcome(lambda: reference_walk(FILE, text, DATA_START, 2))
    assert outcome(lambda: _header_columns(FILE, text, DATA_START, 2)) == expected
    assert (scan_header(text) is not None) == scanned
