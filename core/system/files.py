"""Opening what a user or another tool named: regular files only, reads bounded.

A path handed to modelmon (a model, a shard index, a config, a bookkeeping file) may be a
FIFO, a device, a socket or a symlink to one: a plain ``open`` on a FIFO waits for a writer
forever, and ``/dev/zero`` reads until memory runs out. Every file modelmon reads is opened
here: ``O_NONBLOCK`` makes opening a FIFO return at once, the ``fstat`` on the opened
descriptor (not the path, which may change in between) refuses anything but a regular file,
and whole-file reads stop one byte past their bound. ``parse_json``/``parse_toml`` turn what
the parsers raise on hostile text (deep nesting, 5,000-digit numbers, bytes that are not
UTF-8) into the same UnusableFile.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import tomllib
from typing import Any

NOT_REGULAR = "not a regular file (a FIFO, socket or device?)"


class UnusableFile(Exception):
    """A file that cannot be read safely; ``reason`` is a short phrase (no file name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _reason(exc: OSError) -> str:
    """ "no such file or directory", "permission denied", "too many levels of symbolic links"."""
    return (exc.strerror or str(exc)).lower()


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only, blocking descriptor on the regular file at ``path``, else UnusableFile
    (missing, a FIFO or device, a symlink loop, a name too long, permission denied...)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UnusableFile(_reason(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusableFile(NOT_REGULAR)
        # Reads of a regular file never block anyway; clear the flag so nothing downstream
        # (O_DIRECT reopen checks, mmap) sees an unusual descriptor.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except UnusableFile:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        raise UnusableFile(_reason(exc)) from None
    return fd


def read_small_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, else UnusableFile."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UnusableFile(f"{size} bytes, over the {limit} byte limit")
        chunks: list[bytes] = []
        total = 0
        while total <= limit:  # the file may grow after the fstat: read one byte past
            chunk = os.read(fd, limit + 1 - total)
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise UnusableFile(f"over the {limit} byte limit")
        return b"".join(chunks)
    except OSError as exc:
        raise UnusableFile(_reason(exc)) from None
    finally:
        os.close(fd)


def parse_json(data: bytes) -> object:
    """UTF-8 JSON → Python, every failure an UnusableFile with a short reason: invalid text,
    nesting deeper than the parser's recursion allows, a number too long to convert."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UnusableFile(f"not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UnusableFile(f"not valid JSON: {exc.msg} (at byte {exc.pos})") from None
    except RecursionError:
        raise UnusableFile("not usable JSON: nested too deep") from None
    except ValueError as exc:  # an integer of over 4300 digits
        raise UnusableFile(f"not usable JSON: {_first_line(exc)}") from None


def parse_toml(data: bytes) -> dict[str, Any]:
    """UTF-8 TOML → a dict, every failure an UnusableFile with a short reason (as parse_json)."""
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UnusableFile(f"not UTF-8 (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UnusableFile(f"not valid TOML: {_first_line(exc)}") from None
    except RecursionError:
        raise UnusableFile("not usable TOML: nested too deep") from None
    except ValueError as exc:  # an integer of over 4300 digits
        raise UnusableFile(f"not usable TOML: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
