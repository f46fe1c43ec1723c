"""One connection to an object store and the answer to one ranged GET on it.

A ``Store`` (an S3 endpoint, an http(s) host) makes connections; each ``Connection`` is one
TCP connection, owned by one reader at a time. ``Connection.get`` sends a ranged GET and
returns when the answer's headers are in (the time to first byte), as an ``Answer`` and a
``Body`` that reads straight into a caller's buffer: through the standard library's
``http.client`` response under urllib3 where there is one (``recv_into`` the caller's
memory, no copy), else through urllib3's ``read`` (one copy).

Failures come out in two kinds: a ``StorageError`` (refused, missing, changed: no retry helps)
or a ``Transient`` (throttled, a server error, a dropped or timed-out connection), which the
reader retries.
"""

from __future__ import annotations

import contextlib
import http.client
import re
import ssl
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from modelmon.core.storage.facts import ObjectFacts
from modelmon.core.storage.urls import ObjectURL

# Connections a parallel client of a bucket opens without tuning: the plain parallel read of
# the bucket's ceilings, and where recommend's search starts when the bucket's curve says
# nothing; the watch's advice names no other number (recommend measures the endpoint's best).
CLIENT_CONNECTIONS = 8
THROTTLE_CODES = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests"}
)
_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+|\*)\s*", re.IGNORECASE)


class Transient(Exception):
    """A failure that a retry may cure. ``kind``: "throttled" (503 SlowDown, 429),
    "server-error" (500, 502, 504), "dropped" (reset, closed, cut short), "timeout",
    "unreachable" (the connection could not be made)."""

    def __init__(
        self, kind: str, detail: str, status: int | None = None, code: str | None = None
    ) -> None:
        super().__init__(detail)
        self.kind, self.detail, self.status, self.code = kind, detail, status, code


@dataclass(frozen=True, slots=True)
class Answer:
    """The headers of a ranged GET's answer that a reader checks."""

    status: int
    content_range: tuple[int | None, int | None, int | None] | None  # first, last, total
    content_length: int | None
    etag: str | None
    last_modified: str | None  # ISO 8601, UTC

    @property
    def total(self) -> int | None:
        """The object's size, as Content-Range says it."""
        return None if self.content_range is None else self.content_range[2]

    @classmethod
    def of(cls, status: int, headers: Mapping[str, str], last_modified: str | None) -> Answer:
        """An answer from its status and headers (named in lower case, or in a mapping that
        ignores case), and its Last-Modified as ``utc_text`` writes it."""
        return cls(
            status=status,
            content_range=parse_content_range(headers.get("content-range")),
            content_length=content_length(headers.get("content-length")),
            etag=headers.get("etag"),
            last_modified=last_modified,
        )


def utc_text(moment: datetime) -> str:
    """A moment in ISO 8601, in UTC, its zone written ``Z`` (a naive moment is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_content_range(value: str | None) -> tuple[int | None, int | None, int | None] | None:
    """``bytes 0-99/1000`` → (0, 99, 1000); ``bytes */1000`` → (None, None, 1000); a value
    that is not one → None."""
    if value is None:
        return None
    match = _CONTENT_RANGE.fullmatch(value.strip())
    if match is None:
        return None
    first, last, total = match.groups()
    return _number(first), _number(last), _number(total)


def _number(text: str | None) -> int | None:
    return None if text is None or text == "*" else int(text)


def content_length(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class Body:
    """The body of one answer on one connection; ``readinto`` fills a caller's memory.

    ``finish`` after the last byte makes the connection reusable; ``drop`` closes it (a body
    not wholly read, a failed read); ``shutdown`` from another thread unblocks a read.
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        fp = getattr(raw, "_fp", None)
        self._direct = fp if isinstance(fp, http.client.HTTPResponse) else None

    @property
    def zero_copy(self) -> bool:
        return self._direct is not None

    def readinto(self, view: memoryview) -> int:
        """Bytes read into ``view`` (0: the body ended); Transient when the connection
        drops or a read times out."""
        try:
            if self._direct is not None:
                return self._direct.readinto(view)
            data = self._raw.read(len(view))
            view[: len(data)] = data
            return len(data)
        except TimeoutError:
            raise Transient("timeout", "the answer stopped arriving mid-body") from None
        except (http.client.HTTPException, ssl.SSLError, OSError, ValueError) as exc:
            raise Transient("dropped", f"connection dropped mid-body ({describe(exc)})") from None
        except Exception as exc:  # urllib3's and botocore's own ProtocolError, ReadTimeoutError
            kind = "timeout" if "timeout" in type(exc).__name__.lower() else "dropped"
            raise Transient(kind, f"connection dropped mid-body ({describe(exc)})") from None

    def finish(self) -> int:
        """After the last byte: bytes the server sent past what it announced (0 for an honest
        answer), and the connection goes back to its pool when there were none."""
        extra = 0
        if self._direct is not None and not self._direct.isclosed():
            try:  # a chunked body's last chunk, or bytes past the announced length
                extra = len(self._direct.read(1))
            except (http.client.HTTPException, OSError, ValueError):
                extra = 0
                self.drop()
                return 0
        if extra:
            self.drop()
            return extra
        release = getattr(self._raw, "release_conn", None)
        if release is not None:
            release()
        else:
            self._raw.close()
        return 0

    def drop(self) -> None:
        """Close the connection under this body (what is unread is never drained)."""
        with contextlib.suppress(Exception):  # closing a connection that already broke
            self._raw.close()
        release = getattr(self._raw, "release_conn", None)
        if release is not None:
            with contextlib.suppress(Exception):  # a pool that is closed already
                release()

    def shutdown(self) -> None:
        """Unblock a read in another thread: the socket is shut down (urllib3 ≥ 2.3)."""
        shutdown = getattr(self._raw, "shutdown", None)
        if shutdown is not None:
            with contextlib.suppress(Exception):  # already closed
                shutdown()


