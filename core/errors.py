"""Typed errors of the engine. Each prints as one clear line; none needs a traceback."""

from __future__ import annotations

import sys
import unicodedata
import warnings

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


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (control characters escaped), or its type's name
    when it has none."""
    lines = str(exc).strip().splitlines()
    return printable(lines[0]) if lines else type(exc).__name__


class ModelmonError(Exception):
    """Base of every error the engine raises on purpose. Its message is one line whatever the
    paths or names in it hold: ``str()`` escapes what would break the line."""

    def __str__(self) -> str:
        return printable(super().__str__())


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


class StorageAccessError(StorageError):
    """The endpoint refused the credentials or the access (401, 403)."""


class ObjectNotFoundError(StorageError):
    """No such bucket, key or file at the endpoint (404)."""


class EndpointUnreachableError(StorageError):
    """The endpoint could not be reached (refused, timed out, name unknown) after retries."""


class StorageThrottledError(StorageError):
    """The endpoint kept throttling (503 SlowDown, 429) or failing (500) past the retries."""


class ObjectChangedError(StorageError):
    """The object was replaced while it was read: its ETag (or size) is not the one it had
    when it was opened (``If-Match`` failed with 412, or the answer carried another ETag)."""


class RangesIgnoredError(StorageError):
    """The server answered a ranged GET with the whole object (200, no Content-Range)."""
