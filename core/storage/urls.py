"""URLs of models in object storage: ``s3://BUCKET/KEY``, ``s3://BUCKET/PREFIX/``, and
``https://host/path`` (``http://`` too: a server on a LAN or loopback) of a server that
honours byte ranges.

A URL is parsed once, here, into an ``ObjectURL``. What is surely a credential is refused,
and the refusal never repeats it: a user part (``user:password@``; any "@" in an http(s)
URL, which a password holding "/" would otherwise hide behind), a query parameter named as
credentials are (a pre-signed URL's signature or token, ``key``, ``password``...): give
them through the AWS configuration. Any other query is accepted and sent as it is, but its
values may be secret all the same, so the URL's ``text`` has them redacted (``redact_url``,
the one redaction of every URL modelmon writes): the text may go anywhere a path goes
(records, JSON, errors, logs); ``request_text`` goes only to what makes the requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

from modelmon.core.errors import ObjectURLError, printable, redact_url

SCHEMES = ("s3", "https", "http")
_ANY_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
# Query parameters that carry credentials: AWS SigV2/V4 pre-signed URLs, GCS's and Azure's
# signed URLs, and the usual token and key names.
_SECRET_PARAMETER = re.compile(
    r"(?i)signature|credential|security-token|token|secret|password|passwd|^sig$|^key$|"
    r"awsaccesskeyid|access_key|apikey|api_key|^x-goog-|^sv$|^se$|^sp$"
)
_HOST = re.compile(r"[A-Za-z0-9._-]+(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")
_CREDENTIALS_REFUSED = (
    "a URL with credentials in it is refused: give them through the AWS configuration "
    "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, AWS_PROFILE), "
    "never in the URL"
)
_OTHER_SCHEMES = {
    "gs": "read a GCS bucket through its S3 interoperability: s3://BUCKET/KEY with "
    "AWS_ENDPOINT_URL=https://storage.googleapis.com and an HMAC key",
    "gcs": "read a GCS bucket through its S3 interoperability: s3://BUCKET/KEY with "
    "AWS_ENDPOINT_URL=https://storage.googleapis.com and an HMAC key",
    "file": "name the file's path instead",
}


@dataclass(frozen=True, slots=True)
class ObjectURL:
    """Where an object (or a prefix of objects) lives. Its ``text`` is what may be written
    (query values redacted); ``request_text`` round-trips through ``parse_object_url``."""

    scheme: str  # "s3" | "https" | "http"
    host: str  # the bucket for s3://; host[:port] for http(s)://
    key: str  # the key or prefix (s3), the path without its leading "/" (http); "" = the root
    query: str = ""  # http(s) only, sent as given: its values may be secret, never written

    @property
    def text(self) -> str:
        """The URL as modelmon writes it: its query's values redacted."""
        return redact_url(self.request_text)

    @property
    def request_text(self) -> str:
        """The URL as it is requested, its query whole: for what makes the requests (a
        worker's store), never to be written."""
        query = f"?{self.query}" if self.query else ""
        return f"{self.scheme}://{self.host}/{self.key}{query}"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"ObjectURL({self.text!r})"

    @property
    def is_prefix(self) -> bool:
        """An s3:// URL of a folder (``s3://b/models/``, ``s3://b``): its objects are listed."""
        return self.scheme == "s3" and (not self.key or self.key.endswith("/"))

    @property
    def name(self) -> str:
        """The last part of the key: ``model.safetensors``; "" for a prefix."""
        return self.key.rpartition("/")[2]

    def sibling(self, name: str) -> ObjectURL:
        """The object ``name`` beside this one (a shard beside its index)."""
        folder = self.key.rpartition("/")[0]
        key = f"{folder}/{name}" if folder else name
        return ObjectURL(self.scheme, self.host, key)

    def child(self, name: str) -> ObjectURL:
        """The object ``name`` under this prefix."""
        return ObjectURL(self.scheme, self.host, self.key + name)

    def as_prefix(self) -> ObjectURL:
        """This URL read as a folder: ``s3://b/models`` → ``s3://b/models/``."""
        return self if self.is_prefix else ObjectURL(self.scheme, self.host, self.key + "/")

    @property
    def http_path(self) -> str:
        """The request target of an http(s) URL: its path (percent-encoded) and query."""
        path = "/" + quote(self.key, safe="/%:@!$&'()*+,;=-._~")
        return f"{path}?{self.query}" if self.query else path


