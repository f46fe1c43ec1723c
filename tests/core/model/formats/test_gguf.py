"""parse_gguf (our walk) / read_gguf_tensors (gguf-py's reader behind it): valid files agree
with gguf-py; damaged ones fail fast."""

from __future__ import annotations

import gc
import itertools
import os
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFEndian, GGUFReader, GGUFWriter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelmon.core.errors import ModelFormatError
from modelmon.core.loading.strategies import gguf_reader
from modelmon.core.loading.strategies.gguf_reader import read_gguf_tensors
from modelmon.core.model.formats.gguf import parse_gguf
from modelmon.core.model.formats.gguf_format import MAX_KVS, MAX_TENSORS
from modelmon.core.model.records import Model
from modelmon.core.model.synth_gguf import write_gguf_model

F32, F16, Q8_0, BF16 = 0, 1, 8, 30  # ggml type numbers
UINT8, UINT32, STRING, ARRAY = 0, 4, 8, 9  # GGUF value type numbers
MiB = 1 << 20


# --- GGUF built by hand, the way gguf-py's own tests do it -------------------------------------


def gstr(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, value_type: int, payload: bytes) -> bytes:
    return gstr(key) + struct.pack("<I", value_type) + payload


def kv_u32(key: str, value: int) -> bytes:
    return kv(key, UINT32, struct.pack("<I", value))


def tensor_info(name: str, dims: tuple[int, ...], ggml_type: int, offset: int) -> bytes:
    body = struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    return gstr(name) + body + struct.pack("<IQ", ggml_type, offset)


def build(
    kvs: list[bytes],
    infos: list[bytes],
    data: bytes,
    *,
    magic: bytes = b"GGUF",
    version: int = 3,
    counts: tuple[int, int] | None = None,
    alignment: int = 32,
) -> bytes:
    tensor_count, kv_count = counts if counts is not None else (len(infos), len(kvs))
    head = magic + struct.pack("<IQQ", version, tensor_count, kv_count) + b"".join(kvs)
    head += b"".join(infos)
    return head + b"\0" * (-len(head) % alignment) + data


NORM = "blk.0.attn_norm.weight"
HEAD = "output.weight"
BASE_KVS = [kv("general.architecture", STRING, gstr("llama")), kv_u32("general.alignment", 32)]
BASE_INFOS = [tensor_info(NORM, (16,), F32, 0), tensor_info(HEAD, (16,), F32, 64)]
BASE_DATA = np.arange(32, dtype="<f4").tobytes()


def base_sections() -> tuple[int, int, int]:
    """Where the KV section, tensor infos and data of the base file start."""
    kv_start = 24
    info_start = kv_start + sum(map(len, BASE_KVS))
    info_end = info_start + sum(map(len, BASE_INFOS))
    return kv_start, info_start, info_end + (-info_end % 32)


