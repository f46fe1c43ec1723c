"""Fuzz: mutated real-shaped files end in a parse or ModelFormatError (one line), fast, and
never allocate beyond the file's size. FUZZ_EXAMPLES raises the case count (benchmark set)."""

from __future__ import annotations

import json
import os
import struct
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.synth_gguf import write_gguf_model

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "600"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Originals(dict[str, bytes]):
    def __repr__(self) -> str:  # hypothesis prints the arguments of a failing case
        return f"Originals({', '.join(f'{k}: {len(v)} bytes' for k, v in self.items())})"


@pytest.fixture(scope="module")
def originals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("fuzz-src")
    st_path = write_safetensors_model(folder / "st", layers=2, hidden=32, vocab=64)
    gguf_q8 = write_gguf_model(
        folder / "q8.gguf", layers=2, hidden=64, vocab=64, tensor_type="Q8_0"
    )
    gguf_k = write_gguf_model(
        folder / "qk.gguf", layers=1, hidden=256, vocab=32, tensor_type="Q4_K"
    )
    return Originals(
        safetensors=st_path.read_bytes(),
        gguf=gguf_q8.read_bytes(),
        **{"gguf-k": gguf_k.read_bytes()},
    )


def check(path: Path, data: bytes) -> None:
    """The contract every mutated file must honour."""
    path.write_bytes(data)
    tracemalloc.start()
    # This thread's CPU time: the work a header causes, which a busy neighbour cannot stretch
    started = time.thread_time()
    try:
        model = open_model(path)
    except ModelFormatError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
    else:  # a mutation may leave a valid file: then everything in it must be in bounds
        size = len(data)
        assert all(0 <= e.offset <= e.end <= size for e in model.extents)
    finally:
        elapsed = time.thread_time() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < 2.0
    assert peak <= len(data) + (2 << 20), f"allocated {peak} for a {len(data)}-byte file"


def header_end(kind: str, data: bytes) -> int:
    if kind == "safetensors":
        return 8 + struct.unpack_from("<Q", data)[0]
    return min(len(data), 4096)  # GGUF: header, KV section and tensor infos come first


KINDS = st.sampled_from(["safetensors", "gguf", "gguf-k"])


@FUZZ
@given(kind=KINDS, cut=st.floats(0, 1))
def test_truncation_anywhere(
    originals: dict[str, bytes], tmp_path: Path, kind: str, cut: float
) -> None:
    data = originals[kind]
    check(tmp_path / f"t.{kind}", data[: int(len(data) * cut)])


@FUZZ
@given(
    kind=KINDS,
    flips=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 255)), min_size=1, max_size=8),
)
def test_flipped_header_bytes(
    originals: dict[str, bytes], tmp_path: Path, kind: str, flips: list[tuple[float, int]]
) -> None:
    data = bytearray(originals[kind])
    end = header_end(kind, bytes(data))
    for where, mask in flips:
        data[int(where * (end - 1))] ^= mask
    check(tmp_path / f"f.{kind}", bytes(data))


EXTREMES = st.sampled_from([0, 1, 2**31 - 1, 2**32, 2**62, 2**63 - 1, 2**64 - 1])


@FUZZ
@given(kind=KINDS, where=st.floats(0, 1), value=st.one_of(EXTREMES, st.integers(0, 2**64 - 1)))
def test_huge_lengths_and_counts(
    originals: dict[str, bytes], tmp_path: Path, kind: str, where: float, value: int
) -> None:
    data = bytearray(originals[kind])
    end = header_end(kind, bytes(data))
    position = int(where * max(0, min(end, len(data)) - 8))
    struct.pack_into("<Q", data, position, value)
    check(tmp_path / f"h.{kind}", bytes(data))


@FUZZ
@given(garbage=st.binary(min_size=0, max_size=512), magic=st.sampled_from([b"", b"GGUF"]))
def test_garbage(tmp_path: Path, garbage: bytes, magic: bytes) -> None:
    check(tmp_path / "g.bin", magic + garbage)


JSON_VALUES = st.one_of(
    st.integers(-(2**64), 2**64),
    st.text(max_size=8),
    st.none(),
    st.lists(st.integers(-5, 2**40), max_size=4),
    st.booleans(),
    st.sampled_from(["F16", "BF16", "F12", "Q4_K", "U8", "I64"]),
)


@FUZZ
@given(
    field=st.sampled_from(["dtype", "shape", "data_offsets"]),
    pick=st.integers(0, 10**6),
    value=JSON_VALUES,
)
def test_safetensors_header_fields(
    originals: dict[str, bytes], tmp_path: Path, field: str, pick: int, value: object
) -> None:
    """Wrong dtypes, shapes and offsets (overlapping, out of range, mistyped) in a valid JSON."""
    data = originals["safetensors"]
    end = header_end("safetensors", data)
    header = json.loads(data[8:end])
    names = sorted(k for k in header if k != "__metadata__")
    header[names[pick % len(names)]][field] = value
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    check(tmp_path / "j.safetensors", struct.pack("<Q", len(raw)) + raw + data[end:])
