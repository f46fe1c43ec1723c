"""direct: aligned reads land straight in the arrays; only the blocks shared with a neighbour
(tensor boundaries, the window's head and tail) go through the bounce buffer."""

from __future__ import annotations

import os
import threading
import zlib
from pathlib import Path

import pytest

import modelmon.core
from modelmon.core.loading.reads import ReadRecorder
from modelmon.core.loading.sink import OWN_MAPPING_MIN_BYTES, TensorSink
from modelmon.core.loading.strategies.base import WorkerContext
from modelmon.core.loading.strategies.direct import (
    ALIGN,
    _iovecs,
    _place,
    probe_direct,
)
from modelmon.core.model.formats import open_model
from modelmon.core.model.plan import coalesce, load_order
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("direct")  # 2-4 MiB tensors at unaligned offsets
    return write_safetensors_model(folder, layers=2, hidden=1024, vocab=2048, dtype="F16")


def test_bytes_go_straight_into_the_arrays_except_boundary_blocks(model_path: Path) -> None:
    model = open_model(model_path)
    indexes = load_order(model)
    sink = TensorSink(model, indexes, keep=True, verify=False, scratch_bytes=ALIGN)
    ctx = WorkerContext(
        0, model, indexes, LoadOptions(), sink, ReadRecorder(0, None), threading.Event()
    )
    bounce = memoryview(bytearray(9 << 20))
    direct = bounced = 0
    reads = coalesce(model, indexes, 8 << 20)
    for read in reads:
        placed = _place(ctx, read)
        window = (read.offset // ALIGN * ALIGN, -(-(read.offset + read.length) // ALIGN) * ALIGN)
        vector, stretches = _iovecs(placed, window, bounce)
        assert vector is not None
        assert sum(len(v) for v in vector) == window[1] - window[0]
        bounced += sum(hi - lo for lo, hi, _ in stretches)
        direct += sum(p.direct_hi - p.direct_lo for p in placed)
        for view in vector:
            view.release()
    big = sum(1 for e in model.extents if e.length >= OWN_MAPPING_MIN_BYTES)
    small = sum(e.length for e in model.extents if e.length < OWN_MAPPING_MIN_BYTES)
    assert direct + bounced >= model.total_bytes
    # At most two partial blocks per big tensor, one per read's window ends, and the small
    # tensors (numpy memory, not placed for direct reads) are bounced.
    assert bounced <= small + (2 * big + 2 * len(reads)) * ALIGN + 2 * ALIGN
    assert direct >= 0.9 * model.total_bytes
    sink.release()


@pytest.mark.parametrize("chunk", [ALIGN, 256 << 10, 8 << 20])
def test_direct_load_is_byte_identical(model_path: Path, chunk: int) -> None:
    if probe_direct(open_model(model_path).files[0].path) is not None:
        pytest.skip("no O_DIRECT where the test model lives")
    tensors = modelmon.core.load(model_path, "direct", threads=3, chunk=chunk, verify=True)
    model = open_model(model_path)
    with open(model.files[0].path, "rb") as f:
        data = f.read()
    for extent in model.extents:
        got = tensors[extent.name].tobytes()
        assert zlib.crc32(got) == zlib.crc32(data[extent.offset : extent.end]), extent.name


def test_every_reader_reads_through_a_descriptor_of_its_own(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A FUSE daemon serves each open file as one stream: out-of-order reads of one
    # descriptor make it seek, read after read.
    if probe_direct(open_model(model_path).files[0].path) is not None:
        pytest.skip("no O_DIRECT where the test model lives")
    live: dict[int, set[int]] = {}  # open descriptor -> the threads that read through it
    closed: list[set[int]] = []  # the same of each descriptor closed (its number is reused)
    real_preadv, real_close = os.preadv, os.close
    lock = threading.Lock()

    def preadv(fd: int, buffers: list[memoryview], offset: int) -> int:
        with lock:
            live.setdefault(fd, set()).add(threading.get_ident())
        return real_preadv(fd, buffers, offset)

    def close(fd: int) -> None:
        with lock:
            closed.append(live.pop(fd, set()))
        real_close(fd)

    monkeypatch.setattr(os, "preadv", preadv)
    monkeypatch.setattr(os, "close", close)
    modelmon.core.load(model_path, "direct", threads=2, chunk=8 << 20, verify=True)
    used = [threads for threads in (*closed, *live.values()) if threads]
    assert len(used) >= 2  # both readers read
    shared = [threads for threads in used if len(threads) > 1]
    assert not shared, shared