def write(tmp_path: Path, content: bytes, name: str = "model.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


# --- checks shared by the tests ----------------------------------------------------------------


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def mapped(path: Path) -> bool:
    with open("/proc/self/maps") as maps:
        return str(path) in maps.read()


def assert_rejected(path: Path, reader: Callable[[Path], object] = parse_gguf) -> str:
    """The call raises a one-line ModelFormatError naming ``path``, fast and leaving no fd."""
    fds = open_fds()
    # This thread's CPU time: the work a header causes, which a busy neighbour cannot stretch
    started = time.thread_time()
    with pytest.raises(ModelFormatError) as caught:
        reader(path)
    assert time.thread_time() - started < 1.0
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert caught.value.file == str(path)
    del caught
    assert open_fds() == fds and not mapped(path)
    return message


def reader_facts(path: Path) -> dict[str, tuple[int, int, str, tuple[int, ...]]]:
    """What the plain GGUFReader says, copied out so its map closes with it."""
    reader = GGUFReader(path)
    facts = {
        t.name: (int(t.data_offset), int(t.n_bytes), t.tensor_type.name, tuple(map(int, t.shape)))
        for t in reader.tensors
    }
    del reader
    gc.collect()
    return facts


def assert_matches_reader(model: Model, path: Path) -> None:
    facts = reader_facts(path)
    arrays = read_gguf_tensors(path)
    assert [e.name for e in model.extents] == sorted(facts, key=lambda name: facts[name][0])
    assert set(arrays) == set(facts)
    with open(path, "rb") as handle:
        for extent in model.extents:
            assert (extent.offset, extent.length, extent.dtype, extent.shape) == facts[extent.name]
            array = arrays[extent.name]
            assert (extent.array_dtype, extent.array_shape) == (array.dtype.str, array.shape)
            handle.seek(extent.offset)
            assert handle.read(extent.length) == array.tobytes()


# --- valid files -------------------------------------------------------------------------------


def test_hand_built_file_parses(tmp_path: Path) -> None:
    path = write(tmp_path, build(BASE_KVS, BASE_INFOS, BASE_DATA))
    model = parse_gguf(path)
    data_start = base_sections()[2]
    assert [(e.name, e.offset, e.length) for e in model.extents] == [
        (NORM, data_start, 64),
        (HEAD, data_start + 64, 64),
    ]
    assert model.format == "gguf" and model.files[0].size == path.stat().st_size
    assert [e.block for e in model.extents] == ["blk.0", "head"]
    assert model.metadata["general.architecture"] == "llama"
    assert_matches_reader(model, path)


@pytest.mark.parametrize("tensor_type", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"])
def test_generated_models_match_the_reader(tmp_path: Path, tensor_type: str) -> None:
    path = write_gguf_model(tmp_path / "m.gguf", layers=2, vocab=64, tensor_type=tensor_type)
    fds = open_fds()
    model = parse_gguf(path)
    assert open_fds() == fds and not mapped(path)
    assert len(model.extents) == 1 + 2 * 9 + 2
    assert_matches_reader(model, path)
    by_name = {e.name: e for e in model.extents}
    assert by_name["blk.1.ffn_down.weight"].dtype == tensor_type
    assert by_name["blk.1.ffn_norm.weight"].dtype == "F32"
    assert by_name["token_embd.weight"].shape == (256, 64)  # GGUF order: ne0 first
    assert {e.block for e in model.extents} == {"embeddings", "blk.0", "blk.1", "head"}
    assert by_name["output.weight"].block == by_name["output_norm.weight"].block == "head"
    assert model.metadata["GGUF.tensor_count"] == str(len(model.extents))
    assert model.metadata["general.architecture"] == "llama"
    assert model.metadata["general.file_type"].startswith(("ALL_", "MOSTLY_"))


def test_big_endian_file(tmp_path: Path) -> None:
    path = tmp_path / "be.gguf"
    writer = GGUFWriter(path, "llama", endianess=GGUFEndian.BIG)
    writer.add_tensor("token_embd.weight", np.arange(64, dtype=np.float16).reshape(2, 32))
    writer.add_tensor("output_norm.weight", np.arange(32, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    model = parse_gguf(path)
    assert [e.array_dtype for e in model.extents] == [">f2", ">f4"]
    assert_matches_reader(model, path)


@pytest.mark.parametrize("tensor_type", ["F32", "F16", "Q8_0", "Q4_K"])
def test_layout_is_byte_for_byte_the_plain_readers(tmp_path: Path, tensor_type: str) -> None:
    path = write_gguf_model(tmp_path / "m.gguf", layers=2, vocab=64, tensor_type=tensor_type)
    reader = GGUFReader(path)  # plain: no validation of ours in front, no array skipping
    theirs = sorted(
        (
            t.name,
            int(t.data_offset),
            int(t.n_bytes),
            t.tensor_type.name,
            tuple(map(int, t.shape)),
            t.data.dtype.str,
            tuple(t.data.shape),
        )
        for t in reader.tensors
    )
    data_start, alignment = int(reader.data_offset), int(reader.alignment)
    del reader
    gc.collect()
    model = parse_gguf(path)
    ours = [
        (e.name, e.offset, e.length, e.dtype, e.shape, e.array_dtype, e.array_shape)
        for e in model.extents
    ]
    assert sorted(ours) == theirs and len(ours) == 1 + 2 * 9 + 2
    assert [e.offset for e in model.extents] == sorted(e.offset for e in model.extents)
    assert model.extents[0].offset == data_start
    assert model.metadata["general.alignment"] == str(alignment)
    assert {e.dtype for e in model.extents} == {tensor_type, "F32"}


def vocab_only_file(path: Path) -> Path:
    """A tokenizer-only GGUF, like llama.cpp's ggml-vocab-*.gguf: KVs, no tensors."""
    writer = GGUFWriter(path, "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<t{i}>" for i in range(100)])
    writer.add_token_scores([float(-i) for i in range(100)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_vocab_only_file_is_a_model_with_no_extents(tmp_path: Path) -> None:
    path = vocab_only_file(tmp_path / "vocab.gguf")
    assert reader_facts(path) == {}
    model = parse_gguf(path)
    assert model.extents == () and model.total_bytes == 0
    assert model.files[0].size == path.stat().st_size
    assert model.metadata["GGUF.tensor_count"] == "0"
    assert model.metadata["general.architecture"] == "llama"
    assert read_gguf_tensors(path) == {}
    # The data section of a file with no tensors may start past its end: nothing lies there.
    bare = write(tmp_path, build([BASE_KVS[0], kv_u32("general.alignment", 4096)], [], b""))
    assert parse_gguf(bare).extents == ()


def test_vocabulary_is_not_parsed_element_by_element(tmp_path: Path) -> None:
    # Plain GGUFReader keeps ~860 bytes per array element: ~50 MB for 3 x 20k here.
    path = write_gguf_model(tmp_path / "m.gguf", layers=1, vocab=20_000, tensor_type="Q4_K")
    tracemalloc.start()
    try:
        parse_gguf(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * MiB


def test_plain_reader_fallback_gives_the_same_tensors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_gguf_model(tmp_path / "m.gguf", layers=1, vocab=300)
    fast = read_gguf_tensors(path)
    monkeypatch.setattr(gguf_reader, "_SKIP_ARRAYS", False)
    plain = read_gguf_tensors(path)
    assert list(plain) == list(fast)
    for name, array in fast.items():
        assert (plain[name].dtype, plain[name].shape) == (array.dtype, array.shape)
        assert plain[name].tobytes() == array.tobytes()


# --- damaged files -----------------------------------------------------------------------------


def base_with(
    kvs: list[bytes] | None = None,
    infos: list[bytes] | None = None,
    *,
    magic: bytes = b"GGUF",
    version: int = 3,
    counts: tuple[int, int] | None = None,
    alignment: int = 32,
) -> bytes:
    """The base file with its KVs, tensor infos or header fields replaced."""
    kvs = BASE_KVS if kvs is None else kvs
    infos = BASE_INFOS if infos is None else infos
    return build(
        kvs, infos, BASE_DATA, magic=magic, version=version, counts=counts, alignment=alignment
    )


DAMAGED: dict[str, tuple[bytes, str]] = {
    "empty": (b"", "not a GGUF file (0 bytes)"),
    "cut in its header": (
        base_with()[:8],
        "truncated header: the file has 8 bytes, a GGUF header 24",
    ),
    "bad magic": (
        base_with(magic=b"GGML"),
        'not a GGUF file: it begins with "GGML", not GGUF\'s magic "GGUF"',
    ),
    "version 1": (base_with(version=1), "unsupported GGUF version 1"),
    "version 99": (base_with(version=99), "unsupported GGUF version 99"),
    "big-endian version 99": (base_with(version=99 << 24), "unsupported GGUF version 99"),
    "absurd tensor count": (base_with(counts=(2**60, 2)), f"tensor count {2**60} is past the"),
    "absurd KV count": (base_with(counts=(2, 2**60)), f"KV count {2**60} is past the"),
    "key longer than the file": (
        base_with(kvs=[struct.pack("<Q", 2**40) + b"key"]),
        "length 1099511627776 runs past the end",
    ),
    "tensor name longer than the file": (
        base_with(infos=[struct.pack("<Q", 2**62) + b"abc" + BASE_INFOS[0][8:]]),
        "runs past the end",
    ),
    "string value longer than the file": (
        base_with(kvs=[kv("general.name", STRING, struct.pack("<Q", 2**50))]),
        "runs past the end",
    ),
    "absurd array length": (
        base_with(kvs=[kv("tokens", ARRAY, struct.pack("<IQ", UINT8, 2**60))]),
        "absurd array length",
    ),
    "arrays nested too deep": (
        base_with(kvs=[kv("deep", ARRAY, struct.pack("<IQ", ARRAY, 1) * 6)]),
        "nested more than",
    ),
    "unknown value type": (base_with(kvs=[kv("odd", 13, b"\0" * 8)]), "unknown value type 13"),
    "unknown array item type": (
        base_with(kvs=[kv("odd", ARRAY, struct.pack("<IQ", 77, 1))]),
        "unknown item type 77",
    ),
    "key not UTF-8": (
        base_with(kvs=[gstr(b"\xff\xfe") + struct.pack("<II", UINT32, 1)]),
        "not UTF-8",
    ),
    "duplicate key": (base_with(kvs=[kv_u32("a", 1), kv_u32("a", 2)]), "duplicate KV key 'a'"),
    "alignment not a power of two": (
        base_with(kvs=[kv_u32("general.alignment", 48)]),
        "not a power of two",
    ),
    "alignment of the wrong type": (
        base_with(kvs=[kv("general.alignment", UINT8, b"\x20")]),
        "general.alignment is not a UINT32",
    ),
    "data past the end of the file": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (16,), F32, 1 << 40)]),
        "runs past the end of the file",
    ),
    "data straddling the end of the file": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (32,), F32, 64)]),
        "runs past the end of the file",
    ),
    "overlapping tensors": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (16,), F32, 32)]),
        "overlap",
    ),
    "duplicate tensor names": (
        base_with(infos=[BASE_INFOS[0], tensor_info(NORM, (16,), F32, 64)]),
        "duplicate tensor name",
    ),
    "unknown ggml type": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (16,), 99, 64)]),
        "unknown ggml type 99",
    ),
    "removed ggml type Q4_2": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (16,), 4, 64)]),
        "unknown ggml type 4",
    ),
    "row not a whole number of blocks": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (16, 2), Q8_0, 64)]),
        "not a multiple of the Q8_0 block size 32",
    ),
    "misaligned data offset": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (8,), F32, 68)]),
        "not a multiple of the alignment 32",
    ),
    "five dimensions": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (1, 1, 1, 1, 1), F32, 64)]),
        "5 dimensions",
    ),
    "absurd dimension": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (2**63, 0), F32, 64)]),
        "absurd shape",
    ),
    "element count over int64": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (2**32, 2**31, 0, 2), F32, 64)]),
        "absurd shape",
    ),
    "block type with no dimensions": (
        base_with(infos=[BASE_INFOS[0], tensor_info(HEAD, (), BF16, 64)]),
        "BF16 with no dimensions",
    ),
}


