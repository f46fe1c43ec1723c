"""The objects under an ``s3://`` prefix, in its sub-folders too: what a front end lists as
the models in a bucket. (Opening a prefix lists one level, the folder it opens; a bucket of
models keeps each model in a folder of its own.)"""

from __future__ import annotations

from modelmon.core.errors import ObjectURLError, StorageError
from modelmon.core.storage.connection import Listed
from modelmon.core.storage.s3 import S3Store
from modelmon.core.storage.urls import parse_object_url

MAX_OBJECTS = 10_000  # more is a bucket to name a narrower prefix of, not a list to read


def list_objects(prefix: str, limit: int = MAX_OBJECTS) -> tuple[Listed, ...]:
    """Every object under ``prefix`` (``s3://BUCKET/`` or ``s3://BUCKET/PREFIX/``), each
    named by its key past the prefix, in key order; ObjectURLError for a URL that has no
    listing, StorageError for what the storage refused or more than ``limit`` objects."""
    url = parse_object_url(prefix)
    if url.scheme != "s3":
        raise ObjectURLError(url.text, f"an {url.scheme}:// server has no listing: name a file")
    url = url.as_prefix()
    found: list[Listed] = []
    store = S3Store(url)
    try:
        token: dict[str, str] = {}
        while True:
            page = store.call(url, "list_objects_v2", Bucket=url.host, Prefix=url.key, **token)
            for item in page.get("Contents", ()):
                name = item["Key"][len(url.key) :]
                if name and not name.endswith("/"):  # a folder's marker is no object
                    found.append(Listed(name, int(item.get("Size", 0))))
            if len(found) > limit:
                raise StorageError(
                    url.text, f"holds over {limit} objects: name a narrower prefix in it"
                )
            if not page.get("IsTruncated") or not page.get("NextContinuationToken"):
                return tuple(sorted(found, key=lambda listed: listed.name))
            token = {"ContinuationToken": page["NextContinuationToken"]}
    finally:
        store.close()
