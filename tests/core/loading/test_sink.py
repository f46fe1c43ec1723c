"""The sink: pieces in any order from any thread, proof of coverage, crc32 of the whole."""

from __future__ import annotations

import json
import random
import struct
import threading
import tracemalloc
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelmon.core.errors import LoadError
from modelmon.core.loading.checksum import crc32_combine
from modelmon.core.loading.sink import OWN_MAPPING_MIN_BYTES, PAGE, TensorSink, allocate
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.synth import write_safetensors_model


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("sink")  # a 2 MiB embedding among small tensors
    return open_model(write_safetensors_model(folder, layers=1, hidden=1024, vocab=1024))


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=3000), st.binary(max_size=3000))
def test_crc32_combine_equals_the_crc_of_the_concatenation(first: bytes, second: bytes) -> None:
    combined = crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second))
    assert combined == zlib.crc32(first + second)


def _file_bytes(model: Model, index: int) -> bytes:
    extent = model.extents[index]
    with open(extent.file, "rb") as f:
        f.seek(extent.offset)
        return f.read(extent.length)


def test_pieces_in_any_order_from_several_threads_checksum_like_one_pass(model: Model) -> None:
    big = max(range(len(model.extents)), key=lambda i: model.extents[i].length)
    data = _file_bytes(model, big)
    sink = TensorSink(model, [big], keep=True, verify=True, scratch_bytes=4096)
    cuts = sorted(random.Random(3).sample(range(1, len(data)), 40))
    pieces = list(zip([0, *cuts], [*cuts, len(data)], strict=True))
    random.Random(4).shuffle(pieces)

    def fill(share: list[tuple[int, int]]) -> None:
        for start, end in share:
            view = sink.piece(big, start, end - start)
            view[:] = data[start:end]
            sink.filled_piece(big, start, view)

    threads = [threading.Thread(target=fill, args=(pieces[n::3],)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.check_complete()
    assert sink.bytes_filled == len(data)
    assert sink.checksums() == ((model.extents[big].name, zlib.crc32(data)),)
    assert sink.arrays[big].tobytes() == data


@pytest.mark.parametrize(
    ("pieces", "error"),
    [
        ([(0, 100), (200, None)], "bytes 100-200 skipped"),
        ([(0, 100), (50, None)], "bytes 50-100 read twice"),
        ([(0, 100)], "100 of [0-9]+ bytes loaded"),
    ],
)
def test_a_gap_or_an_overlap_is_caught(
    model: Model, pieces: list[tuple[int, int | None]], error: str
) -> None:
    """(start, end) pieces; None is the tensor's end."""
    index = next(i for i, e in enumerate(model.extents) if e.length >= 300)
    length = model.extents[index].length
    sink = TensorSink(model, [index], keep=False, verify=False, scratch_bytes=4096)
    for start, end in pieces:
        sink.filled_piece(index, start, bytes((length if end is None else end) - start))
    with pytest.raises(LoadError, match=error):
        sink.check_complete()


def test_big_arrays_sit_where_direct_reads_can_fill_them(model: Model) -> None:
    big = [e for e in model.extents if e.length >= OWN_MAPPING_MIN_BYTES]
    assert big and any(e.offset % PAGE for e in big)
    for extent in model.extents:
        array = allocate(extent)
        assert array.shape == extent.array_shape and array.flags.writeable
        assert array.nbytes == extent.length
        if extent.length >= OWN_MAPPING_MIN_BYTES:
            assert (array.ctypes.data - extent.offset) % PAGE == 0


def test_tiny_tensors_cost_no_array_each_while_they_load(tmp_path: Path) -> None:
    """A header of 100 000 one-byte tensors: the sink keeps a slot in one arena for each, not
    an array, a memoryview and a heap block (that was ~850 bytes a tensor, 1 GB a million);
    the arrays asked for afterwards hold the bytes written."""
    count = 100_000
    entries = {
        f"t{i}": {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(count)
    }
    raw = json.dumps(entries).encode()
    path = tmp_path / "tiny.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(count))
    model = open_model(path)
    tracemalloc.start()
    try:
        sink = TensorSink(model, range(count), keep=True, verify=False, scratch_bytes=4096)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held / count < 300 and not sink.arrays
    for index in (0, 255, count - 1):
        view = sink.piece(index, 0, 1)
        view[:] = bytes([index % 256])
        sink.filled_piece(index, 0, view)
    assert [sink.array(i).tobytes() for i in (0, 255, count - 1)] == [b"\0", b"\xff", b"\x9f"]