def is_object_url(text: str | object) -> bool:
    """Whether ``text`` names object storage (``s3://``, ``https://``, ``http://``): what
    modelmon opens by ranged GETs rather than as a path."""
    if not isinstance(text, str):
        return False
    match = _ANY_URL.match(text)
    return match is not None and match.group(1).lower() in SCHEMES


def is_url(text: str | object) -> bool:
    """Whether ``text`` is written as a URL of any scheme (``gs://...``): never a path."""
    return isinstance(text, str) and _ANY_URL.match(text) is not None


def parse_object_url(text: str) -> ObjectURL:
    """``text`` as an ObjectURL, or an ObjectURLError in one line that repeats no credential."""
    match = _ANY_URL.match(text)
    if match is None:
        shown = printable(redact_url(text)[:80])
        raise ObjectURLError(shown, "not a URL (write s3://BUCKET/KEY)")
    scheme = match.group(1).lower()
    rest = text[match.end() :]
    if scheme not in SCHEMES:
        hint = _OTHER_SCHEMES.get(scheme, "modelmon reads s3://, https:// and http:// URLs")
        shown = printable(redact_url(text)[:80])  # the URL typed, to see the typo in
        raise ObjectURLError(shown, f"not a scheme modelmon reads; {hint}")
    if scheme == "s3":
        return _parse_s3(rest)
    return _parse_http(scheme, rest)


def _parse_s3(rest: str) -> ObjectURL:
    # An S3 key may hold any character ("?", "#", "@" too): only the bucket is parsed.
    bucket, _, key = rest.partition("/")
    if "@" in bucket or ":" in bucket:
        raise ObjectURLError("s3://", _CREDENTIALS_REFUSED)
    if not bucket:
        raise ObjectURLError(f"s3://{printable(rest[:80])}", "no bucket: write s3://BUCKET/KEY")
    if not bucket.isprintable() or " " in bucket:
        raise ObjectURLError(
            f"s3://{printable(bucket[:80])}", "not a bucket name (letters, digits, . - _)"
        )
    return ObjectURL("s3", bucket, key)


def _parse_http(scheme: str, rest: str) -> ObjectURL:
    if "@" in rest:
        # A user part, or a password holding "/", "?" or "#" that would cut it short: the
        # text is not repeated. An "@" of a path or a query is written %40.
        raise ObjectURLError(
            f"{scheme}://", f"{_CREDENTIALS_REFUSED} (an @ of the path or query is written %40)"
        )
    end = min((at for at in (rest.find(c) for c in "/?#") if at >= 0), default=len(rest))
    host, tail = rest[:end], rest[end:]
    if not _HOST.fullmatch(host):
        # Not host[:port]: whatever it holds, it is not repeated.
        raise ObjectURLError(
            f"{scheme}://", "no host[:port] after the scheme (credentials in the URL?)"
        )
    tail = tail.partition("#")[0]  # a fragment is never sent to the server
    path, _, query = tail.partition("?")
    if query and any(_SECRET_PARAMETER.search(name) for name, _ in _query_names(query)):
        raise ObjectURLError(f"{scheme}://{host}{printable(path[:200])}", _CREDENTIALS_REFUSED)
    key = path.lstrip("/")
    shown = f"{scheme}://{host}/{printable(key[:200])}"
    if not key or key.endswith("/"):
        raise ObjectURLError(
            shown,
            f"an {scheme}:// URL names one file (there is no listing): name the .safetensors, "
            "the .safetensors.index.json or the .gguf",
        )
    return ObjectURL(scheme, host, key, query)


def _query_names(query: str) -> list[tuple[str, str]]:
    return parse_qsl(query, keep_blank_values=True)
