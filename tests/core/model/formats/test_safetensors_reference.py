"""modelmon opens a safetensors file if and only if the reference library does, and finds the
same bytes for every tensor.

The reference is the installed ``safetensors`` package: ``safe_open`` and ``deserialize`` both
read a header with its Rust ``SafeTensors::read_metadata`` (serde_json). Headers are written
here as JSON text, not with ``json.dumps``, so they can hold what a writer never would:
duplicate keys at every level, NaN, -0, 400-digit numbers, lone surrogate escapes, 130 levels
of nesting, entries as lists, dtypes as maps. The one place modelmon is stricter is a shape
numpy cannot hold: ``safe_open`` opens such a file and its ``get_tensor`` fails.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest
import safetensors
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model

# Bits per element of the reference's Dtype (safetensors/src/tensor.rs, Dtype::bitsize).
REFERENCE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8,
    "F8_E4M3": 8, "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16,
    "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64,
    "U64": 64,
}  # fmt: skip
NOT_DTYPES = ["f16", "F12", "Q4_K", "F8_E4M3FN", "FP8", ""]


def file_bytes(header: str, data: bytes = b"", length: int | None = None) -> bytes:
    raw = header.encode("utf-8", "surrogatepass")
    return struct.pack("<Q", len(raw) if length is None else length) + raw + data


def reference(content: bytes) -> dict[str, tuple[str, list[int], bytes]] | None:
    """What the library finds in a file, or None where it refuses it."""
    try:
        tensors = safetensors.deserialize(content)
    except Exception:  # the library raises its own types
        return None
    return {name: (t["dtype"], list(t["shape"]), bytes(t["data"])) for name, t in tensors}


def numpy_can_hold(dtype: str, shape: list[int]) -> bool:
    """What ``get_tensor`` needs of a shape: numpy's 64 dimensions and int64 byte count."""
    itemsize = max(1, REFERENCE_BITS[dtype] // 8)
    return len(shape) <= 64 and math.prod(d for d in shape if d) * itemsize < 2**63


def check_agreement(path: Path, content: bytes) -> str:
    """Write ``content`` to ``path``; modelmon and the library must agree on it."""
    path.write_bytes(content)
    found = reference(content)
    try:
        model = open_model(path)
    except ModelFormatError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        if found is not None:  # only the documented stricter check may refuse it
            assert not all(numpy_can_hold(dtype, shape) for dtype, shape, _ in found.values()), (
                f"safetensors opens what modelmon refuses: {message}"
            )
        return "refused"
    assert found is not None, "modelmon opens what safetensors refuses"
    mine = {e.name: (e.dtype, list(e.shape), content[e.offset : e.end]) for e in model.extents}
    assert mine == found
    return "opened"


def entry(dtype: str = '"U8"', shape: str = "[4]", offsets: str = "[0,4]", more: str = "") -> str:
    """A tensor entry as JSON text; ``more``: members written after the three fields."""
    return '{"dtype":' + dtype + ',"shape":' + shape + ',"data_offsets":' + offsets + more + "}"


def header(*members: str) -> str:
    return "{" + ",".join(members) + "}"


def tensor(name: str = "a", **fields: str) -> str:
    return '"' + name + '":' + entry(**fields)


U8 = tensor()  # four bytes
DEEP = "[" * 125 + "]" * 125  # 125 levels, inside the header's 2
ABCD = b"abcd"
CASES: dict[str, tuple[str, bytes]] = {
    "a field twice in an entry": (header(tensor(more=',"dtype":"U8"')), ABCD),
    "data_offsets twice": (header(tensor(more=',"data_offsets":[0,4]')), ABCD),
    "an unknown field twice": (header(tensor(more=',"x":1,"x":2')), ABCD),
    "a tensor twice, last valid": (header(tensor(offsets="[4,8]"), U8), ABCD),
    "a tensor twice, first invalid": (header(tensor(dtype='"XX"'), U8), ABCD),
    "a tensor twice, first no shape": (header('"a":{"dtype":"U8","data_offsets":[0,4]}', U8), ABCD),
    "__metadata__ twice": (header('"__metadata__":{}', '"__metadata__":{}', U8), ABCD),
    "a metadata key twice": (header('"__metadata__":{"x":"1","x":"2"}', U8), ABCD),
    "__metadata__ null": (header('"__metadata__":null', U8), ABCD),
    "__metadata__ a list": (header('"__metadata__":[]', U8), ABCD),
    "__metadata__ a number value": (header('"__metadata__":{"x":1}', U8), ABCD),
    "NaN beside": (header(tensor(more=',"x":NaN')), ABCD),
    "-Infinity beside": (header(tensor(more=',"x":-Infinity')), ABCD),
    "-0 offset": (header(tensor(offsets="[-0,4]")), ABCD),
    "-0 beside": (header(tensor(more=',"x":-0')), ABCD),
    "4.0 dimension": (header(tensor(shape="[4.0]")), ABCD),
    "1e400 beside": (header(tensor(more=',"x":1e400')), ABCD),
    "400-digit integer beside": (header(tensor(more=',"x":1' + "0" * 400)), ABCD),
    "300-digit integer beside": (header(tensor(more=',"x":1' + "0" * 300)), ABCD),
    "5000-digit integer beside": (header(tensor(more=',"x":1' + "0" * 5000)), ABCD),
    "5000-digit offset": (header(tensor(offsets="[0," + "9" * 5000 + "]")), ABCD),
    "2**64 dimension": (header(tensor("e", shape=f"[{2**64},0]", offsets="[0,0]"), U8), ABCD),
    "127 levels": (header(tensor(more=',"x":' + DEEP)), ABCD),
    "128 levels": (header(tensor(more=',"x":[' + DEEP + "]")), ABCD),
    "lone surrogate name": (header(tensor("\\ud800")), ABCD),
    "lone surrogate beside": (header(tensor(more=',"x":"\\udc00"')), ABCD),
    "surrogate pair name": (header(tensor("\\ud83d\\ude00")), ABCD),
    "escaped name": (header(tensor("\\u0061")), ABCD),
    "entry as a list": (header('"a":["U8",[4],[0,4]]'), ABCD),
    "entry as a list of 2": (header('"a":["U8",[4]]'), ABCD),
    "dtype as a map": (header(tensor(dtype='{"U8":null}')), ABCD),
    "dtype as a map with a value": (header(tensor(dtype='{"U8":[]}')), ABCD),
    "leading whitespace": (" \t\n" + header(U8), ABCD),
    "trailing spaces": (header(U8) + "    ", ABCD),
    "trailing NUL": (header(U8) + "\x00", ABCD),
    "form feed": ('{"a":\x0c' + entry() + "}", ABCD),
    "trailing data byte": (header(U8), b"abcde"),
    "empty header, no data": ("{}", b""),
    "empty header, one byte": ("{}", b"a"),
    "F8_E4M3FNUZ": (header(tensor(dtype='"F8_E4M3FNUZ"')), ABCD),
    "F4 odd count": (header(tensor(dtype='"F4"', shape="[3]", offsets="[0,2]")), b"ab"),
    "65 dimensions": (header(tensor(shape=str([1] * 65), offsets="[0,1]")), b"a"),
    "empty tensors at one offset": (
        header(
            tensor("e", shape="[0]", offsets="[0,0]"),
            tensor("f", shape="[0,3]", offsets="[0,0]"),
            U8,
        ),
        ABCD,
    ),
    "overflow before a zero": (
        header(tensor("e", shape=f"[{2**32},{2**32},0]", offsets="[0,0]"), U8),
        ABCD,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_edge_case_headers(tmp_path: Path, case: str) -> None:
    header, data = CASES[case]
    check_agreement(tmp_path / "m.safetensors", file_bytes(header, data))


# --- generated headers ----------------------------------------------------------------------

NUMBERS_BESIDE = ["1", "-0", "0.5", "1e400", "NaN", "-Infinity", "1" + "0" * 400, '"\\ud800"']
METADATA = ["", "", "", '{"format":"pt"}', "null", "{}", "[]", '{"a":1}', '{"a":"1","a":"2"}']
NAMES = ["a", "b", "model.layers.0.w", "", "é", "\\u00e9", "\\ud83d\\ude00", "\\udc00", "a\\nb"]


@st.composite
def headers(draw: st.DrawFn) -> bytes:
    """A header and data section near the valid ones, with one or more faults in it."""
    count = draw(st.integers(0, 4))
    members: list[str] = []
    offset, data = 0, b""
    for index in range(count):
        dtype = draw(st.sampled_from([*REFERENCE_BITS, *NOT_DTYPES[:2]]))
        bits = REFERENCE_BITS.get(dtype, 8)
        elements = draw(st.sampled_from([0, 1, 2, 6, 8]))
        shape: list[str] = [str(elements)]
        if draw(st.booleans()):
            shape = ["1", str(elements)] if draw(st.booleans()) else [str(elements), "1", "1"]
        size = elements * bits // 8
        begin, end = offset, offset + size
        offset = end
        fields = {
            "dtype": f'"{dtype}"',
            "shape": "[" + ",".join(shape) + "]",
            "data_offsets": f"[{begin},{end}]",
        }
        fault = draw(st.sampled_from(["none"] * 6 + ["dtype", "shape", "offsets", "field"]))
        if fault == "dtype":
            fields["dtype"] = draw(st.sampled_from(['{"U8":null}', "null", "7", '"f16"']))
        elif fault == "shape":
            fields["shape"] = draw(st.sampled_from(["[-0]", "[1.0]", "[true]", "[]", "{}", "[-1]"]))
        elif fault == "offsets":
            shift = draw(st.sampled_from([-1, 1, 2**64]))
            fields["data_offsets"] = f"[{begin + shift},{end + shift}]"
            if draw(st.booleans()):
                fields["data_offsets"] = f"[{begin},{end},{end}]"
        written = list(fields.items())
        if fault == "field":
            written.append(draw(st.sampled_from(list(fields.items()))))
        if draw(st.booleans()):
            written.append(("x", draw(st.sampled_from(NUMBERS_BESIDE))))
        written = draw(st.permutations(written))
        if draw(st.integers(0, 9)) == 0:
            entry = f"[{fields['dtype']},{fields['shape']},{fields['data_offsets']}]"
        else:
            entry = "{" + ",".join(f'"{key}":{value}' for key, value in written) + "}"
        name = draw(st.sampled_from(NAMES)) if draw(st.booleans()) else f"t{index}"
        members.append(f'"{name}":{entry}')
        data += bytes(range(begin % 256, begin % 256 + size)) if size <= 200 else bytes(size)
    metadata = draw(
        st.sampled_from(
            ["", "", '{"format":"pt"}', "null", "{}", "[]", '{"a":1}', '{"a":"1","a":"2"}']
        )
    )
    if metadata:
        members.insert(draw(st.integers(0, len(members))), f'"__metadata__":{metadata}')
    if members and draw(st.integers(0, 4)) == 0:  # a member given twice
        members.append(draw(st.sampled_from(members)))
    text = "{" + ",".join(draw(st.permutations(members))) + "}"
    text = draw(st.sampled_from(["", "", " ", "\n"])) + text
    text += draw(st.sampled_from(["", "", "  ", "\t\r\n", "\x00"]))
    data += draw(st.sampled_from([b"", b"", b"", b"x"]))
    if data and draw(st.integers(0, 9)) == 0:
        data = data[:-1]
    return file_bytes(text, data)


def test_generated_headers_and_their_outcomes(tmp_path: Path) -> None:
    """modelmon and the reference agree on every generated file; and the generator makes
    files of both kinds (it is no use if it makes only files that are refused, or only ones
    that open)."""
    outcomes: list[str] = []

    @settings(
        max_examples=400,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(content=headers())
    def agree(content: bytes) -> None:
        outcomes.append(check_agreement(tmp_path / "g.safetensors", content))

    agree()
    assert len(outcomes) >= 400 // 2, len(outcomes)
    assert 0.1 < outcomes.count("opened") / len(outcomes) < 0.9, outcomes.count("opened")
