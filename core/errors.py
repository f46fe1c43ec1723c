"""Typed errors of the engine. Each prints as one clear line; none needs a traceback.

Here too is what every text modelmon writes passes: ``printable`` (one line, whatever it
holds) and ``redact_url`` / ``redact_urls``, the one redaction of a URL or endpoint (errors,
JSON, config files, the app, logs), so that no credential a URL carries is ever written.
"""

from __future__ import annotations

import re
import sys
import unicodedata
import warnings
from urllib.parse import unquote_plus

# Characters that end a line (for str.splitlines or a terminal), move the cursor or change
# how the rest of a line shows: control characters, line and paragraph separators, format
# characters (bidirectional overrides), and the lone surrogates that stand for undecodable
# bytes in a file name.
_UNSHOWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """``text`` with every character that could break or disguise a line escaped as Python
    writes it (``\\n``, ``\\x1b``, ``\\u2028``): a path holding a newline stays one line."""
    if text.isprintable():  # the common case: nothing to escape, one C-level pass
        return text
    return "".join(
        ascii(char)[1:-1] if unicodedata.category(char) in _UNSHOWN_CATEGORIES else char
        for char in text
    )


REDACTED = "REDACTED"
# Query parameters whose values are written as they are: they choose what is fetched (a
# download flag, a revision, a version) and open nothing. Every other value may be a
# credential (a token, a signature, a key by any name) and is written as REDACTED.
_HARMLESS_PARAMETERS = frozenset(
    {"alt", "dl", "download", "format", "raw", "ref", "revision", "version", "versionid"}
)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# A URL in running text: its scheme, then anything up to a space or a quote.
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'`<>]*")
_AFTER_URL = ".,;:!)]}"  # punctuation that ends a sentence, not the URL


def redact_url(text: str) -> str:
    """``text``, a URL (or an endpoint written without its scheme), as modelmon may write it:
    the user part (everything up to the last "@", which a password holding "/", "?" or "#"
    cannot cut short), every query value but a harmless one's, and the fragment replaced by
    REDACTED. An ``s3://`` URL's key is kept whole ("?", "#" and "@" are characters of a key
    there). Applying it again changes nothing."""
    scheme, separator, rest = text.partition("://")
    if not separator or not _SCHEME.fullmatch(scheme):
        scheme, separator, rest = "", "", text
    head = scheme + separator
    if scheme.lower() == "s3":
        return head + _redact_s3(rest)
    if "@" in rest:
        rest = f"{REDACTED}@{rest.rpartition('@')[2]}"
    rest, hashmark, fragment = rest.partition("#")
    rest, mark, query = rest.partition("?")
    query_text = f"?{redact_query(query)}" if mark else ""
    fragment_text = f"#{REDACTED if fragment else ''}" if hashmark else ""
    return head + rest + query_text + fragment_text


def _redact_s3(rest: str) -> str:
    bucket, slash, key = rest.partition("/")
    if "@" in bucket:
        return f"{REDACTED}@{bucket.rpartition('@')[2]}{slash}{key}"
    if ":" in bucket:  # no bucket holds ":": "KEY:SE/CRET@bucket", a secret split by "/"
        return f"{REDACTED}@{rest.rpartition('@')[2]}" if "@" in rest else REDACTED
    return rest


def redact_query(query: str) -> str:
    """A URL's query (without its "?") with every value but a harmless one's REDACTED; an
    item without "=" is all value."""
    items = []
    for item in query.split("&"):
        name, equals, value = item.partition("=")
        if not equals:
            items.append(REDACTED if item else item)
        elif value and unquote_plus(name).lower() not in _HARMLESS_PARAMETERS:
            items.append(f"{name}={REDACTED}")
        else:
            items.append(item)
    return "&".join(items)


def redact_urls(text: str) -> str:
    """``text`` with every URL in it (``scheme://`` up to a space or a quote) redacted as
    ``redact_url`` does: what a line, a JSON string or a log record holds."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(_redact_found, text)


def _redact_found(match: re.Match[str]) -> str:
    found = match.group(0)
    url = found.rstrip(_AFTER_URL)
    return redact_url(url) + found[len(url) :]


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (control characters escaped, URLs redacted), or
    its type's name when it has none."""
    lines = str(exc).strip().splitlines()
    return printable(redact_urls(lines[0])) if lines else type(exc).__name__


class ModelmonError(Exception):
    """Base of every error the engine raises on purpose. Its message is one line whatever the
    paths or names in it hold: ``str()`` escapes what would break the line and redacts every
    URL in it (a URL given by the user and repeated is written as any other)."""

    def __str__(self) -> str:
        return printable(redact_urls(super().__str__()))


class ModelFormatError(ModelmonError):
    """A model file or index that cannot be trusted: names the file, problem and offset."""

    def __init__(self, file: str, problem: str, offset: int | None = None) -> None:
        self.file = str(file)
        self.problem = problem
        self.offset = offset
        where = f" (at byte {offset})" if offset is not None else ""
        super().__init__(f"{self.file}: {problem}{where}")


class LoadError(ModelmonError):
    """A load that could not be run or failed part-way (worker failure, I/O error, no RAM)."""


class DoesNotFitError(LoadError):
    """The model's weights outgrow the memory allowed: no way of loading keeps them there.
    Says what a load needs and what would fit; ``needs_bytes`` and ``allowed_bytes``."""

    def __init__(self, message: str, needs_bytes: int, allowed_bytes: int) -> None:
        self.needs_bytes, self.allowed_bytes = needs_bytes, allowed_bytes
        super().__init__(message)