@pytest.mark.parametrize("case", list(DAMAGED))
def test_damaged_file_is_rejected(tmp_path: Path, case: str) -> None:
    content, expected = DAMAGED[case]
    path = write(tmp_path, content)
    assert expected in assert_rejected(path)
    assert expected in assert_rejected(path, read_gguf_tensors)


def test_damage_cases_differ_from_a_valid_file_in_one_thing(tmp_path: Path) -> None:
    # The cases above are only meaningful if the file they start from is itself valid.
    for content in (base_with(), base_with(kvs=[kv_u32("general.alignment", 64)], alignment=64)):
        parse_gguf(write(tmp_path, content))


@pytest.mark.parametrize("section", ["header", "kv", "tensor infos", "data"])
def test_truncated_file_is_rejected(tmp_path: Path, section: str) -> None:
    content = base_with()
    kv_start, info_start, data_start = base_sections()
    cut = {
        "header": 10,
        "kv": kv_start + 11,
        "tensor infos": info_start + len(BASE_INFOS[0]) + 5,
        "data": data_start + 100,
    }[section]
    path = write(tmp_path, content[:cut])
    message = assert_rejected(path)
    assert ("truncated" in message) or ("past the end" in message), message


def test_every_truncation_of_a_generated_model_is_rejected(tmp_path: Path) -> None:
    source = write_gguf_model(tmp_path / "m.gguf", layers=1, vocab=40, tensor_type="Q8_0")
    content = source.read_bytes()
    data_end = max(e.end for e in parse_gguf(source).extents)
    for cut in np.linspace(0, data_end - 1, 60).astype(int):
        assert_rejected(write(tmp_path, content[:cut], "cut.gguf"))


