"""An object as a parser's byte source: opened by one ranged GET of its first
``PROBE_BYTES`` (whose answer tells its size, ETag and last-modified), later reads asking for
just the bytes wanted, ``If-Match`` that ETag; and the store that holds a URL."""

from __future__ import annotations

import threading

from modelmon.core.errors import StorageError
from modelmon.core.storage.connection import Connection, Store
from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.https import HTTPStore
from modelmon.core.storage.policy import RetryPolicy, Timeouts, read_policy, store_timeouts
from modelmon.core.storage.records import RequestRecord
from modelmon.core.storage.s3 import S3Store
from modelmon.core.storage.transfer import Expected, RangeReader
from modelmon.core.storage.urls import ObjectURL, parse_object_url

PROBE_BYTES = 1 << 20  # a safetensors header is tens of KB, a GGUF's a few MB: one GET, mostly


class ObjectSource:
    """An object of ``store`` opened by one ranged GET, on a connection of its own or one the
    caller lends (the shards of one model, opened in turn)."""

    def __init__(
        self,
        store: Store,
        url: ObjectURL,
        connection: Connection | None = None,
        probe: int | None = None,
        policy: RetryPolicy | None = None,
    ) -> None:
        self.name, self.url = url.text, url
        self.records: list[RequestRecord] = []
        self._own = connection is None  # a connection lent by the caller stays open
        self._connection = store.connect() if connection is None else connection
        self._reader = RangeReader(
            self._connection, 0, policy or read_policy(), threading.Event(), self.records.append
        )
        try:
            buffer = bytearray(PROBE_BYTES if probe is None else probe)
            ranges = ""
            try:
                answer, count = self._reader.read(url, 0, (memoryview(buffer),), None)
            except StorageError as exc:
                if exc.status != 416:  # no range fits an empty object
                    raise
                answer, count = store.head(url), 0
                if answer.content_length:  # not empty after all: the 416 stands
                    raise
                self.size, ranges = 0, "none asked (an empty object)"
            else:
                self.size = answer.total or 0
            self._prefix = bytes(buffer[:count])
            self._object = store.facts(url, answer, self.size, ranges)
        except BaseException:
            self.close()
            raise
        self._expected = Expected(self.size, self._object.etag)

    @property
    def facts(self) -> ObjectFacts:
        return self._object

    def read_at(self, offset: int, length: int) -> bytes:
        length = max(0, min(length, self.size - offset))
        if offset + length <= len(self._prefix):
            return self._prefix[offset : offset + length]
        buffer = bytearray(length)
        self._reader.read(self.url, offset, (memoryview(buffer),), self._expected)
        return bytes(buffer)

    def close(self) -> None:
        if self._own:
            self._own = False  # closed once
            self._connection.close()

    def __enter__(self) -> ObjectSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def object_endpoint(url: str) -> tuple[str, str]:
    """Where this process sends requests for ``url`` (as written: redacted) and what set it,
    from its own configuration (for s3://, the AWS configuration of its environment), without
    a request: a fleet's node checks it reads the bucket the others read."""
    with open_store(parse_object_url(url)) as store:
        return store.endpoint, store.endpoint_source


def open_store(url: ObjectURL, timeouts: Timeouts | None = None) -> Store:
    """The store that holds ``url``: its S3 endpoint, or its http(s) host (``timeouts``
    default: none past the storage timeout, ``policy.store_timeouts``)."""
    timeouts = timeouts or store_timeouts()
    if url.scheme == "s3":
        return S3Store(url, timeouts)
    return HTTPStore(url, timeouts)
