"""The ranged reader against real S3-compatible servers on loopback: the bytes that arrive are
the file's bytes (safetensors single and sharded, GGUF), over N connections × part size, in
the order asked, into numpy arrays or through bounded scratch memory; its records add up."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from modelmon.core import open_model
from modelmon.core.errors import LoadCancelled
from modelmon.core.storage.objects import open_store
from modelmon.core.storage.reader import ObjectReader, Span, plan_parts
from modelmon.core.storage.urls import parse_object_url

from ...object_store import BUCKET

MODELS = ("single/", "sharded/", "gguf/", "large-gguf/")


@pytest.fixture(params=["rclone", "moto"])
def s3(
    request: pytest.FixtureRequest, rclone_server: object, moto_server: object
) -> SimpleNamespace:
    """Each test once against rclone serve s3 (200 + Content-Range) and once against moto
    (206). Both servers are named here so that they start before the test's leak check
    looks (they live as long as the session)."""
    return request.getfixturevalue(f"{request.param}_s3")  # type: ignore[no-any-return]


def _local(root: Path, url: str) -> Path:
    return root / url.removeprefix("s3://")


@pytest.mark.parametrize("prefix", MODELS)
def test_objects_read_into_arrays_are_the_files_bytes(s3: SimpleNamespace, prefix: str) -> None:
    model = open_model(f"s3://{BUCKET}/{prefix}")
    assert all(file.remote is not None for file in model.files)
    arrays = {file.path: np.zeros(file.size, np.uint8) for file in model.files}
    spans = [
        Span(file.remote, 0, file.size, memoryview(arrays[file.path]))
        for file in model.files
        if file.remote is not None
    ]
    with (
        open_store(parse_object_url(model.files[0].path)) as store,
        ObjectReader(store, 3) as reader,
    ):
        stats = reader.read(plan_parts(spans, 48 << 10))
    for path, array in arrays.items():
        assert array.tobytes() == _local(s3.root, path).read_bytes(), path
    total = sum(file.size for file in model.files)
    assert stats.bytes == total
    assert stats.requests == len(plan_parts(spans, 48 << 10))
    assert stats.retries == stats.throttles == stats.resumed == 0
    assert 0 < stats.ttfb_median_s <= stats.ttfb_p99_s
    assert sum(c.bytes for c in stats.connections) == total
    assert all(c.throughput > 0 for c in stats.connections if c.requests)


def test_tensors_land_in_their_own_arrays_in_block_order(s3: SimpleNamespace) -> None:
    """Spans of tensors (as a loader has them) read straight into each tensor's array, the
    parts taken in the order given (here: the last block first)."""
    model = open_model(f"s3://{BUCKET}/sharded/")
    facts = {file.path: file.remote for file in model.files}
    arrays = {e.name: np.empty(e.array_shape, np.dtype(e.array_dtype)) for e in model.extents}
    by_block = sorted(model.extents, key=lambda e: model.blocks().index(e.block), reverse=True)
    spans = [Span(facts[e.file], e.offset, e.length, memoryview(arrays[e.name])) for e in by_block]
    parts = plan_parts(spans, 16 << 10)
    order: list[tuple[str, int]] = []
    with open_store(parse_object_url(model.path)) as store, ObjectReader(store, 1) as reader:
        reader.read(parts, on_record=lambda r: order.append((r.url, r.first)))
    assert order == [(part.facts.url, part.offset) for part in parts]
    for extent in model.extents:
        data = _local(s3.root, extent.file).read_bytes()[extent.offset : extent.end]
        assert arrays[extent.name].tobytes() == data, extent.name


def test_discard_streams_through_bounded_memory(s3: SimpleNamespace) -> None:
    model = open_model(f"s3://{BUCKET}/large-gguf/")
    (file,) = model.files
    assert file.remote is not None
    chunks: dict[int, bytes] = {}
    lock = threading.Lock()

    def keep(url: str, offset: int, chunk: memoryview) -> None:
        assert len(chunk) <= 64 << 10  # never more than the scratch memory at once
        with lock:
            chunks[offset] = bytes(chunk)

    parts = plan_parts([Span(file.remote, 0, file.size)], 1 << 20)
    assert all(part.targets is None for part in parts)
    store = open_store(parse_object_url(file.path))
    with store, ObjectReader(store, 2, scratch_bytes=64 << 10) as reader:
        stats = reader.read(parts, on_data=keep)
    assert stats.requests == len(parts)  # one request per part, however small the scratch
    joined = b"".join(chunks[offset] for offset in sorted(chunks))
    assert joined == _local(s3.root, file.path).read_bytes()


def test_plan_parts_cuts_and_joins() -> None:
    model_facts = SimpleNamespace(url="s3://b/k", size=100, etag=None)
    memory = np.arange(100, dtype=np.uint8)
    spans = [
        Span(model_facts, 0, 30, memoryview(memory[:30])),  # type: ignore[arg-type]
        Span(model_facts, 30, 50, memoryview(memory[30:80])),  # type: ignore[arg-type]
        Span(model_facts, 90, 10, memoryview(memory[90:])),  # type: ignore[arg-type]
    ]
    parts = plan_parts(spans, 40)
    assert [(p.offset, p.length) for p in parts] == [(0, 40), (40, 40), (90, 10)]
    assert [len(t) for t in parts[0].targets or ()] == [30, 10]
    assert bytes(parts[1].targets[0]) == bytes(range(40, 80))  # type: ignore[index]
    with pytest.raises(ValueError, match="memory"):
        plan_parts([Span(model_facts, 0, 5, memoryview(memory[:4]))], 8)  # type: ignore[arg-type]


def test_cancel_stops_every_reader_promptly(faulty_s3: SimpleNamespace) -> None:
    """Promptly: at its next step, counted in requests, not seconds. Cancelled once the first
    part arrived, every reader stops with the request it had sent at most (the proxy counts
    them after the cancel); readers that read on would send the rest of the 117 parts'."""
    model = open_model(f"s3://{BUCKET}/large/")
    (file,) = model.files
    assert file.remote is not None
    proxy = faulty_s3.proxy
    proxy.faults.latency_s = 0.2  # each request waits: the cancel finds requests in flight
    parts = plan_parts([Span(file.remote, 0, file.size)], 64 << 10)
    readers = 2
    seen_at_cancel: list[int] = []
    with open_store(parse_object_url(file.path)) as store, ObjectReader(store, readers) as reader:

        def cancel_after_the_first(_: object) -> None:
            if not seen_at_cancel:
                reader.cancel()
                seen_at_cancel.append(len(proxy.seen))

        with pytest.raises(LoadCancelled):
            reader.read(parts, on_record=cancel_after_the_first)
    assert len(parts) > 10 * readers
    assert len(proxy.seen) - seen_at_cancel[0] <= readers, proxy.seen[seen_at_cancel[0] :]


def test_an_empty_read_and_its_stats() -> None:
    from modelmon.core.storage.records import ReadStats

    stats = ReadStats.of([], 2)
    assert stats.requests == stats.bytes == 0 and math.isnan(stats.ttfb_median_s)
    assert math.isnan(stats.throughput)


def test_a_body_is_read_straight_into_memory(s3: SimpleNamespace) -> None:
    """botocore's answer is read by ``recv_into`` the caller's memory (http.client under
    urllib3), not copied from urllib3's buffers: a change of either that loses it fails here."""
    url = parse_object_url(f"s3://{BUCKET}/single/model.safetensors")
    expected = (s3.root / BUCKET / "single" / "model.safetensors").read_bytes()[100:1100]
    with open_store(url) as store:
        connection = store.connect()
        try:
            answer, body = connection.get(url, 100, 1099, None)
            assert body.zero_copy and answer.content_range == (100, 1099, answer.total)
            memory = bytearray(1000)
            view, filled = memoryview(memory), 0
            while filled < len(memory):
                filled += body.readinto(view[filled:])
            assert body.finish() == 0 and bytes(memory) == expected
        finally:
            connection.close()
