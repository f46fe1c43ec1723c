"""What a command run as a configuration left in its output: the last line it wrote (for a
person: bounded), and the child harness's own report (``loaders/child.py``). Only the end of
the output is read: a command may print megabytes before either."""

from __future__ import annotations

import contextlib
import json
import os
from typing import IO, Any

from modelmon.core.errors import redact_urls

OUTPUT_TAIL = 64 << 10  # the end of a command's output read for its last line or report
LINE_CHARS = 300  # of that last line, at most
# The last line a command prints to be timed by its own clock where the watch cannot.
OWN_REPORT = '{"engine": NAME, "seconds": S, "bytes": B}'


def own_figure(own: dict[str, Any] | None, key: str) -> float | None:
    """A number of the child harness's own report (None: no report, or not a number)."""
    value = own.get(key) if own is not None else None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return float(value)


def _tail_lines(stream: IO[bytes]) -> list[str]:
    """The lines of the end of a command's output (what it printed last)."""
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - OUTPUT_TAIL))
    return stream.read().decode(errors="replace").splitlines()


def last_line(stream: IO[bytes]) -> str:
    """The last line the program wrote, as modelmon may write it (every URL redacted: the
    program may print the URL it was given, query and all)."""
    line = next((line for line in map(str.strip, reversed(_tail_lines(stream))) if line), "")
    line = redact_urls(line)
    # One line a person reads: a program that writes megabytes without a newline is cut.
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def own_report(stream: IO[bytes]) -> dict[str, Any] | None:
    """The child harness's report, its last JSON line (an engine may print megabytes first);
    a command's own in the same form (``OWN_REPORT``) times it where the watch cannot (direct
    reads that began and ended between two looks)."""
    for line in reversed(_tail_lines(stream)):
        with contextlib.suppress(ValueError):
            found = json.loads(line)
            if isinstance(found, dict) and "engine" in found:
                return found
    return None
