"""Atomic file writes: a temp file beside the target, fsync, rename.

The previous file survives any failure untouched (a read-only folder, a full disk, Ctrl+C
mid-write); a failure is one line naming the file. Writers reach this through the guard,
``modelmon.core.system.outputs`` (``check_output(path, inputs).write(payload)``), which
refuses inputs, special files and folders that cannot take the write.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
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
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), _mode_for(target))
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException as exc:  # a full disk, or Ctrl+C mid-write: the old file stays
        left = ""
        try:
            temp.unlink()
        except OSError as unlink_error:  # an append-only folder keeps what it was given
            left = f" ({temp} is left: {unlink_error.strerror or unlink_error})"
        if isinstance(exc, OSError):
            kept = "previous file kept" if os.path.lexists(target) else "nothing written"
            raise error(f"{target}: write failed, {kept}: {exc.strerror or exc}{left}") from None
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable
        folder_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(folder_fd)
        finally:
            os.close(folder_fd)
    return target
