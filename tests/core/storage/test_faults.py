"""The ranged reader under the faults real buckets have, injected by a proxy in front of a
real S3 server: throttling bursts, server errors, a connection reset mid-body, per-request
latency, a server that ignores ranges or misreports them, an object replaced mid-load."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from modelmon.core.errors import (
    ObjectChangedError,
    RangesIgnoredError,
    StorageError,
    StorageServerError,
    StorageThrottledError,
)
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.objects import ObjectSource, open_store
from modelmon.core.storage.policy import RetryPolicy
from modelmon.core.storage.reader import ObjectReader, Span, plan_parts
from modelmon.core.storage.records import RequestRecord
from modelmon.core.storage.urls import parse_object_url

from ...object_store import ACCESS_KEY, BUCKET, SECRET_KEY

QUICK = RetryPolicy(attempts=4, base_s=0.01, cap_s=0.05)
LARGE = f"s3://{BUCKET}/large/model.safetensors"


def _facts(url: str) -> ObjectFacts:
    parsed = parse_object_url(url)
    with open_store(parsed) as store, ObjectSource(store, parsed) as source:
        return source.facts


def _read(  # type: ignore[no-untyped-def]
    url: str, proxy, part_size: int = 256 << 10, connections: int = 2, **faults: object
):
    """(the object read into an array, its stats, its records), ``faults`` set on the proxy
    once the object is open."""
    facts = _facts(url)
    for name, value in faults.items():
        setattr(proxy.faults, name, value)
    array = np.zeros(facts.size, np.uint8)
    records: list[RequestRecord] = []
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], part_size)
    store = open_store(parse_object_url(url))
    with store, ObjectReader(store, connections, policy=QUICK) as reader:
        stats = reader.read(parts, on_record=records.append)
    return array, stats, records


def _file_bytes(faulty: SimpleNamespace, url: str) -> bytes:
    return (faulty.root / url.removeprefix("s3://")).read_bytes()


@pytest.mark.parametrize("status", [503, 429])
def test_a_throttling_burst_is_waited_out(faulty_s3: SimpleNamespace, status: int) -> None:
    array, stats, records = _read(LARGE, faulty_s3.proxy, throttle_status=status, throttle=3)
    assert array.tobytes() == _file_bytes(faulty_s3, LARGE)
    # Each throttled part is asked again, joined with its neighbours where they follow it.
    assert stats.throttles == 3 and 1 <= stats.retries <= 3
    assert [r.status for r in records if r.outcome == "throttled"] == [status] * 3


def test_server_errors_are_retried_then_given_up_on_in_one_line(faulty_s3: SimpleNamespace) -> None:
    array, stats, _ = _read(LARGE, faulty_s3.proxy, failures=2)
    assert array.tobytes() == _file_bytes(faulty_s3, LARGE) and stats.retries == 2
    with pytest.raises(StorageServerError) as caught:
        _read(LARGE, faulty_s3.proxy, failures=1000)
    assert not isinstance(caught.value, StorageThrottledError)  # a 500 is no throttle
    assert str(caught.value) == (
        f"{LARGE}: the endpoint failed (500 InternalError), after {QUICK.attempts} tries"
    )


@pytest.mark.parametrize(
    ("status", "kind", "says"),
    [
        (503, StorageThrottledError, "throttled by the endpoint (503 SlowDown)"),
        (429, StorageThrottledError, "throttled by the endpoint (429 TooManyRequests)"),
        (500, StorageServerError, "the endpoint failed (500 InternalError)"),
        (502, StorageServerError, "the endpoint failed (502 BadGateway)"),
        (504, StorageServerError, "the endpoint failed (504 GatewayTimeout)"),
    ],
)
def test_a_throttle_and_a_server_failure_are_each_named_as_what_they_are(
    faulty_s3: SimpleNamespace, status: int, kind: type[StorageError], says: str
) -> None:
    faults = {"throttle": 1000, "throttle_status": status} if status in (503, 429) else {}
    faults = faults or {"failures": 1000, "fail_with": status}
    with pytest.raises(StorageError) as caught:
        _read(LARGE, faulty_s3.proxy, **faults)
    assert type(caught.value) is kind
    line = f"{LARGE}: {says}, after {QUICK.attempts} tries"
    if kind is StorageThrottledError:  # the bucket's rate failed the read: its count too
        assert str(caught.value).startswith(f"{line}; ")
        assert str(caught.value).endswith(" requests throttled, nothing arrived")
    else:
        assert str(caught.value) == line


def test_a_storage_error_pickles_as_itself() -> None:
    """A worker's failure crosses its pipe pickled: the same type and fields come out."""
    import pickle

    sent = StorageServerError(LARGE, "the endpoint failed (500 InternalError)", 500, "E")
    received = pickle.loads(pickle.dumps(sent))
    assert type(received) is StorageServerError and str(received) == str(sent)
    assert (received.url, received.problem, received.status, received.code) == (
        LARGE,
        "the endpoint failed (500 InternalError)",
        500,
        "E",
    )


