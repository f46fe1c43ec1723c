"""A safetensors header in the form its writers give it, read by one regular expression.

The safetensors library writes ``{"__metadata__":{"format":"pt"},"NAME":{"dtype":"F16",
"shape":[2,3],"data_offsets":[0,12]},...}`` (``json.dumps`` the same with ``": "`` and
``", "``), no string holding an escape. A header of exactly that form is read here: one
regular expression whose matches must tile the text (their lengths say so), then a few
conversions of whole columns, instead of ``json.loads`` making half a dozen objects per tensor
that are checked afterwards. Every header not of that form, or doubtful in any way, answers
None and is read by ``json.loads`` (``safetensors_members``): this only ever reads a header the
way that path would, faster.
"""

from __future__ import annotations

import json
import re

from modelmon.core.model.formats.safetensors_columns import (
    DTYPES,
    METADATA,
    TensorColumns,
)
from modelmon.core.model.formats.safetensors_json import (
    U64_LIMIT,
    HeaderProblem,
    checked_metadata,
)

JSON_WHITESPACE = " \t\n\r"
# A JSON string's text without escapes: neither quote, backslash nor control character, which
# serde_json and json.loads both refuse unescaped.
_PLAIN_TEXT = r'[^"\\\x00-\x1f]*'
_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'  # with escapes
# A JSON integer of up to 20 digits (u64's, and more: the value is checked after)
_INTEGER = "0|[1-9][0-9]{0,19}"
_KNOWN_DTYPES = {dtype: dtype for dtype in DTYPES}
_PADDING = 64


class _Form:
    """The header form of one pair of separators: ``":"`` and ``","``, or ``": "`` and ``", "``."""

    def __init__(self, colon: str, comma: str) -> None:
        self.comma = comma
        between, after = re.escape(colon), re.escape(comma)
        fixed = (
            '"',
            f'"{colon}{{"dtype"{colon}"',
            f'"{comma}"shape"{colon}[',
            f"]{comma}" + f'"data_offsets"{colon}[',
            comma,
            "]}",
        )
        variable = (
            _PLAIN_TEXT,
            _PLAIN_TEXT,
            f"(?:{_INTEGER})(?:{after}(?:{_INTEGER}))*|",
            _INTEGER,
            _INTEGER,
        )
        body = "".join(
            f"{re.escape(text)}({group})" for text, group in zip(fixed[:-1], variable, strict=True)
        )
        lead = rf"(?:\A\{{|{after})"  # "{" before the first member, else the comma
        self.entry = re.compile(lead + body + re.escape(fixed[-1]))
        member = f"{_STRING}{between}{_STRING}"
        self.metadata = re.compile(
            rf'{lead}"{METADATA}"{between}(null|\{{(?:{member}(?:{after}{member})*)?\}})'
        )


_COMPACT, _SPACED = _Form(":", ","), _Form(": ", ", ")


def scan_header(text: str) -> tuple[TensorColumns, dict[str, str]] | None:
    """The header's tensors in file order (dtypes not yet checked) and its metadata, if the
    header is in the writers' form; else None."""
    # Writers pad the header with spaces (to 8 bytes): a few. A header that begins with
    # whitespace, or ends with more, is no writer's (and is read by json.loads).
    tail = text[-_PADDING:]
    end = len(text) - (len(tail) - len(tail.rstrip(JSON_WHITESPACE))) - 1  # the last "}"
    if text[:2] != '{"' or end < 1 or text[end] != "}":
        return None
    form = _SPACED if text.startswith(": ", text.find('"', 2) + 1) else _COMPACT
    member, metadata = "", {}
    at = text.find(f'"{METADATA}"', 0, end)  # the first: a string holds no quote unescaped
    if at >= 0:
        found = form.metadata.match(text, 0 if at == 1 else at - len(form.comma), end)
        read = None if found is None else _metadata(found.group(1))
        if found is None or read is None:
            return None
        member, metadata = found.group(), read
    # split gives, for each entry, the text before it, then its five groups; and the text
    # after the last one
    parts = form.entry.split(text)
    if not _tiled(parts[0::6], member, text[end:]):
        return None
    names, dtypes, shape_texts, begin_texts, end_texts = (parts[n::6] for n in range(1, 6))
    del parts
    if not names or METADATA in names:
        return None
    ends = list(map(int, end_texts))
    # A header in offset order (the writers'): each tensor begins where the one before ended,
    # so the begins are the ends shifted, the same integers.
    if begin_texts[0] == "0" and begin_texts[1:] == end_texts[:-1]:
        begins = [0, *ends[:-1]]
    else:
        begins = list(map(int, begin_texts))
    if max(begins) >= U64_LIMIT or max(ends) >= U64_LIMIT:
        return None
    shape_of = {shape: _dims(shape, form.comma) for shape in set(shape_texts)}
    if max(map(max, filter(None, shape_of.values())), default=0) >= U64_LIMIT:
        return None
    shapes = list(map(shape_of.__getitem__, shape_texts))
    dtypes = list(map(_KNOWN_DTYPES.get, dtypes, dtypes))  # one string per dtype, not per tensor
    return TensorColumns(names, dtypes, shapes, begins, ends), metadata


def _tiled(between: list[str], member: str, closing: str) -> bool:
    """Whether the texts before, between and after the entries are nothing but the metadata
    member (``member``, its "{" or comma included; none if "") and the closing brace with its
    padding: then the entries and those make up the whole header."""
    if not member:
        return between[-1] == closing and not any(between[:-1])
    if member[0] == "{" and between[0] != member:  # the first member, where it must be
        return False
    others = list(filter(None, between))
    if between[-1] == member + closing:  # the last member
        return others == [member + closing]
    return between[-1] == closing and others == [member, closing]


def _dims(text: str, comma: str) -> tuple[int, ...]:
    return tuple(map(int, text.split(comma))) if text else ()


def _metadata(text: str) -> dict[str, str] | None:
    """``__metadata__``'s value (null, or an object of strings), read as the reference reads
    it; None where it would refuse it (a lone surrogate escape)."""
    try:
        return checked_metadata(json.loads(text, object_pairs_hook=tuple))
    except (HeaderProblem, ValueError):
        return None
