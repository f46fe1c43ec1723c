"""Ranged reads paced by the bucket: a throttle is the bucket's word on its request rate, so
the reader asks fewer requests at once and larger parts (AIMD), and fails only when nothing
arrives any more. Against a proxy in front of a real S3 server that answers 503 SlowDown
above a request rate, as S3 does per prefix; behaviour is asserted, never speed."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from modelmon.core.errors import StorageThrottledError
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.objects import ObjectSource, open_store
from modelmon.core.storage.pace import MAX_PART, Pace
from modelmon.core.storage.policy import RetryPolicy
from modelmon.core.storage.reader import ObjectReader, Part, Span, _Queue, plan_parts
from modelmon.core.storage.records import ReadStats, RequestRecord
from modelmon.core.storage.urls import parse_object_url

from ...object_store import BUCKET

LARGE = f"s3://{BUCKET}/large/model.safetensors"
PART = 64 << 10
# Short waits, but enough tries that a token (one every 1/rate s) comes back within them.
PATIENT = RetryPolicy(attempts=8, base_s=0.02, cap_s=0.2)
QUICK = RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)


def _facts(url: str) -> ObjectFacts:
    parsed = parse_object_url(url)
    with open_store(parsed) as store, ObjectSource(store, parsed) as source:
        return source.facts


def _read(
    faulty: SimpleNamespace, policy: RetryPolicy, connections: int = 4, **faults: object
) -> tuple[np.ndarray, ReadStats, list[RequestRecord]]:
    facts = _facts(LARGE)
    for name, value in faults.items():
        setattr(faulty.proxy.faults, name, value)
    array = np.zeros(facts.size, np.uint8)
    records: list[RequestRecord] = []
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], PART)
    store = open_store(parse_object_url(LARGE))
    with store, ObjectReader(store, connections, policy=policy) as reader:
        stats = reader.read(parts, on_record=records.append)
    return array, stats, records


def test_a_bucket_that_throttles_above_a_rate_is_read_with_fewer_larger_requests(
    faulty_s3: SimpleNamespace,
) -> None:
    """116 parts of 64 KiB over 4 connections against 40 GETs a second (4 at once): asked
    as they are, the reads keep being refused and fail after their tries; paced, they end
    with every byte, fewer connections and larger parts after the first 503s."""
    array, stats, records = _read(faulty_s3, PATIENT, rate=40.0, burst=4.0)
    assert array.tobytes() == (faulty_s3.root / LARGE.removeprefix("s3://")).read_bytes()
    assert stats.throttles > 0 and stats.adapted
    first = stats.pace[0]
    assert (first.connections, first.part) == (4, PART)
    assert min(point.connections for point in stats.pace) < 4
    assert max(point.part for point in stats.pace) > PART
    throttled_at = min(r.sent_ns for r in records if r.outcome == "throttled")
    later = [r for r in records if r.sent_ns > throttled_at and r.outcome == "ok"]
    assert max(r.asked for r in later) > PART  # parts joined after the 503s
    assert all(r.asked <= PART for r in records if r.sent_ns < throttled_at)
    # Every throttled part was asked again: the bytes are all there, each read once.
    assert sum(r.received for r in records) == array.size


def test_a_bucket_that_throttles_every_request_fails_in_one_line_with_the_count(
    faulty_s3: SimpleNamespace,
) -> None:
    with pytest.raises(StorageThrottledError) as caught:
        _read(faulty_s3, QUICK, throttle=100_000)
    line = str(caught.value)
    assert "\n" not in line
    assert line.startswith(f"{LARGE}: throttled by the endpoint (503 SlowDown), after 4 tries; ")
    seen = [s for s in faulty_s3.proxy.seen if s.fault == "throttle"]
    assert line.endswith(f"; {len(seen)} of {len(seen)} requests throttled, nothing arrived")


def test_a_throttle_halves_the_requests_in_flight_and_doubles_the_part_once_a_round() -> None:
    pace = Pace(8, 8 << 20, 8 << 30)
    sent = time.perf_counter_ns()
    pace.throttled(sent)
    assert pace.now() == (4, 16 << 20)
    pace.throttled(sent)  # sent before the decrease: the same congestion, no second one
    assert pace.now() == (4, 16 << 20) and pace.throttles == 2
    pace.throttled(time.perf_counter_ns())
    assert pace.now() == (2, 32 << 20)
    pace.answered()
    assert pace.now() == (2, 32 << 20)  # a round is as many answers as are allowed
    pace.answered()
    assert pace.now() == (3, 32 << 20)  # larger parts stay: they cost no memory
    for _ in range(100):
        pace.answered()
    assert pace.now() == (8, 32 << 20)  # never more than the connections open


def test_parts_grow_to_a_part_per_connection_of_the_read_at_most() -> None:
    pace = Pace(4, 8 << 20, 1 << 30)
    for _ in range(20):
        pace.throttled(time.perf_counter_ns())
    assert pace.now() == (1, 256 << 20) and pace.max_part == (1 << 30) // 4
    assert Pace(1, 8 << 20, 100 << 30).max_part == MAX_PART
    assert Pace(4, 8 << 20, 4 << 20).max_part == 8 << 20  # never below the part asked for


def test_the_queue_joins_parts_that_follow_each_other_up_to_the_pace() -> None:
    import threading

    facts = ObjectFacts(
        url="s3://b/k",
        request_url="s3://b/k",
        size=10 << 20,
        etag=None,
        last_modified=None,
        storage="s3",
        endpoint="http://127.0.0.1:1",
        region="us-east-1",
        host_kind="minio-or-local",
        ranges="206",
        credentials="env",
    )
    memory = memoryview(bytearray(10 << 20))
    parts = plan_parts([Span(facts, 0, 10 << 20, memory)], 1 << 20)
    pace, stop = Pace(2, 1 << 20, 10 << 20), threading.Event()
    queue = _Queue(parts, pace, stop, threading.Event())
    taken = queue.take(0)
    assert taken is not None and taken[0].length == 1 << 20  # at the pace asked for
    queue.give_back(taken[0])
    pace.throttled(time.perf_counter_ns())  # one connection, 2 MiB parts
    joined = queue.take(0)
    assert joined is not None
    part, tries = joined
    assert isinstance(part, Part) and (part.offset, part.length, tries) == (0, 2 << 20, 1)
    assert part.targets is not None and sum(len(t) for t in part.targets) == 2 << 20
    # Connection 1 waits for its turn while parts remain; a stop is its way out.
    waiter = threading.Thread(target=lambda: found.append(queue.take(1)))
    found: list[object] = []
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()
    stop.set()
    waiter.join()
    assert found == [None]


def test_the_pace_of_several_readers_sums_their_connections_from_when_all_have_asked() -> None:
    from modelmon.core.storage.records import PacePoint, pace_of

    def sent(at_ms: int, reader: int, allowed: int, part: int) -> RequestRecord:
        ns = at_ms * 1_000_000
        return RequestRecord(
            0, "u", 0, part, part, 206, ns, ns, ns, "ok", 0, False, allowed, part, reader
        )

    records = [
        sent(0, 0, 4, 8 << 20),
        sent(1, 1, 4, 8 << 20),  # both readers have asked: 8 connections
        sent(5, 0, 2, 16 << 20),
        sent(6, 1, 4, 8 << 20),  # no change
        sent(9, 1, 1, 32 << 20),
        RequestRecord(0, "u", 0, 1, 1, 206, 10**7, 10**7, 10**7, "ok", 0, False),  # unpaced
    ]
    assert pace_of(records) == (
        PacePoint(0.001, 8, 8 << 20),
        PacePoint(0.005, 6, 16 << 20),
        PacePoint(0.009, 3, 32 << 20),
    )