@pytest.mark.parametrize("counts", [(2**60, 2), (2, 2**60), (2**64 - 1, 2**64 - 1)])
def test_absurd_counts_fail_fast_without_allocating(
    tmp_path: Path, counts: tuple[int, int]
) -> None:
    path = write(tmp_path, base_with(counts=counts))
    tracemalloc.start()
    started = time.thread_time()
    try:
        with pytest.raises(ModelFormatError, match=r"count [0-9]+ is past the"):
            parse_gguf(path)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5
    assert peak < path.stat().st_size + MiB


def test_absurd_array_length_fails_fast_without_allocating(tmp_path: Path) -> None:
    path = write(tmp_path, DAMAGED["absurd array length"][0])
    tracemalloc.start()
    started = time.thread_time()
    try:
        with pytest.raises(ModelFormatError):
            parse_gguf(path)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5 and peak < path.stat().st_size + MiB


def rejection(path: Path) -> ModelFormatError:
    """The error parse_gguf raises, after checking it was fast and allocated nothing big."""
    tracemalloc.start()
    started = time.thread_time()
    try:
        with pytest.raises(ModelFormatError) as caught:
            parse_gguf(path)
        elapsed = time.thread_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5 and peak < path.stat().st_size + MiB
    return caught.value


def test_huge_counts_and_lengths_fail_at_their_own_offset(tmp_path: Path) -> None:
    kv_start, info_start, _ = base_sections()
    tensors = rejection(write(tmp_path, base_with(counts=(2**60, 2))))
    assert tensors.offset == 8 and "tensor count 1152921504606846976 is past" in tensors.problem
    kvs = rejection(write(tmp_path, base_with(counts=(2, 2**60))))
    assert kvs.offset == 16 and "KV count 1152921504606846976 is past" in kvs.problem
    ten_gb = 10 * 2**30
    name_kv = kv("general.name", STRING, struct.pack("<Q", ten_gb) + b"x" * 64)
    value = rejection(write(tmp_path, base_with(kvs=[name_kv, *BASE_KVS[1:]])))
    value_length_at = kv_start + len(gstr("general.name")) + 4
    assert value.offset == value_length_at and f"length {ten_gb} runs past" in value.problem
    key = rejection(write(tmp_path, base_with(kvs=[struct.pack("<Q", ten_gb) + b"k" * 64])))
    assert key.offset == kv_start and "KV #0 key length" in key.problem
    long_name = struct.pack("<Q", ten_gb) + BASE_INFOS[1][8:]
    name = rejection(write(tmp_path, base_with(infos=[BASE_INFOS[0], long_name])))
    assert name.offset == info_start + len(BASE_INFOS[0]) and "tensor #1 name" in name.problem


