"""Atomic file writes: a temp file beside the target, fsync, rename.

The previous file survives any failure untouched (a read-only folder, a full disk, Ctrl+C
mid-write); a failure is one line naming the file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from modelmon.core.errors import ModelmonError


def _process_umask() -> int:
    """The umask, read without changing it (os.umask can only be read by setting it, which
    would race with other threads creating files)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _mode_for(target: Path) -> int:
    """What a plain ``open(target, "w")`` would give: the old file's mode, else 0666 & ~umask
    (mkstemp makes 0600 files, which would hide an export from the user's other tools)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_process_umask()


def write_atomic(
    path: str | os.PathLike[str], payload: bytes, error: type[ModelmonError] = ModelmonError
) -> Path:
    """Write ``payload`` to ``path`` atomically; an OSError becomes ``error`` (one line)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    try:
        descriptor, temp_name = tempfile.mkstemp(
            dir=folder, prefix=f".{target.name}.", suffix=".tmp"
        )
    except OSError as exc:
        raise error(f"{target}: cannot write here: {exc.strerror or exc}") from None
    temp = Path(temp_name)
    try:
        os.fchmod(descriptor, _mode_for(target))
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:  # a full disk, or Ctrl+C mid-write: the old file stays
        with contextlib.suppress(OSError):
            temp.unlink()
        if isinstance(exc, OSError):
            raise error(
                f"{target}: write failed, previous file kept: {exc.strerror or exc}"
            ) from None
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
    return target


def check_output(
    path: str | os.PathLike[str],
    inputs: Iterable[str | os.PathLike[str]],
    error: type[ModelmonError] = ModelmonError,
) -> Path:
    """Refuse, before any work, an output ``write_atomic`` should not write: an empty name, a
    directory or special file, one of ``inputs`` (the same file by any name: a symlink, a hard
    link), or a folder where no file can be created (probed with a temp file, which is right
    where permission bits are not: root, read-only mounts)."""
    text = os.fspath(path)
    if not text.strip():
        raise error("the output path is empty; name a file")
    target = Path(text)
    try:
        status: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        status = None
    except OSError as exc:  # a path through a file, a symlink loop, a name too long
        raise error(f"{target}: cannot write there: {exc.strerror or exc}") from None
    if status is not None:
        if stat.S_ISDIR(status.st_mode):
            raise error(f"{target}: is a directory; name a file to write")
        if not stat.S_ISREG(status.st_mode):
            raise error(f"{target}: not a regular file (a FIFO, socket or device?)")
        for source in inputs:
            with contextlib.suppress(OSError):
                if os.path.samestat(status, os.stat(source)):
                    raise error(f"{target}: is the input {source}; name another output file")
    folder = target.parent if str(target.parent) else Path(".")
    try:
        descriptor, probe = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise error(f"{target}: cannot write in {folder}: {exc.strerror or exc}") from None
    os.close(descriptor)
    os.unlink(probe)
    return target
