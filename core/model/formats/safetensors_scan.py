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

import itertools
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
        # What stands between a dtype and its shape's numbers. They are one group (a tensor's
        # kind, of which a model has few), so a tensor costs three strings, not four.
        self.to_shape = f'"{comma}"shape"{colon}['
        to_dtype = f'"{colon}{{"dtype"{colon}"'
        to_offsets = f']{comma}"data_offsets"{colon}['
        between, after = re.escape(colon), re.escape(comma)
        lead = rf"(?:\A\{{|{after})"  # "{" before the first member, else the comma
        dims = f"(?:{_INTEGER})(?:{after}(?:{_INTEGER}))*"
        kind = f"{_PLAIN_TEXT}{re.escape(self.to_shape)}(?:{dims})?"
        offsets = f"({_INTEGER}){after}({_INTEGER})"
        self.entry = re.compile(
            f'{lead}"({_PLAIN_TEXT}){re.escape(to_dtype)}({kind}){re.escape(to_offsets)}'
            + offsets
            + re.escape("]}")
        )
        member = f"{_STRING}{between}{_STRING}"
        members = f"{member}(?:{after}{member})*"
        self.metadata = re.compile(rf'{lead}"{METADATA}"{between}(null|\{{(?:{members})?\}})')

    def kind(self, text: str) -> tuple[str, tuple[int, ...]]:
        """A tensor's dtype and shape, from their group's text."""
        dtype, _, dims = text.partition(self.to_shape)
        shape = tuple(map(int, dims.split(self.comma))) if dims else ()
        return _KNOWN_DTYPES.get(dtype, dtype), shape


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
    # split gives, for each entry, the text before it, then its four groups; and the text
    # after the last one
    parts = form.entry.split(text)
    if not _tiled(parts[0::5], member, text[end:]):
        return None
    names, kinds, begin_texts, end_texts = (parts[n::5] for n in range(1, 5))
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
    kind_of = {text: form.kind(text) for text in set(kinds)}
    dims = itertools.chain.from_iterable(shape for _, shape in kind_of.values())
    if max(begins) >= U64_LIMIT or max(ends) >= U64_LIMIT or max(dims, default=0) >= U64_LIMIT:
        return None
    dtypes = list(map({text: dtype for text, (dtype, _) in kind_of.items()}.__getitem__, kinds))
    shapes = list(map({text: shape for text, (_, shape) in kind_of.items()}.__getitem__, kinds))
    return TensorColumns(names, dtypes, shapes, begins, ends), metadata


def _tiled(between: list[str], member: str, closing: str) -> bool:
    """Whether the texts before, between and after the entries are nothing but the metadata
    member (``member``, its "{" or comma included; none if "") and the closing brace with its
    padding: then the entries and those make up the whole header."""
    if not member:
        return between[-1] == closing and not any(between[:-1])
    others = list(filter(None, between))
    if between[-1] == member + closing:  # the last member
        return others == [member + closing]
    return between[-1] == closing and others == [member, closing]


def _metadata(text: str) -> dict[str, str] | None:
    """``__metadata__``'s value (null, or an object of strings), read as the reference reads
    it; None where it would refuse it (a lone surrogate escape)."""
    try:
        return checked_metadata(json.loads(text, object_pairs_hook=tuple))
    except (HeaderProblem, ValueError):
        return None
