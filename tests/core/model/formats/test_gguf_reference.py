"""modelmon opens a GGUF file if and only if gguf-py's ``GGUFReader`` does, but where it is
stricter on purpose, and finds the same bytes for every tensor.

The stricter checks, each a refusal llama.cpp makes too or a bound on the work a header can
cause (``core/model/formats/gguf.py``): more than 4 dimensions, a data offset off the
alignment, overlapping tensors, a shape past int64, an empty tensor placed past the end of the
file, KV arrays nested over 4 deep or holding over 4M elements, counts past 2M tensors or 1M
KVs. GGUFReader trusts counts, so the generated files keep theirs within a step of the truth.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model

F32, F16, I8, Q8_0, RETIRED, UNKNOWN = 0, 1, 24, 8, 4, 99  # ggml type numbers
UINT8, UINT32, STRING, ARRAY, BOOL, BAD_TYPE = 0, 4, 8, 9, 7, 13  # GGUF value types
# (ggml type, elements per block, bytes per block) of the types generated
TYPES = {F32: (1, 4), F16: (1, 2), I8: (1, 1), Q8_0: (32, 34)}
STRICTER = (
    "dimensions (max 4)",
    "is not a multiple of the alignment",
    "overlap",
    "nested more than",
    "modelmon reads",
    "absurd shape",
    "runs past the end of the file",  # only allowed below for an empty tensor
)


def gstr(text: str | bytes, order: str = "<") -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(order + "Q", len(raw)) + raw


def kv(key: str | bytes, value_type: int, payload: bytes, order: str = "<") -> bytes:
    return gstr(key, order) + struct.pack(order + "I", value_type) + payload


def info(name: str | bytes, dims: tuple[int, ...], kind: int, offset: int, order: str = "<"):
    body = struct.pack(order + "I", len(dims)) + b"".join(struct.pack(order + "Q", d) for d in dims)
    return gstr(name, order) + body + struct.pack(order + "IQ", kind, offset)


def gguf(
    kvs: list[bytes],
    infos: list[bytes],
    data: bytes,
    *,
    order: str = "<",
    magic: bytes = b"GGUF",
    version: int = 3,
    counts: tuple[int, int] | None = None,
    alignment: int = 32,
) -> bytes:
    tensors, keys = counts if counts is not None else (len(infos), len(kvs))
    head = magic + struct.pack(order + "IQQ", version, tensors, keys) + b"".join(kvs + infos)
    return head + b"\0" * (-len(head) % alignment) + data


def reference(path: Path) -> dict[str, tuple[int, int, bytes]] | None:
    """What GGUFReader finds: {name: (data offset, bytes, the bytes)}; None where it refuses."""
    try:
        reader = GGUFReader(path)
        found = {
            t.name: (int(t.data_offset), int(t.n_bytes), np.array(t.data).tobytes())
            for t in reader.tensors
        }
    except Exception:  # the reader raises whatever numpy or struct raise
        return None
    del reader  # its map
    return found


def check_agreement(path: Path, content: bytes) -> str:
    path.write_bytes(content)
    found = reference(path)
    try:
        model = open_model(path)
    except ModelFormatError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        if found is not None:
            assert any(reason in message for reason in STRICTER), f"GGUFReader opens: {message}"
            if "runs past the end of the file" in message:
                assert any(length == 0 for _, length, _ in found.values()), message
        return "refused"
    assert found is not None, "modelmon opens what GGUFReader refuses"
    mine = {e.name: (e.offset, e.length, content[e.offset : e.end]) for e in model.extents}
    assert mine == found
    return "opened"


ARCH = kv("general.architecture", STRING, gstr("llama"))
W = info("w", (8,), F32, 0)
DATA = bytes(range(32))
CASES = {
    "plain": gguf([ARCH], [W], DATA),
    "big-endian": gguf(
        [kv("general.architecture", STRING, gstr("llama", ">"), ">")],
        [info("w", (8,), F32, 0, ">")],
        DATA,
        order=">",
    ),
    "byte-swapped magic": gguf([ARCH], [W], DATA, magic=b"FUGG"),
    "version 1": gguf([ARCH], [W], DATA, version=1),
    "a KV named GGUF.version": gguf([kv("GGUF.version", UINT32, b"\3\0\0\0")], [W], DATA),
    "a KV key twice": gguf([ARCH, ARCH], [W], DATA),
    "a tensor name twice": gguf([ARCH], [W, info("w", (8,), F32, 32)], DATA * 2),
    "a key not UTF-8": gguf([kv(b"\xff", UINT8, b"\1")], [W], DATA),
    "a value not UTF-8": gguf([kv("x", STRING, gstr(b"\xff"))], [W], DATA),
    "an unknown value type": gguf([kv("x", BAD_TYPE, b"\1")], [W], DATA),
    "a bool of 2": gguf([kv("x", BOOL, b"\2")], [W], DATA),
    "alignment 64": gguf([kv("general.alignment", UINT32, b"\x40\0\0\0")], [W], DATA, alignment=64),
    "alignment 48": gguf([kv("general.alignment", UINT32, b"\x30\0\0\0")], [W], DATA, alignment=48),
    "alignment a u8": gguf([kv("general.alignment", UINT8, b"\x20")], [W], DATA),
    "a retired type": gguf([ARCH], [info("w", (32,), RETIRED, 0)], bytes(20)),
    "an unknown type": gguf([ARCH], [info("w", (8,), UNKNOWN, 0)], DATA),
    "Q8_0 row not whole blocks": gguf([ARCH], [info("w", (16,), Q8_0, 0)], bytes(34)),
    "Q8_0 without dimensions": gguf([ARCH], [info("w", (), Q8_0, 0)], bytes(34)),
    "F32 without dimensions": gguf([ARCH], [info("w", (), F32, 0)], DATA[:4]),
    "5 dimensions": gguf([ARCH], [info("w", (2, 2, 2, 1, 1), F32, 0)], DATA),
    "misaligned offset": gguf([ARCH], [info("w", (4,), F32, 4)], DATA),
    "overlapping tensors": gguf([ARCH], [W, info("v", (8,), F32, 0)], DATA),
    "data past the end": gguf([ARCH], [info("w", (16,), F32, 0)], DATA),
    "empty tensor past the end": gguf([ARCH], [W, info("e", (0,), F32, 4096)], DATA),
    "no tensors": gguf([ARCH], [], b""),
    "one tensor count too many": gguf([ARCH], [W], DATA, counts=(2, 1)),
    "header only": gguf([], [], b"")[:24],
    "cut in the KVs": gguf([ARCH], [W], DATA)[:40],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_edge_case_files(tmp_path: Path, case: str) -> None:
    check_agreement(tmp_path / "m.gguf", CASES[case])


@st.composite
def files(draw: st.DrawFn) -> bytes:
    order = draw(st.sampled_from(["<", "<", ">"]))
    alignment = draw(st.sampled_from([32, 32, 64, 16]))
    kvs = [kv("general.architecture", STRING, gstr("llama", order), order)]
    if alignment != 32 or draw(st.booleans()):
        kvs.append(kv("general.alignment", UINT32, struct.pack(order + "I", alignment), order))
    if draw(st.booleans()):  # an array, maybe nested
        inner = struct.pack(order + "IQ", UINT8, 3) + b"abc"
        value = struct.pack(order + "IQ", ARRAY, 2) + inner * 2
        kvs.append(kv("tokenizer.x", ARRAY, value, order))
    if draw(st.integers(0, 5)) == 0:
        kvs.append(draw(st.sampled_from(kvs)))
    infos, data = [], b""
    for index in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from([*TYPES, RETIRED]))
        block, size = TYPES.get(kind, (32, 18))
        rows = draw(st.sampled_from([0, 1, 2]))
        dims = (block * draw(st.sampled_from([1, 2])), rows)
        if draw(st.integers(0, 6)) == 0:
            dims = draw(st.sampled_from([(), (3,), (1, 1, 1, 1, 2), (2**40, 2**40)]))
        n_bytes = (dims[0] // block * size if dims else size) * (dims[1] if len(dims) > 1 else 1)
        offset = len(data) + draw(st.sampled_from([0, 0, 0, alignment, -alignment, 4]))
        name = draw(st.sampled_from([f"t{index}"] * 4 + ["t0", "é", "blk.0.w"]))
        infos.append(info(name, dims, kind, max(0, offset), order))
        n_bytes = min(n_bytes, 1 << 12)  # an absurd shape gets no data of its size
        data += bytes(range(256)) * (n_bytes // 256) + bytes(n_bytes % 256)
        data += b"\0" * (-len(data) % alignment)
    content = gguf(kvs, infos, data, order=order, alignment=alignment)
    if draw(st.integers(0, 5)) == 0:
        content = content[: draw(st.integers(0, len(content)))]
    return content


def test_generated_files_and_their_outcomes(tmp_path: Path) -> None:
    """modelmon and the reference agree on every generated file; and the generator makes
    files of both kinds (it is no use if it makes only files that are refused, or only ones
    that open)."""
    outcomes: list[str] = []

    @settings(
        max_examples=300,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(content=files())
    def agree(content: bytes) -> None:
        outcomes.append(check_agreement(tmp_path / "g.gguf", content))

    agree()
    assert len(outcomes) >= 300 // 2, len(outcomes)
    assert 0.1 < outcomes.count("opened") / len(outcomes) < 0.9, outcomes.count("opened")