def test_tensor_problems_name_the_offset_of_their_entry(tmp_path: Path) -> None:
    _, info_start, data_start = base_sections()
    second = info_start + len(BASE_INFOS[0])
    for infos, expected in [
        ([BASE_INFOS[0], tensor_info(HEAD, (16,), 99, 64)], "unknown ggml type 99"),
        ([BASE_INFOS[0], tensor_info(NORM, (16,), F32, 64)], "duplicate tensor name"),
        ([BASE_INFOS[0], tensor_info(HEAD, (1,) * 5, F32, 64)], "5 dimensions"),
    ]:
        error = rejection(write(tmp_path, base_with(infos=infos)))
        assert expected in error.problem and error.offset == second
    overlap = [BASE_INFOS[0], tensor_info(HEAD, (16,), F32, 32)]
    error = rejection(write(tmp_path, base_with(infos=overlap)))
    assert "overlap" in error.problem and error.offset == data_start + 32


def test_reader_errors_become_one_line_format_errors_without_leaks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Our own walk rejects everything we know the reader would; so fake a reader failure,
    # raised while the reader holds its memory map open.
    def fail(self: GGUFReader, *args: object) -> None:
        raise ValueError("first line\nsecond line")

    monkeypatch.setattr(GGUFReader, "_build_tensors", fail)
    path = write(tmp_path, base_with())
    message = assert_rejected(path, read_gguf_tensors)
    assert "gguf reader rejected the file: ValueError: first line second line" in message