def test_an_endpoint_that_never_answers_fails_at_the_storage_timeout(
    faulty_s3: SimpleNamespace,
) -> None:
    """It takes the request and sends nothing: one wait of the storage timeout, not 8 tries
    of the read timeout each; the line says what happened and how to wait longer."""
    from modelmon.core.storage.policy import Timeouts

    facts = _facts(LARGE)
    faulty_s3.proxy.faults.silent = True
    patient = RetryPolicy(patience_s=1.0)  # 8 tries, were the timeout not the bound
    array = np.zeros(facts.size, np.uint8)
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], 1 << 20)
    store = open_store(parse_object_url(LARGE), Timeouts().within(1.0))
    records: list[RequestRecord] = []
    reader = ObjectReader(store, 1, policy=patient)
    with store, reader, pytest.raises(StorageError) as caught:
        reader.read(parts, on_record=records.append)
    endpoint = faulty_s3.proxy.endpoint
    assert str(caught.value) == (
        f"{LARGE}: no answer from {endpoint}; nothing arrived within the storage timeout, 1 s "
        "(1 try; --storage-timeout SECONDS or MODELMON_STORAGE_TIMEOUT waits longer)"
    )
    assert [r.outcome for r in records] == ["timeout"]


def test_bytes_arriving_keep_a_read_going_past_the_storage_timeout(
    faulty_s3: SimpleNamespace,
) -> None:
    """The storage timeout counts from the last byte that arrived: a body cut short again and
    again after progress, each answer 0.5 s late, keeps going well past a 2 s timeout."""
    part, cut, cuts = 8 << 20, 100_000, 6  # one part: the whole object
    patient = RetryPolicy(attempts=2, base_s=0.01, cap_s=0.01, patience_s=2.0)
    facts = _facts(LARGE)
    faults = faulty_s3.proxy.faults
    faults.reset_after, faults.resets, faults.cleanly, faults.latency_s = cut, cuts, True, 0.5
    array = np.zeros(facts.size, np.uint8)
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], part)
    store = open_store(parse_object_url(LARGE))
    records: list[RequestRecord] = []
    with store, ObjectReader(store, 1, policy=patient) as reader:
        reader.read(parts, on_record=records.append)
    assert array.tobytes() == _file_bytes(faulty_s3, LARGE)
    dropped = [r for r in records if r.outcome == "dropped"]
    assert len(dropped) == cuts and all(r.received for r in dropped)
    assert sum(r.end_ns - r.sent_ns for r in records) / 1e9 > patient.patience_s


@pytest.mark.parametrize("cleanly", [True, False], ids=["closed", "reset"])
def test_a_body_cut_short_resumes_where_it_stopped(
    faulty_s3: SimpleNamespace, cleanly: bool
) -> None:
    """Closed mid-body (every byte sent arrives): asked again from exactly the byte where it
    stopped. Reset mid-body (a RST: what the socket held is lost, and with it the count of
    the slice being read): from the first byte that had not reached memory."""
    part, cut = 512 << 10, 300_000
    array, stats, records = _read(
        LARGE,
        faulty_s3.proxy,
        part_size=part,
        connections=1,
        reset_after=cut,
        resets=1,
        cleanly=cleanly,
    )
    assert array.tobytes() == _file_bytes(faulty_s3, LARGE)
    (dropped,) = [r for r in records if r.outcome == "dropped"]
    (resumed,) = [r for r in records if r.resumed]
    assert dropped.first == 0 and dropped.received <= cut
    if cleanly:
        assert dropped.received == cut
    assert resumed.first == dropped.received and resumed.first + resumed.asked == part
    ranges = [seen.range for seen in faulty_s3.proxy.seen if seen.method == "GET"]
    assert f"bytes={dropped.received}-{part - 1}" in ranges
    assert stats.resumed == 1 and stats.retries == 1


def test_latency_per_request_shows_in_the_time_to_first_byte(faulty_s3: SimpleNamespace) -> None:
    _, stats, records = _read(LARGE, faulty_s3.proxy, part_size=1 << 20, latency_s=0.05)
    assert all(r.ttfb_s >= 0.05 for r in records)
    assert 0.05 <= stats.ttfb_median_s <= stats.ttfb_p99_s