class LoadCancelled(ModelmonError):
    """A load stopped on request."""


class OptionsError(ModelmonError, ValueError):
    """Strategy options that make no sense (negative workers, unknown hint...)."""


class ConfigError(ModelmonError):
    """A config file that is not valid: names the key at fault."""


class ModelmonWarning(UserWarning):
    """Base of every warning the engine gives on purpose (something to know, not to stop for)."""


class ConfigMismatchWarning(ModelmonWarning):
    """A config file applied to a model or storage other than the one it was measured on."""


class ReadaheadSkippedWarning(ConfigMismatchWarning):
    """A config's readahead that this process may not set: the load runs without it."""


BUDGET_NOT_KEPT = "the budget cannot be kept"  # how a BudgetWarning's words start


class BudgetWarning(ModelmonWarning):
    """A search's budget that cannot be kept, said before the search starts (with why and
    about how far past it the search will end): a budget is a promise."""


def warn(message: str, category: type[ModelmonWarning]) -> None:
    """Warn on behalf of the engine: the warning names the first caller outside
    ``modelmon.core`` (the user's line, the CLI's), however deep in the engine it arose (what
    Python 3.12's ``skip_file_prefixes`` does)."""
    frame = sys._getframe(1)
    level = 2  # 1 would name this function, 2 its caller
    while frame.f_back is not None and _in_engine(frame.f_globals.get("__name__", "")):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def _in_engine(module: str) -> bool:
    return module == "modelmon.core" or module.startswith("modelmon.core.")


class ModelReferenceError(ModelFormatError):
    """A model reference (``hf:ORG/NAME``, ``ollama:NAME``) that names nothing usable.

    The message says what was looked for and where: "hf:org/name: no snapshot in
    /home/u/.cache/huggingface/hub/models--org--name (looked for refs/main)". It is a
    ModelFormatError, so every caller that reports a bad model reports it the same way.
    """

    def __init__(self, reference: str, problem: str) -> None:
        super().__init__(reference, problem)
        self.reference = reference


class ReferenceSyntaxError(ModelmonError, ValueError):
    """A model reference that is not well formed (``hf:name`` without an org...): a usage error."""

    def __init__(self, reference: str, expected: str) -> None:
        self.reference = reference
        super().__init__(f"{reference}: not a model reference; write {expected}")


class EmptyModelError(ModelFormatError):
    """A model with no tensor bytes (a vocab-only GGUF): it opens and inspects, but a load,
    a benchmark or a recommendation of it would measure nothing (and divide by zero)."""

    def __init__(self, file: str) -> None:
        super().__init__(file, "holds no tensor data (vocab-only?): there is nothing to load")


class ReadaheadError(OptionsError):
    """A ``readahead`` option that cannot be applied here (no knob, no permission, device busy)."""


class WatchError(ModelmonError):
    """A watch that could not begin: the command cannot be started, or the process to attach
    to is not there (or not ours to look at)."""


class ObjectURLError(ModelmonError, ValueError):
    """A URL modelmon does not read a model from (credentials in it, a scheme it does not
    speak, no bucket): a usage error. ``shown`` is the URL as it may be written, which is
    never the part that held credentials."""

    def __init__(self, shown: str, problem: str) -> None:
        self.shown, self.problem = shown, problem
        super().__init__(f"{shown}: {problem}")


class StorageError(ModelmonError):
    """Object storage that refused or failed a read: names the object or endpoint (never a
    credential) and says why in one line. ``status`` and ``code`` are the server's answer
    (403, "SignatureDoesNotMatch"), when there was one."""

    def __init__(
        self, url: str, problem: str, status: int | None = None, code: str | None = None
    ) -> None:
        self.url, self.problem, self.status, self.code = url, problem, status, code
        super().__init__(f"{url}: {problem}")

    def __reduce__(self) -> tuple[type[StorageError], tuple[str, str, int | None, str | None]]:
        # Made again from its fields (its args hold the line, not them): a worker's storage
        # failure reaches its parent as the same typed error.
        return type(self), (self.url, self.problem, self.status, self.code)


class StorageConfigError(StorageError):
    """The AWS configuration names what modelmon cannot use: an endpoint without a scheme, of
    a port out of range, holding credentials, a query or a fragment; a region that is no
    region's name. ``url`` names the variable or profile that set it; nothing that may hold a
    secret is repeated."""


class StorageAccessError(StorageError):
    """The endpoint refused the credentials or the access (401, 403)."""


class ObjectNotFoundError(StorageError):
    """No such bucket, key or file at the endpoint (404)."""


class EndpointUnreachableError(StorageError):
    """The endpoint could not be reached (refused, timed out, name unknown) after retries."""


class StorageThrottledError(StorageError):
    """The endpoint kept throttling (503 SlowDown, 429) past the retries."""


class StorageServerError(StorageError):
    """The endpoint kept failing (500, 502, 504: its own failure, not a throttle) past the
    retries."""


class ObjectChangedError(StorageError):
    """The object was replaced while it was read: its ETag (or size) is not the one it had
    when it was opened (``If-Match`` failed with 412, or the answer carried another ETag)."""


class RangesIgnoredError(StorageError):
    """The server answered a ranged GET with the whole object (200, no Content-Range)."""
