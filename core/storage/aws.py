"""The AWS configuration a user already has, resolved once by botocore: credentials from the
standard chain (environment, ``~/.aws/credentials`` and ``config`` profiles, ``AWS_PROFILE``,
SSO, roles), the endpoint (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, a profile's
``endpoint_url``: checked first, ``endpoint``), the region (``AWS_REGION`` too) and the
addressing style (a profile's ``s3 = addressing_style``; path-style by default on an
endpoint that is not AWS's: MinIO, Ceph, a local server). Its clients follow no redirect.

What it learns is described by ``S3Endpoint``, which names where the credentials came from
and never holds them. botocore is imported only here and in ``s3``, on the first s3:// URL.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from modelmon.core.errors import StorageAccessError, StorageConfigError, StorageError
from modelmon.core.storage.endpoint import (
    DEFAULT_REGION,
    Setting,
    check_endpoint,
    configured_endpoint,
    configured_region,
    credential_places,
)
from modelmon.core.storage.facts import host_kind
from modelmon.core.storage.policy import Timeouts

_ADDRESSING = ("path", "virtual", "auto")
# botocore's data (the S3 API's model, its endpoints), parsed once per process and search
# path: a new session parses it again (0.2 s), and every load from a bucket opens one.
_LOADERS: dict[str | None, Any] = {}
_LOADERS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class S3Endpoint:
    """Where s3:// requests go and how they are made (nothing secret)."""

    url: str  # "https://s3.amazonaws.com", "http://127.0.0.1:9000"
    region: str
    addressing: str  # "path" | "virtual" | "auto" (botocore's choice per bucket)
    host_kind: str  # aws | gcs-interop | r2 | minio-or-local | other
    credentials: str  # where they came from: "env", "shared-credentials-file", "none (anonymous)"
    profile: str | None  # the AWS profile used, if one was named
    region_source: str = ""  # what set the region: "AWS_REGION", "profile research's region"
    endpoint_source: str = ""  # what set the endpoint: "AWS_ENDPOINT_URL", "none: AWS's"
    searched: str = ""  # where credentials were looked for, when none were found


class S3Access:
    """A botocore session with the configuration resolved: makes one client per connection.

    botocore's session is not thread-safe, so clients are made under a lock; a client itself
    is, but each reader gets its own with a pool of one connection (every concurrent reader
    owns its connection).
    """

    def __init__(self, bucket_url: str, timeouts: Timeouts | None = None) -> None:
        import botocore.exceptions
        import botocore.session
        from botocore import UNSIGNED
        from botocore.config import Config

        self._lock = threading.Lock()
        self._timeouts = timeouts or Timeouts()
        try:
            self._session = botocore.session.Session()
            _share_loader(self._session)
            profile = self._session.get_config_variable("profile")
            scoped = self._session.get_scoped_config()
            credentials = self._session.get_credentials()
            configured = configured_endpoint(self._session)
            region = configured_region(self._session)
        except botocore.exceptions.ProfileNotFound as exc:
            raise StorageError(
                bucket_url,
                f"AWS profile {exc.kwargs.get('profile')!r} is in neither ~/.aws/config nor "
                "~/.aws/credentials (AWS_PROFILE names it)",
            ) from None
        except botocore.exceptions.BotoCoreError as exc:
            raise StorageAccessError(
                bucket_url, f"the AWS configuration cannot be read: {_first_line(exc)}"
            ) from None
        if configured.value is not None:
            check_endpoint(configured)
        self.anonymous = credentials is None
        source = "none: anonymous requests" if credentials is None else credentials.method
        addressing = _addressing(scoped)
        try:
            probe = self._session.create_client(
                "s3", region_name=region.value, config=Config(signature_version=UNSIGNED)
            )
        except (ValueError, botocore.exceptions.BotoCoreError) as exc:
            # What check_endpoint let through and botocore does not take: its message
            # repeats the URL, so only its kind is told.
            raise StorageConfigError(
                configured.source if configured.value is not None else bucket_url,
                f"botocore cannot use the endpoint or region ({type(exc).__name__})",
            ) from None
        try:
            endpoint_url = probe.meta.endpoint_url
        finally:
            probe.close()  # it made no connection: it only resolved the endpoint
        check_endpoint(Setting(endpoint_url, configured.source))  # as botocore resolved it
        kind = host_kind(urlsplit(endpoint_url).hostname or "")
        if addressing is None:
            addressing = "auto" if kind == "aws" else "path"
        self.endpoint = S3Endpoint(
            url=endpoint_url.rstrip("/"),
            region=region.value or DEFAULT_REGION,
            addressing=addressing,
            host_kind=kind,
            credentials=source,
            profile=profile,
            region_source=region.source,
            endpoint_source=configured.source,
            searched=credential_places(self._session) if credentials is None else "",
        )
        self._config = Config(
            region_name=self.endpoint.region,
            signature_version=UNSIGNED if credentials is None else None,
            s3=cast(Any, {"addressing_style": addressing}),
            # modelmon retries itself: it counts retries and throttles, and resumes a body
            # at the byte where it stopped, which botocore's retries cannot.
            retries={"mode": "standard", "total_max_attempts": 1},
            connect_timeout=self._timeouts.connect_s,
            read_timeout=self._timeouts.read_s,
            tcp_keepalive=True,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            user_agent_extra="modelmon",
        )

    def client(self, connections: int = 1) -> Any:
        """A new S3 client whose pool holds ``connections`` connections; the caller closes it
        (``client.close()``)."""
        with self._lock:
            client = self._session.create_client(
                "s3",
                endpoint_url=self.endpoint.url,
                config=self._config.merge(_pool(connections)),
            )
        # First of every handler of an answer, so that botocore's region redirector
        # (S3RegionRedirectorv2) takes every answer as one already redirected.
        client.meta.events.register_first("needs-retry.s3", _never_redirect)
        return client


def _never_redirect(request_dict: dict[str, Any], **_: Any) -> None:
    """Mark a request as redirected already. botocore would follow a 301, 307 or 400 to the
    region the answer names, at another host; asked for a 307 without one, it asks the
    bucket's region with a HEAD that is redirected in turn, until Python's recursion limit
    (81 requests, then RecursionError). modelmon reads the endpoint it is given and tells
    a redirect as it is (``s3.translate``)."""
    context = request_dict.get("context")
    if isinstance(context, dict):
        context["s3_redirected"] = True  # what the older redirector looks for
        redirect = context.get("s3_redirect")
        if isinstance(redirect, dict):
            redirect["redirected"] = True


def _pool(connections: int) -> Any:
    from botocore.config import Config

    return Config(max_pool_connections=connections)


def _addressing(scoped: dict[str, Any]) -> str | None:
    """The profile's ``s3 = addressing_style`` (path, virtual or auto), if it sets one."""
    section = scoped.get("s3")
    style = section.get("addressing_style") if isinstance(section, dict) else None
    return style if style in _ADDRESSING else None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _share_loader(session: Any) -> None:
    """Give ``session`` the process's loader of botocore's data files for its search path."""
    key = os.environ.get("AWS_DATA_PATH")
    with _LOADERS_LOCK:
        loader = _LOADERS.setdefault(key, session.get_component("data_loader"))
    session.register_component("data_loader", loader)