def test_missing_or_special_file_is_a_format_error(tmp_path: Path) -> None:
    with pytest.raises(ModelFormatError, match=r"absent\.gguf: no such file"):
        parse_gguf(tmp_path / "absent.gguf")
    fifo = tmp_path / "fifo.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelFormatError, match=r"fifo\.gguf: not a regular file"):
        parse_gguf(fifo)


# --- random damage -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("fuzz")
    path = write_gguf_model(folder / "m.gguf", layers=1, hidden=32, vocab=8, tensor_type="Q8_0")
    return path.read_bytes()


def damaged_copies(content: bytes) -> st.SearchStrategy[bytes]:
    """Truncations, and runs of random bytes written over a region of the header."""
    header_end = min(len(content), 2048)

    def overwrite(where: int, junk: bytes) -> bytes:
        return content[:where] + junk + content[where + len(junk) :]

    cut = st.integers(0, len(content)).map(lambda n: content[:n])
    junk = st.builds(overwrite, st.integers(0, header_end - 1), st.binary(min_size=1, max_size=9))
    return st.one_of(cut, junk)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_damage_never_escapes_as_another_error(
    tmp_path: Path, small_model: bytes, data: st.DataObject
) -> None:
    content = data.draw(damaged_copies(small_model))
    path = write(tmp_path, content, "fuzz.gguf")
    fds = open_fds()
    try:
        model = parse_gguf(path)
    except ModelFormatError as error:
        assert "\n" not in str(error) and str(path) in str(error)
    else:
        size = len(content)
        assert all(0 <= e.offset <= e.end <= size for e in model.extents)
        assert all(a.end <= b.offset for a, b in itertools.pairwise(model.extents))
    assert open_fds() == fds


def test_random_damage_fixture_is_a_valid_model(small_model: bytes, tmp_path: Path) -> None:
    assert len(parse_gguf(write(tmp_path, small_model)).extents) == 12


def test_a_count_past_the_bound_is_refused_even_where_the_file_could_hold_it(
    tmp_path: Path,
) -> None:
    """Room in the file is no reason to walk 2M+ tensor infos or 1M+ KVs: damage, refused at
    once; a count the file has no room for is a file cut short."""
    path = tmp_path / "sparse.gguf"
    with open(path, "wb") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, MAX_TENSORS + 1, 0))
        out.truncate(24 + (MAX_TENSORS + 1) * 24)  # sparse: the infos' bytes read as zeros
    assert f"tensor count {MAX_TENSORS + 1} is past the {MAX_TENSORS}" in assert_rejected(path)
    with open(path, "r+b") as out:
        out.write(b"GGUF" + struct.pack("<IQQ", 3, 0, MAX_KVS + 1))
    assert f"KV count {MAX_KVS + 1} is past the {MAX_KVS}" in assert_rejected(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 147, 3) + bytes(976))
    message = assert_rejected(path)
    # Said once, in words: what the header lists and what the file holds.
    assert message.endswith(
        "truncated: its header lists 147 tensors and 3 metadata keys, which take at least "
        "3591 bytes, but the file has 1000 (at byte 8)"
    ), message
