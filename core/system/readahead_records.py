"""Restore records: what a run that changed a device's readahead must put back if it dies.

A record names a file to write and a value to write into it, so it is only trusted from a
place no one else can write (``readahead``'s docstring says where and why). Written before the
value changes (atomically: a temporary file renamed over the name), removed once the value is
back; read only after checking the directory, the file and what it says.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.system.outputs import state_home

ROOT_DIR = "/run/modelmon/readahead"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
MAX_BYTES = 4096
MAX_KB = 1 << 30  # well past any readahead a kernel takes, and far from negative
SYSFS_FILE = re.compile(r"/sys/(block/[\w.:-]+/queue|class/bdi/[\w.:-]+)/read_ahead_kb")
NOT_OURS = stat.S_IWGRP | stat.S_IWOTH


@dataclass(frozen=True, slots=True)
class Record:
    sysfs: str  # the read_ahead_kb file
    previous: int  # what to put back
    set_kb: int  # what the run set: put back only if the device still has it


def directory() -> Path:
    """This user's own: ``$MODELMON_RECORD_DIR``, else /run/modelmon/readahead for root, else
    ``$XDG_STATE_HOME/modelmon/readahead``."""
    given = os.environ.get("MODELMON_RECORD_DIR")
    if given:
        return Path(given)
    if os.geteuid() == 0:
        return Path(ROOT_DIR)
    return state_home() / "readahead"


def _boot() -> str:
    try:
        with open(BOOT_ID) as boot:
            return boot.read().strip()
    except OSError:
        return ""


def _ours(info: os.stat_result) -> bool:
    """Owned by this user (or root, above a user), writable by no one else."""
    return info.st_uid in (os.geteuid(), 0) and not info.st_mode & NOT_OURS


def unusable() -> str | None:
    """Why records cannot be kept here (one line), after making the directory if need be."""
    folder = directory()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(folder, follow_symlinks=False)
    except OSError as exc:
        return f"cannot keep a readahead restore record in {folder}: {exc.strerror or exc}"
    if not stat.S_ISDIR(info.st_mode) or not _ours(info):
        return (
            f"cannot keep a readahead restore record in {folder}: not a directory only this "
            "user can write"
        )
    return None


def _path(name: str) -> Path:
    return directory() / f"{name}.json"


def write(name: str, record: Record) -> None:
    """Keep ``record`` for device ``name`` (durably: it outlives a kill -9)."""
    data = {
        "sysfs": record.sysfs,
        "previous": record.previous,
        "set": record.set_kb,
        "pid": os.getpid(),
        "boot": _boot(),
    }
    final = _path(name)
    temporary = final.with_name(f".{final.name}.{os.getpid()}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileNotFoundError):  # left by a killed process of the same pid
        os.unlink(temporary)
    fd = os.open(temporary, flags, 0o600)
    try:
        os.write(fd, json.dumps(data).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, final)
    with contextlib.suppress(OSError):  # the rename itself made durable
        folder = os.open(final.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def remove(name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(name))


def names() -> list[str]:
    """The devices this user has records for, when the directory is this user's alone."""
    folder = directory()
    try:
        if not _ours(os.stat(folder, follow_symlinks=False)):
            return []
        return sorted(
            entry[: -len(".json")]
            for entry in os.listdir(folder)
            if entry.endswith(".json") and not entry.startswith(".")
        )
    except OSError:
        return []


def read(name: str) -> Record | None:
    """The record of device ``name``, or None when there is none or it cannot be trusted:
    not a regular file of this user's alone, not a read_ahead_kb file of /sys, not written
    since this boot, or not two whole numbers in range."""
    try:
        fd = os.open(_path(name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _ours(info)):
            return None
        data = json.loads(os.read(fd, MAX_BYTES + 1)[:MAX_BYTES])
        sysfs, previous, set_kb = data["sysfs"], data["previous"], data["set"]
        boot = data.get("boot")
    except (OSError, ValueError, TypeError, KeyError):
        return None
    finally:
        os.close(fd)
    numbers = [previous, set_kb]
    if not all(
        isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_KB for n in numbers
    ):
        return None
    if not isinstance(sysfs, str) or SYSFS_FILE.fullmatch(sysfs) is None or ".." in sysfs:
        return None
    if boot != _boot():
        return None
    return Record(sysfs, previous, set_kb)
