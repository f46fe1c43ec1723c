"""s3:// through botocore: ranged GETs (``Range``, ``If-Match``), HEAD, listing a prefix, and
every answer of the server turned into one clear line (``StorageError`` and its kinds) or a
``Transient`` the reader retries. botocore signs the requests and resolves the endpoint; its
own retries are off (``aws.S3Access``) so that each retry is counted and a body resumes at
the byte where it stopped."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from modelmon.core.errors import (
    ObjectChangedError,
    ObjectNotFoundError,
    StorageAccessError,
    StorageError,
    redact_url,
)
from modelmon.core.storage.aws import S3Access
from modelmon.core.storage.connection import (
    THROTTLE_CODES,
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
from modelmon.core.storage.policy import Timeouts
from modelmon.core.storage.transfer import once_error
from modelmon.core.storage.urls import ObjectURL
from modelmon.core.storage.waits import waiting_for

_ACCESS_PROBLEMS = {
    "SignatureDoesNotMatch": "the secret key is not the one the endpoint holds for this access key",
    "InvalidAccessKeyId": "the endpoint knows no such access key",
    "AccessDenied": "these credentials may not read it",
    "AllAccessDisabled": "all access to it is disabled",
    "ExpiredToken": "the session token has expired",
    "InvalidToken": "the session token is not valid",
    "TokenRefreshRequired": "the session token has expired",
    "AuthorizationHeaderMalformed": "the request was signed for another region (set AWS_REGION "
    "to the bucket's)",
}


_REGION = re.compile(r"[a-z0-9-]{1,63}")
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")


class S3Store(Store):
    """An S3 endpoint as the AWS configuration names it."""

    storage = "s3"

    def __init__(self, bucket: ObjectURL, timeouts: Timeouts | None = None) -> None:
        self._access = S3Access(f"s3://{bucket.host}", timeouts)
        endpoint = self._access.endpoint
        # The endpoint as every line and record writes it; requests go to endpoint.url.
        self.endpoint, self.region = redact_url(endpoint.url), endpoint.region
        self.host_kind, self.credentials = endpoint.host_kind, endpoint.credentials
        self.addressing, self.region_source = endpoint.addressing, endpoint.region_source
        self.endpoint_source, self.searched = endpoint.endpoint_source, endpoint.searched
        self._control: Any = None  # for HEAD and listing: made on first use

    def connect(self) -> S3Connection:
        return S3Connection(self, self._access.client(1))

    def _control_client(self) -> Any:
        if self._control is None:
            self._control = self._access.client(1)
        return self._control

    def head(self, url: ObjectURL) -> Answer:
        response = self.call(url, "head_object", Bucket=url.host, Key=url.key)
        return _answer(response)

    def list(self, prefix: ObjectURL, limit: int) -> list[Listed]:
        found: list[Listed] = []
        token: dict[str, str] = {}
        while True:
            page = self.call(
                prefix,
                "list_objects_v2",
                Bucket=prefix.host,
                Prefix=prefix.key,
                Delimiter="/",
                **token,
            )
            for item in page.get("Contents", ()):
                name = item["Key"][len(prefix.key) :]
                if name:
                    found.append(Listed(name, int(item.get("Size", 0))))
            if len(found) > limit:
                raise StorageError(
                    prefix.text,
                    f"holds over {limit} objects: name the model's file or index in it",
                )
            if not page.get("IsTruncated") or not page.get("NextContinuationToken"):
                return found
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def call(self, url: ObjectURL, operation: str, **params: Any) -> Any:
        """One request on the control connection, failures as ``translate`` says (a
        Transient here is final: HEAD and listing are not retried, and say so)."""
        try:
            return request(self, self._control_client(), url, operation, **params)
        except Transient as exc:
            raise once_error(url, exc) from None

    def close(self) -> None:
        if self._control is not None:
            close_client(self._control)
            self._control = None


class S3Connection(Connection):
    """One botocore client whose pool holds one connection."""

    def __init__(self, store: S3Store, client: Any) -> None:
        self._store, self._client = store, client

    def get(
        self, url: ObjectURL, first: int, last: int, if_match: str | None
    ) -> tuple[Answer, Body]:
        conditions = {"IfMatch": if_match} if if_match else {}
        response = request(
            self._store,
            self._client,
            url,
            "get_object",
            Bucket=url.host,
            Key=url.key,
            Range=f"bytes={first}-{last}",
            **conditions,
        )
        stream = response["Body"]
        return _answer(response), Body(getattr(stream, "_raw_stream", stream))

    def close(self) -> None:
        close_client(self._client)


def close_client(client: Any) -> None:
    """Close a client's connections now. botocore's ``close`` empties its urllib3 pool
    manager, whose pools close their sockets only when collected (urllib3 2.x): anything
    that keeps one (a debug log record) would keep a socket open. So each pool is closed
    first, through attributes botocore and urllib3 have long had (skipped if they change)."""
    session = getattr(getattr(client, "_endpoint", None), "http_session", None)
    managers = [getattr(session, "_manager", None)]
    managers += list(getattr(session, "_proxy_managers", {}).values())
    for manager in managers:
        pools = getattr(manager, "pools", None)
        if pools is None:
            continue
        for key in list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
    client.close()


def request(store: S3Store, client: Any, url: ObjectURL, operation: str, **params: Any) -> Any:
    """``client.<operation>(**params)``; a refusal as a StorageError, a failure worth a
    retry as a Transient."""
    import botocore.exceptions as errors

    try:
        with waiting_for(store.endpoint, (errors.ClientError,)):
            return getattr(client, operation)(**params)
    except errors.ClientError as exc:
        raise translate(store, url, exc.response) from None
    except (errors.EndpointConnectionError, errors.ConnectTimeoutError) as exc:
        raise Transient(
            "unreachable", f"cannot reach the endpoint {store.endpoint} ({describe(exc)})"
        ) from None
    except errors.ReadTimeoutError:
        raise Transient("timeout", f"no answer from {store.endpoint}") from None
    except errors.SSLError as exc:
        # botocore trusts its own bundle, or the one AWS_CA_BUNDLE (ca_bundle) names.
        failure = tls_failure(store.endpoint, exc, "AWS_CA_BUNDLE")
        raise StorageError(url.text, failure) from None
    except errors.HTTPClientError as exc:
        raise Transient("dropped", f"the connection dropped ({describe(exc)})") from None
    except errors.ParamValidationError as exc:
        problem = str(exc).strip().splitlines()[-1] if str(exc).strip() else "invalid"
        raise StorageError(url.text, f"not a valid S3 request: {problem}") from None
    except errors.NoCredentialsError:
        raise StorageAccessError(url.text, "no credentials to sign the request") from None


def translate(store: S3Store, url: ObjectURL, response: Any) -> Exception:
    """What an S3 error answer means, in one line (never the server's whole message: only
    its status and code, which hold no credential)."""
    error = response.get("Error", {})
    metadata = response.get("ResponseMetadata", {})
    status = int(metadata.get("HTTPStatusCode") or 0)
    code = str(error.get("Code") or status)
    answer = f"{status} {code}" if code != str(status) else str(status)
    if code in THROTTLE_CODES or status in (429, 503):
        return Transient("throttled", f"throttled by the endpoint ({answer})", status, code)
    if status in (500, 502, 504):
        return Transient("server-error", f"the endpoint failed ({answer})", status, code)
    if store.searched and status in (400, 401, 403):
        return StorageAccessError(
            url.text,
            f"the endpoint {store.endpoint} refused the request ({answer}), which was "
            f"anonymous: no credentials were found (looked in {store.searched}); give them "
            "in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile (AWS_PROFILE)",
            status,
            code,
        )
    if status in (401, 403) or code in _ACCESS_PROBLEMS:
        problem = _ACCESS_PROBLEMS.get(code, "access refused")
        return StorageAccessError(
            url.text,
            f"{problem} ({answer}; credentials: {store.credentials}; endpoint {store.endpoint})",
            status,
            code,
        )
    if status == 404 or code in ("NoSuchBucket", "NoSuchKey"):
        if code == "NoSuchBucket":
            problem = f"no bucket {url.host!r} at {store.endpoint}"
        else:
            problem = f"no such object at {store.endpoint}"
        return ObjectNotFoundError(url.text, f"{problem} ({answer})", status, code)
    if status == 412:
        return ObjectChangedError(
            url.text, f"the object was replaced since it was opened ({answer} on If-Match)"
        )
    if 300 <= status < 400 or code in ("PermanentRedirect", "TemporaryRedirect"):
        headers = metadata.get("HTTPHeaders", {})
        return StorageError(url.text, redirected(store, answer, headers), status, code)
    return StorageError(url.text, f"the endpoint refused the request ({answer})", status, code)


def redirected(store: S3Store, answer: str, headers: dict[str, str]) -> str:
    """What a redirect means, in the words of the region it names (x-amz-bucket-region)
    against the one requests are signed for, and where it points (its Location's host)."""
    said = headers.get("x-amz-bucket-region")
    said = said if said and _REGION.fullmatch(said) else None
    location = headers.get("location")
    host = urlsplit(location).netloc.rpartition("@")[2] if location else ""
    to = f" to {host}" if _HOST.fullmatch(host) else ""
    ours = f"{store.region} ({store.region_source})"
    unfollowed = f"the endpoint {store.endpoint} redirects this bucket{to} ({answer}), which "
    unfollowed += "modelmon does not follow"
    if said and said != store.region:
        return f"{unfollowed}: it says the bucket is in {said}, not {ours}: set AWS_REGION={said}"
    if said:
        return (
            f"{unfollowed}, though the region it names, {said}, is the one requests are signed "
            f"for ({store.region_source}): name the endpoint that serves the bucket "
            f"({store.endpoint_source or 'AWS_ENDPOINT_URL'})"
        )
    return (
        f"{unfollowed}; requests are signed for {ours}: name the endpoint that serves the "
        f"bucket ({store.endpoint_source or 'AWS_ENDPOINT_URL'}), or its region (AWS_REGION)"
    )


def _answer(response: dict[str, Any]) -> Answer:
    metadata = response.get("ResponseMetadata", {})
    headers = metadata.get("HTTPHeaders", {})
    modified = response.get("LastModified")
    status = int(metadata.get("HTTPStatusCode") or 0)
    return Answer.of(
        status, headers, utc_text(modified) if isinstance(modified, datetime) else None
    )
