"""Opening what a user or another tool named: regular files only, reads bounded.

A path handed to modelmon (a model, a shard index, a config, a bookkeeping file) may be a
FIFO, a device, a socket or a symlink to one: a plain ``open`` on a FIFO waits for a writer
forever, and ``/dev/zero`` reads until memory runs out. Every file modelmon reads is opened
here: ``O_NONBLOCK`` makes opening a FIFO return at once, the ``fstat`` on the opened
descriptor (not the path, which may change in between) refuses anything but a regular file,
and whole-file reads stop one byte past their bound. ``parse_json``/``parse_toml`` turn what
the parsers raise on hostile text (deep nesting, 5,000-digit numbers, bytes that are not
UTF-8) into the same UnusableFile. A refusal says what the file is: "a FIFO", "a symlink
loop", "a /proc or /sys file" (whose size is not what it holds).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import re
import stat
import struct
import tomllib
from typing import Any

from modelmon.core.system.libc import LIBC

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class UnusableFile(Exception):
    """A file that cannot be read safely; ``reason`` is a short phrase (no file name)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def not_regular(mode: int) -> str:
    """Why a file of ``mode`` is not one to read: "not a regular file (a FIFO)"."""
    kind = next((kind for is_kind, kind in _KINDS if is_kind(mode)), "of an unknown kind")
    return f"not a regular file ({kind})"


def _reason(exc: OSError) -> str:
    """ "no such file or directory", "permission denied", "a symlink loop (too many levels of
    symbolic links)"."""
    reason = (exc.strerror or str(exc)).lower()
    return f"a symlink loop ({reason})" if exc.errno == errno.ELOOP else reason


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as a regular file, without opening it; None if it can.

    "a broken symlink (to missing.bin)", "a symlink loop (...)", "not a regular file (a FIFO)".
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return f"a broken symlink (to {os.readlink(path)})"
        return _reason(exc)
    return None if stat.S_ISREG(mode) else not_regular(mode)


# The links through which a process names its own descriptors: they mean another file in
# every other process (a worker, a peer loader), so they are read here, in the process that
# was given them, and replaced by the path they name.
_DESCRIPTOR_LINK = re.compile(
    r"/(?:proc/(?:self|thread-self|\d+)(?:/task/\d+)?|dev)/fd/\d+|/dev/std(?:in|out|err)"
)
_NOT_A_PATH = (("pipe:", "a pipe"), ("socket:", "a socket"), ("anon_inode:", "an anonymous inode"))


def resolve_descriptor_path(path: str | os.PathLike[str]) -> str:
    """``path``, or for ``/proc/self/fd/N``, ``/dev/fd/N``, ``/dev/stdin``... the path of the
    file that descriptor has open; UnusableFile when it has none another process could open
    (a pipe, a socket, a deleted file)."""
    name = os.fspath(path)
    for _ in range(4):  # /dev/stdin -> /proc/self/fd/0 -> the file
        if not _DESCRIPTOR_LINK.fullmatch(os.path.normpath(name)):
            return name
        try:
            target = os.readlink(name)
        except OSError as exc:
            raise UnusableFile(_reason(exc)) from None
        for prefix, kind in _NOT_A_PATH:
            if target.startswith(prefix):
                raise UnusableFile(f"a descriptor of {kind} ({target}), not of a file")
        if not os.path.isabs(target):
            target = os.path.join(os.path.dirname(name), target)
        if not _DESCRIPTOR_LINK.fullmatch(os.path.normpath(target)) and not _same_file(
            name, target
        ):
            raise UnusableFile(f"a descriptor of {target}, a file deleted or replaced since")
        name = target
    return name


def _same_file(first: str, second: str) -> bool:
    try:
        return os.path.samestat(os.stat(first), os.stat(second))
    except OSError:
        return False


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only, blocking descriptor on the regular file at ``path``, else UnusableFile
    (missing, a FIFO or device, a symlink loop, a name too long, permission denied...)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UnusableFile(_reason(exc)) from None
    except ValueError:  # a NUL byte, which no file's name holds
        raise UnusableFile("a path cannot hold a NUL byte") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnusableFile(not_regular(mode))
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


# Kernel filesystems whose files report a size that is not what they hold (/sys says 4096
# bytes, /proc 0): statfs's f_type numbers, from linux/magic.h.
_KERNEL_FILESYSTEMS = {
    0x9FA0: "/proc",
    0x62656572: "/sys",
    0x64626720: "debugfs",
    0x74726163: "tracefs",
    0x27E0EB: "cgroup",
    0x63677270: "cgroup2",
    0x73636673: "securityfs",
    0x62656570: "configfs",
    0xCAFE4A11: "bpf",
    0x6165676C: "pstore",
    0xDE5E81E4: "efivarfs",
}


def size_problem(fd: int) -> str | None:
    """Why the size ``fstat`` gives for regular file ``fd`` is not what it holds, or None.

    A parser trusts that size to bound its reads: a file of /proc or /sys (said by its
    filesystem's type, no data read) or one that holds bytes past its size is refused.
    """
    statfs = ctypes.create_string_buffer(256)  # struct statfs; f_type, a long, comes first
    if LIBC.fstatfs(fd, statfs) == 0:
        kernel = _KERNEL_FILESYSTEMS.get(struct.unpack_from("l", statfs)[0])
        if kernel is not None:
            return f"a {kernel} file, whose size is not what it holds: not a model"
    size = os.fstat(fd).st_size
    if os.pread(fd, 1, size):
        return f"it holds more than its size says ({size} bytes): still being written?"
    return None


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
