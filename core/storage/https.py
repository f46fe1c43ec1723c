"""https:// (and http://) of a server that honours byte ranges: plain ranged GETs through
urllib3, one pool of one connection per reader; no listing, no signing, redirects refused
(a redirect's target is often a signed URL, which modelmon would then have to keep)."""

from __future__ import annotations

import logging
from email.utils import parsedate_to_datetime
from typing import Any

from modelmon.core.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageError,
    redact_url,
)
from modelmon.core.storage.connection import (
    Answer,
    Body,
    Connection,
    Listed,
    Store,
    Transient,
    describe,
    tls_failure,
    utc_text,
)
from modelmon.core.storage.facts import host_kind
from modelmon.core.storage.policy import Timeouts
from modelmon.core.storage.transfer import once_error
from modelmon.core.storage.urls import ObjectURL
from modelmon.core.storage.waits import waiting_for


class _TargetRedaction(logging.Filter):
    """urllib3 logs every request's target at DEBUG, its query whole: the query's values
    are redacted there as everywhere modelmon's URLs are written (``redact_url``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_redacted_argument(value) for value in record.args)
        return True


def _redacted_argument(value: object) -> object:
    if isinstance(value, str) and any(mark in value for mark in "?#@"):
        return redact_url(value)
    return value


_REQUEST_LOG = logging.getLogger("urllib3.connectionpool")
if not any(isinstance(known, _TargetRedaction) for known in _REQUEST_LOG.filters):
    _REQUEST_LOG.addFilter(_TargetRedaction())


class HTTPStore(Store):
    """One http(s) host."""

    region = None
    credentials = "none: plain requests"
    endpoint_source = "the URL"

    def __init__(self, url: ObjectURL, timeouts: Timeouts | None = None) -> None:
        self.storage = url.scheme
        self._origin = f"{url.scheme}://{url.host}"  # where requests go
        self.endpoint = redact_url(self._origin)  # as it is written (a checked host: the same)
        hostname = url.host.rsplit(":", 1)[0] if not url.host.startswith("[") else url.host
        self.host_kind = host_kind(hostname.split("]")[0])
        self._timeouts = timeouts or Timeouts()
        self._control: HTTPConnection | None = None

    def connect(self) -> HTTPConnection:
        import urllib3

        timeout = urllib3.Timeout(connect=self._timeouts.connect_s, read=self._timeouts.read_s)
        pool = urllib3.connection_from_url(
            self._origin, maxsize=1, block=False, timeout=timeout, retries=False
        )
        return HTTPConnection(self, pool)

    def head(self, url: ObjectURL) -> Answer:
        if self._control is None:
            self._control = self.connect()
        try:
            raw = self._control.send(url, "HEAD", {})
        except Transient as exc:
            raise once_error(url, exc) from None
        answer = _answer(raw)
        raw.release_conn()
        return answer

    def list(self, prefix: ObjectURL, limit: int) -> list[Listed]:
        raise StorageError(prefix.text, f"an {self.storage}:// server has no listing")

    def close(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None


class HTTPConnection(Connection):
    def __init__(self, store: HTTPStore, pool: Any) -> None:
        self._store, self._pool = store, pool

    def send(self, url: ObjectURL, method: str, headers: dict[str, str]) -> Any:
        """The answer's raw response when its status is one a read can use (2xx)."""
        import urllib3.exceptions as errors

        try:
            with waiting_for(self._store.endpoint):
                raw = self._pool.urlopen(
                    method,
                    url.http_path,
                    headers={"Accept-Encoding": "identity", **headers},
                    redirect=False,
                    preload_content=False,
                    decode_content=False,
                    retries=False,
                )
        except (errors.NewConnectionError, errors.ConnectTimeoutError) as exc:
            raise Transient(
                "unreachable", f"cannot reach {self._store.endpoint} ({describe(exc)})"
            ) from None
        except errors.ReadTimeoutError:
            raise Transient("timeout", f"no answer from {self._store.endpoint}") from None
        except errors.SSLError as exc:
            # urllib3's context trusts OpenSSL's default paths, which SSL_CERT_FILE names.
            failure = tls_failure(self._store.endpoint, exc, "SSL_CERT_FILE")
            raise StorageError(url.text, failure) from None
        except (errors.HTTPError, OSError) as exc:
            raise Transient("dropped", f"the connection dropped ({describe(exc)})") from None
        if raw.status < 300:
            return raw
        status = raw.status
        raw.drain_conn() if method == "HEAD" else raw.close()
        raw.release_conn()
        raise _refusal(self._store, url, status)

    def get(
        self, url: ObjectURL, first: int, last: int, if_match: str | None
    ) -> tuple[Answer, Body]:
        headers = {"Range": f"bytes={first}-{last}"}
        if if_match:
            headers["If-Match"] = if_match
        raw = self.send(url, "GET", headers)
        return _answer(raw), Body(raw)

    def close(self) -> None:
        self._pool.close()


def _refusal(store: HTTPStore, url: ObjectURL, status: int) -> Exception:
    if status in (429, 503):
        return Transient("throttled", f"throttled by the server ({status})", status)
    if status in (500, 502, 504):
        return Transient("server-error", f"the server failed ({status})", status)
    if status in (401, 403):
        return StorageAccessError(
            url.text,
            f"access refused ({status}): modelmon sends no credentials to a plain "
            f"{store.storage}:// server",
            status,
        )
    if status in (404, 410):
        return ObjectNotFoundError(url.text, f"no such file on the server ({status})", status)
    if status == 412:
        return ObjectChangedError(
            url.text, f"the file was replaced since it was opened ({status} on If-Match)"
        )
    if 300 <= status < 400:
        return StorageError(
            url.text,
            f"the server redirects elsewhere ({status}): modelmon reads only the URL it is "
            "given; name the file where it lives",
            status,
        )
    return StorageError(url.text, f"the server refused the request ({status})", status)


def _answer(raw: Any) -> Answer:
    return Answer.of(raw.status, raw.headers, _iso(raw.headers.get("Last-Modified")))


def _iso(value: str | None) -> str | None:
    if not value:
        return None
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return utc_text(moment)
