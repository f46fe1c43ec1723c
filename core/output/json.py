"""JSON for other programs: strict (no NaN or Infinity, which ``json.loads`` elsewhere rejects)."""

from __future__ import annotations

import json
import math
from typing import Any

from modelmon.core.errors import redact_urls

# Of the JSON objects ``modelmon ... --json`` prints (their "schema_version" key): bump it
# when a key changes meaning or goes away; adding a key keeps it.
SCHEMA_VERSION = 1


def dumps(data: Any) -> str:
    """Indented JSON; a float that is NaN or ±inf (no measurement) becomes null, anything
    JSON has no type for (a path, an enum) becomes its string, and every URL in a string is
    redacted (``redact_urls``). Key order is kept."""
    return json.dumps(_finite(redacted(data)), indent=2, default=_string, allow_nan=False)


def redacted(data: Any) -> Any:
    """A document (dicts, lists, tuples, strings, numbers) with every URL in its strings
    and keys redacted (``redact_urls``): what every document modelmon writes passes."""
    if isinstance(data, str):
        return redact_urls(data)
    if isinstance(data, dict):
        return {redacted(key): redacted(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [redacted(value) for value in data]
    return data


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_finite(value) for value in data]
    return data


def _string(data: Any) -> str:
    return redact_urls(str(data))