class Connection(ABC):
    """One connection to a store; used by one reader at a time."""

    @abstractmethod
    def get(
        self, url: ObjectURL, first: int, last: int, if_match: str | None
    ) -> tuple[Answer, Body]:
        """``Range: bytes=first-last`` (inclusive) of ``url``, ``If-Match`` when given."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Listed:
    """One object under a prefix: its name (the key past the prefix) and size."""

    name: str
    size: int


class Store(ABC):
    """An endpoint that holds objects: it makes connections, lists and describes."""

    storage: str  # "s3" | "https" | "http"
    endpoint: str
    endpoint_source: str  # what set it: "AWS_ENDPOINT_URL", "none: AWS's", "the URL"
    region: str | None
    host_kind: str
    credentials: str

    @abstractmethod
    def connect(self) -> Connection: ...

    @abstractmethod
    def head(self, url: ObjectURL) -> Answer:
        """The object's size and ETag without its bytes (for an empty object, which no
        range fits)."""

    @abstractmethod
    def list(self, prefix: ObjectURL, limit: int) -> list[Listed]:
        """The objects right under ``prefix`` (not in its sub-folders), at most ``limit``."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def facts(self, url: ObjectURL, answer: Answer, size: int, ranges: str = "") -> ObjectFacts:
        """The object's facts from the answer to its first ranged GET; ``ranges`` says how
        ranges were answered where that answer was not one (an empty object's HEAD)."""
        if not ranges:
            ranges = "206" if answer.status == 206 else f"{answer.status} with Content-Range"
        return ObjectFacts(
            url=url.text,
            request_url=url.request_text,
            size=size,
            etag=answer.etag,
            last_modified=answer.last_modified,
            storage=self.storage,
            endpoint=self.endpoint,
            region=self.region,
            host_kind=self.host_kind,
            ranges=ranges,
            credentials=self.credentials,
        )


def describe(exc: BaseException) -> str:
    """The most telling reason in an exception chain: "connection refused", "timed out"."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, OSError) and current.strerror:
            return current.strerror.lower()
        kwargs = getattr(current, "kwargs", None)
        nested = kwargs.get("error") if isinstance(kwargs, dict) else None
        for following in (
            nested,
            getattr(current, "reason", None),
            current.__cause__,
            current.__context__,
        ):
            if isinstance(following, BaseException):
                pending.append(following)
    return type(exc).__name__


def tls_failure(endpoint: str, exc: BaseException, trust: str) -> str:
    """The one line a failed TLS handshake gives: why, and where a certificate this machine
    does not trust is made trusted (``trust``: the variable that names a CA bundle)."""
    why = describe(exc)
    hint = (
        f"; to trust its certificate authority, name a bundle holding it in {trust}"
        if "certificate verify failed" in why
        else ""
    )
    return f"TLS with {endpoint} failed: {why}{hint}"
