"""What an object is and where it lives: size, ETag, last-modified, the endpoint, its region,
the storage (``s3``, ``https``, ``http``) and the endpoint's host kind — learnt from the first
ranged GET's answer, so opening an object costs one request."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from modelmon.core.storage.urls import ObjectURL, parse_object_url

# The endpoint's host kind: who runs the storage, as far as its host name says.
HOST_KINDS = ("aws", "gcs-interop", "r2", "minio-or-local", "other")


@dataclass(frozen=True, slots=True)
class ObjectFacts:
    """One object as its server described it when it was opened. Nothing written of it
    holds a secret: ``url`` is the URL as modelmon writes it (query values redacted), and
    ``request_url``, which requests need whole, is left out of ``as_dict`` and its repr."""

    url: str  # s3://bucket/key, https://host/path
    size: int
    etag: str | None  # as the server sent it, quotes included; reads are made If-Match it
    last_modified: str | None  # ISO 8601, UTC
    storage: str  # "s3" | "https" | "http"
    endpoint: str  # the server requests go to: "http://127.0.0.1:9000"
    region: str | None  # s3's signing region
    host_kind: str  # one of HOST_KINDS
    ranges: str  # how it answered a ranged GET: "206" or "200 with Content-Range"
    credentials: str  # where they came from ("env", "shared-credentials-file", "none: ...")
    request_url: str = field(default="", repr=False)  # the URL as requested, query whole

    def as_dict(self) -> dict[str, Any]:
        """The facts as they are written (JSON, config files): no ``request_url``."""
        data = asdict(self)
        del data["request_url"]
        return data

    def handout(self) -> dict[str, Any]:
        """Every field, ``request_url`` too: for a worker that requests the object (through
        memory it shares with modelmon, never written); ``ObjectFacts(**handout)``."""
        return asdict(self)

    def object_url(self) -> ObjectURL:
        """Where requests for the object go: its URL with the query it was given."""
        return parse_object_url(self.request_url or self.url)

    def describe(self) -> str:
        """One line: "s3 at http://127.0.0.1:9000 (minio-or-local), region us-east-1,
        credentials from env"."""
        where = f"{self.storage} at {self.endpoint} ({self.host_kind})"
        region = f", region {self.region}" if self.region else ""
        return f"{where}{region}, credentials: {self.credentials}"


def host_kind(host: str) -> str:
    """Who an endpoint's host is, by its name: aws, gcs-interop (GCS's S3 API), r2
    (Cloudflare), minio-or-local (loopback, a private address, a name without a domain),
    or other."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "amazonaws.com" or name.endswith((".amazonaws.com", ".amazonaws.com.cn")):
        return "aws"
    if name == "storage.googleapis.com" or name.endswith(".storage.googleapis.com"):
        return "gcs-interop"
    if name.endswith(".r2.cloudflarestorage.com"):
        return "r2"
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        local = name == "localhost" or name.endswith((".localhost", ".local", ".internal"))
        return "minio-or-local" if local or "." not in name else "other"
    private = address.is_loopback or address.is_private or address.is_link_local
    return "minio-or-local" if private else "other"


@dataclass(frozen=True, slots=True)
class ObjectStorage:
    """Where a model's objects live, once per bucket (or host): what ``inspect`` says of the
    storage, as ``StorageFacts`` says it of a file's folder."""

    path: str  # s3://bucket, https://host
    storage: str
    endpoint: str
    region: str | None
    host_kind: str
    credentials: str
    ranges: str
    description: str  # one human sentence


def object_storage(objects: Iterable[ObjectFacts]) -> tuple[ObjectStorage, ...]:
    """One ``ObjectStorage`` per bucket (or http host) holding ``objects``, in order."""
    seen: dict[tuple[str, str], ObjectStorage] = {}
    for facts in objects:
        scheme, _, rest = facts.url.partition("://")
        path = f"{scheme}://{rest.partition('/')[0]}"
        if (facts.endpoint, path) in seen:
            continue
        ranges = "206" if facts.ranges == "206" else f"{facts.ranges} (not 206)"
        seen[facts.endpoint, path] = ObjectStorage(
            path=path,
            storage=facts.storage,
            endpoint=facts.endpoint,
            region=facts.region,
            host_kind=facts.host_kind,
            credentials=facts.credentials,
            ranges=facts.ranges,
            description=f"{facts.describe()}; ranged GETs answered {ranges}",
        )
    return tuple(seen.values())
