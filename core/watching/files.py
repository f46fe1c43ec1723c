"""Which files are the model: named by ``--model`` or by the watched command's arguments
(``naming`` resolves them), or recognised by name when the program opens or maps them.

A file is known by its identity (device, inode), not its path: the program may reach it
through a symlink (a Hugging Face snapshot links into ``blobs/``), a bind mount or a relative
path, and ``/proc/PID/maps`` names a mapping by device and inode.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from modelmon.core.system.residency import PAGE_SIZE

# Names the loaders people run read weights from. ".bin" is torch's pytorch_model.bin.
MODEL_SUFFIXES = (
    ".safetensors",
    ".gguf",
    ".ggml",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".onnx",
    ".h5",
    ".msgpack",
    ".npz",
    ".tflite",
    ".llamafile",
)
# A file found open with a model's name but smaller than this is not weights (Python's own
# site-packages/*.pth path files are a few bytes).
MIN_FOUND_BYTES = 64 << 10

Identity = tuple[int, int]  # (st_dev, st_ino)


@dataclass(frozen=True, slots=True)
class ModelFile:
    """One model file being watched; ``index`` is its place in the run's file list (the
    read log's ``file`` column), in the order the files became known."""

    index: int
    path: str  # resolved (realpath) at the time it became known
    size: int
    identity: Identity
    named: bool  # named before the program ran (--model or its arguments), not found later
    stamp: tuple[int, int] | None = None  # (size, mtime) when it became known (file_stamp)


# What a weight file of each kind starts with; a file with such a name and none of these is
# not the model (a data file named big.bin). Suffixes not listed are taken by their name.
MAGIC = {
    ".bin": (
        b"PK\x03\x04",
        b"\x80\x02",
        b"\x80\x03",
        b"\x80\x04",
        b"\x80\x05",
        b"lmgg",
        b"tjgg",
        b"fmgg",
        b"GGUF",
    ),
    ".pt": (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"),
    ".pth": (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"),
    ".ckpt": (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05"),
    ".h5": (b"\x89HDF\r\n\x1a\n",),
    ".npz": (b"PK\x03\x04",),
}


def looks_like_model(path: str) -> bool:
    return path.lower().endswith(MODEL_SUFFIXES)


def holds_weights(path: str) -> bool:
    """Whether a file with a name other files share too (``.bin``, ``.pt``, ``.h5`` ...)
    starts as its kind of weights does (a pickle's or a zip's start for torch's .bin); True
    for a name only weights have (``.safetensors``), and where it cannot be read."""
    magics = MAGIC.get(os.path.splitext(path)[1].lower())
    if magics is None:
        return True
    try:
        with open(path, "rb") as file:
            head = file.read(8)
    except OSError:
        return True
    return head.startswith(magics)


def identity_of(path: str) -> tuple[Identity, int] | None:
    """(identity, size) of a regular file; None for anything else or a file that is gone."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (status.st_dev, status.st_ino), status.st_size


class ModelFiles:
    """The run's model files, in the order they became known, found by identity.

    The scope says which files the program is seen with count: ``files`` (the named models'
    weight files) and the model-named files under ``folders`` (a folder named as the model).
    Without either, files named before the run (by the command's arguments) set the scope to
    their folders; with none named, any model-named file of at least MIN_FOUND_BYTES the
    program opens or maps counts.
    """

    def __init__(self, files: Iterable[str] = (), folders: Iterable[str] = ()) -> None:
        self.scope_files = frozenset(os.path.realpath(path) for path in files)
        self.folders = tuple(dict.fromkeys(os.path.realpath(path) for path in folders))
        self._by_identity: dict[Identity, ModelFile] = {}
        self.files: list[ModelFile] = []
        self._refused: set[str] = set()  # paths seen and not the model: not stat'ed again

    @property
    def scoped(self) -> bool:
        return bool(self.scope_files or self.folders)

    def add_named(self, paths: Iterable[str]) -> list[ModelFile]:
        """Files named before the program runs; the new ones. Without a scope, their folders
        become it."""
        added = [f for f in (self._add(path, named=True) for path in paths) if f is not None]
        if not self.scoped and added:
            self.folders = tuple(dict.fromkeys(os.path.dirname(f.path) for f in added))
        return added

    def by_identity(self, identity: Identity) -> ModelFile | None:
        return self._by_identity.get(identity)

    def in_scope(self, path: str) -> bool:
        if path in self.scope_files:
            return True
        if not looks_like_model(path):
            return False
        return not self.scoped or any(
            path.startswith(folder.rstrip(os.sep) + os.sep) for folder in self.folders
        )

    def consider(self, path: str, identity: Identity | None = None) -> ModelFile | None:
        """The model file at ``path`` (seen open or mapped by the program), added when it is
        new and in scope; None when it is not the model."""
        if identity is not None:
            known = self._by_identity.get(identity)
            if known is not None:
                return known
        if path in self._refused:
            return None
        resolved = os.path.realpath(path)
        named = resolved in self.scope_files or path in self.scope_files
        if not self.in_scope(resolved) and not self.in_scope(path):
            self._refused.add(path)
            return None
        if not named and not holds_weights(resolved):  # named by the user: theirs to say
            self._refused.add(path)
            return None
        if not self.scoped:
            found = identity_of(resolved)
            if found is None or found[1] < MIN_FOUND_BYTES:
                self._refused.add(path)
                return None
        return self._add(resolved, named=False)

    def _add(self, path: str, named: bool) -> ModelFile | None:
        resolved = os.path.realpath(path)
        found = identity_of(resolved)
        if found is None:
            return None
        identity, size = found
        known = self._by_identity.get(identity)
        if known is not None:
            return known
        model_file = ModelFile(
            len(self.files), resolved, size, identity, named, file_stamp(resolved)
        )
        self._by_identity[identity] = model_file
        self.files.append(model_file)
        return model_file

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def swap_pages() -> tuple[int, int] | None:
    """(pswpin, pswpout) of /proc/vmstat: pages swapped in and out since boot."""
    found: dict[str, int] = {}
    try:
        with open("/proc/vmstat") as vmstat:
            for line in vmstat:
                key, _, value = line.partition(" ")
                if key in ("pswpin", "pswpout"):
                    found[key] = int(value)
    except (OSError, ValueError):
        return None
    return (found["pswpin"], found["pswpout"]) if len(found) == 2 else None


def swap_moved(
    before: tuple[int, int] | None, after: tuple[int, int] | None
) -> tuple[int | None, int | None]:
    """Bytes swapped in and out between two ``swap_pages``; (None, None) when either is unknown."""
    if before is None or after is None:
        return None, None
    return (after[0] - before[0]) * PAGE_SIZE, (after[1] - before[1]) * PAGE_SIZE


def file_stamp(path: str) -> tuple[int, int] | None:
    """(size, modification time) of a file, None once it is gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


def changed_files(stamps: dict[str, tuple[int, int] | None], files: ModelFiles) -> list[str]:
    """The model files whose size or modification time is not what it was at the start
    (``stamps``); of those found while the program ran inside the model it was given (a
    folder's shards), not what it was when found. A file found with no model given may be one
    the program makes (a copy it then loads), and one gone at the end a temporary: neither
    tells of writes into the model."""
    changed = [path for path, stamp in stamps.items() if file_stamp(path) != stamp]
    if files.scoped:
        for found in files.files:
            if found.path in stamps or found.stamp is None:
                continue
            now = file_stamp(found.path)
            if now is not None and now != found.stamp:
                changed.append(found.path)
    return changed