def test_a_server_that_ignores_ranges_is_refused(faulty_s3: SimpleNamespace) -> None:
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.ignore_ranges = True
    array = np.zeros(facts.size, np.uint8)
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], 1 << 20)
    store = open_store(parse_object_url(LARGE))
    with store, ObjectReader(store, 2) as reader, pytest.raises(RangesIgnoredError) as caught:
        reader.read(parts)
    assert str(caught.value) == (
        f"{LARGE}: the server ignores byte ranges: it answered a ranged GET with the whole "
        "object (200, no Content-Range); modelmon reads objects by ranges only"
    )


def test_an_answer_of_another_range_than_asked_is_an_error(faulty_s3: SimpleNamespace) -> None:
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.misreport = 16
    array = np.zeros(facts.size, np.uint8)
    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], 1 << 20)
    store = open_store(parse_object_url(LARGE))
    sent = r"asked for bytes 0-1048575, the server sent 16-1048591"
    with store, ObjectReader(store, 1) as reader, pytest.raises(StorageError, match=sent):
        reader.read(parts)


def _rclone_client(endpoint: str) -> object:
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session()
    session.set_credentials(ACCESS_KEY, SECRET_KEY)
    return session.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=endpoint,
        config=Config(s3={"addressing_style": "path"}),
    )


@pytest.mark.parametrize("server", ["rclone", "moto"])
def test_an_object_replaced_mid_load_fails_saying_so(
    request: pytest.FixtureRequest,
    rclone_server: object,
    moto_server: object,
    server: str,
) -> None:
    """moto answers the next ranged GET's If-Match with 412; rclone ignores If-Match, and the
    answer's other ETag tells."""
    s3 = request.getfixturevalue(f"{server}_s3")
    key = f"replaced/{server}.bin"
    first, second = bytes(range(256)) * 4096, bytes(reversed(range(256))) * 4096
    if server == "moto":
        put = s3.server.put
    else:
        client = _rclone_client(s3.server.endpoint)
        request.addfinalizer(client.close)  # type: ignore[attr-defined]

        def put(bucket: str, key: str, data: bytes) -> None:
            client.put_object(Bucket=bucket, Key=key, Body=data)  # type: ignore[attr-defined]

    put(BUCKET, key, first)
    url = f"s3://{BUCKET}/{key}"
    facts = _facts(url)
    array = np.zeros(facts.size, np.uint8)
    replaced: list[bool] = []

    def replace_after_the_first(record: RequestRecord) -> None:
        if not replaced:
            replaced.append(True)
            put(BUCKET, key, second)  # same size, other bytes

    parts = plan_parts([Span(facts, 0, facts.size, memoryview(array))], 64 << 10)
    store = open_store(parse_object_url(url))
    with store, ObjectReader(store, 1) as reader, pytest.raises(ObjectChangedError) as caught:
        reader.read(parts, on_record=replace_after_the_first)
    line = str(caught.value)
    assert line.startswith(f"{url}: the object was replaced since it was opened")
    assert ("412" in line) if server == "moto" else (facts.etag or "") in line


class Longest(RetryPolicy):
    """Every back-off the longest its policy allows: no jitter draws a short one."""

    def delay(self, failures: int, rng: object = None) -> float:
        return min(self.cap_s, self.base_s * 2 ** (failures - 1))


BACK_OFF_S = 60.0


def test_a_back_off_ends_when_another_reader_fails_or_the_read_is_cancelled() -> None:
    """A reader waiting out a long back-off stops on the stop or the cancel, said by what it
    raises. The bound: every back-off takes ``BACK_OFF_S``, so a read that waited one out
    always takes that long, and one that ends on the event, within a poll of it, never
    comes near it."""
    import threading
    import time

    from modelmon.core.errors import LoadCancelled
    from modelmon.core.storage.connection import Connection, Transient
    from modelmon.core.storage.transfer import Expected, RangeReader, Stopped

    class Throttled(Connection):
        def get(self, url, first, last, if_match):  # type: ignore[no-untyped-def]
            raise Transient("throttled", "throttled by the endpoint (503 SlowDown)", 503)

        def close(self) -> None:
            pass

    slow = Longest(attempts=8, base_s=BACK_OFF_S, cap_s=BACK_OFF_S, patience_s=10 * BACK_OFF_S)
    url = parse_object_url("s3://b/k")
    for event, error in (("stop", Stopped), ("cancel", LoadCancelled)):
        cancel, stop = threading.Event(), threading.Event()
        reader = RangeReader(Throttled(), 0, slow, cancel, lambda record: None, stop)
        timer = threading.Timer(0.2, (stop if event == "stop" else cancel).set)
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(error):  # not the final error, after 8 waits
                reader.read(url, 0, (memoryview(bytearray(10)),), Expected(10, None))
        finally:
            timer.join()
        assert time.monotonic() - started < BACK_OFF_S  # not after even one back-off
