"""Where bytes come from: files, and objects in object storage (s3://, https://) read by
ranged GETs — URLs, the AWS configuration, object facts, listing, and the ranged reader
(N connections × part size into the caller's memory, retried, paced, checked, recorded).

Its face: object URLs and facts, listing, the endpoint, request records, the storage wait
policy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelmon.core.faces import face

if TYPE_CHECKING:
    from modelmon.core.storage.facts import ObjectFacts, object_storage
    from modelmon.core.storage.listing import list_objects
    from modelmon.core.storage.objects import object_endpoint
    from modelmon.core.storage.policy import storage_timeout
    from modelmon.core.storage.records import PacePoint
    from modelmon.core.storage.urls import ObjectURL, is_object_url, parse_object_url
    from modelmon.core.storage.waits import notice_waits as notice_storage_waits

_EXPORTS = (
    ("modelmon.core.storage.urls", "is_object_url parse_object_url ObjectURL"),
    ("modelmon.core.storage.facts", "ObjectFacts object_storage"),
    ("modelmon.core.storage.listing", "list_objects"),
    ("modelmon.core.storage.objects", "object_endpoint"),
    ("modelmon.core.storage.records", "PacePoint"),
    ("modelmon.core.storage.policy", "storage_timeout"),
    ("modelmon.core.storage.waits", "notice_storage_waits=notice_waits"),
)
__all__, __getattr__, __dir__ = face("modelmon.core.storage", _EXPORTS, globals())
