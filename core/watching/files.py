"""Which files are the model: named by ``--model`` (a file or a folder), by the watched
command's arguments, or recognised by name when the program opens or maps them.

A file is known by its identity (device, inode), not its path: the program may reach it
through a symlink (a Hugging Face snapshot links into ``blobs/``), a bind mount or a relative
path, and ``/proc/PID/maps`` names a mapping by device and inode.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
FOLDER_DEPTH = 3  # a model folder's files: diffusers keeps them one level down (unet/...)
FOLDER_FILES = 4096  # bound on the files a folder walk looks at
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


def looks_like_model(path: str) -> bool:
    return path.lower().endswith(MODEL_SUFFIXES)


def identity_of(path: str) -> tuple[Identity, int] | None:
    """(identity, size) of a regular file; None for anything else or a file that is gone."""
    try:
        status = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return (status.st_dev, status.st_ino), status.st_size


def _folder_files(folder: str, suffix_only: bool) -> list[str]:
    """Regular files under ``folder`` (FOLDER_DEPTH levels), model-named when ``suffix_only``."""
    found: list[str] = []
    base = folder.rstrip(os.sep).count(os.sep)
    for root, dirs, names in os.walk(folder, followlinks=True):
        if root.count(os.sep) - base >= FOLDER_DEPTH - 1:
            dirs[:] = []
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if (not suffix_only or looks_like_model(name)) and os.path.isfile(path):
                found.append(path)
            if len(found) >= FOLDER_FILES:
                return found
    return found


def files_of(path: str) -> list[str]:
    """The model files a ``--model`` path stands for: the file itself, or a folder's
    model-named files (all its files when none is model-named)."""
    if os.path.isdir(path):
        return _folder_files(path, suffix_only=True) or _folder_files(path, suffix_only=False)
    return [path]


def files_in_arguments(argv: Sequence[str]) -> list[str]:
    """Model files the arguments of a command name: a model-named file, or a folder holding
    model-named files; ``--flag=value`` is looked at by its value. The program itself
    (argv[0]) and its script are not models."""
    found: list[str] = []
    words: list[str] = []
    for argument in argv[1:]:
        words.append(argument)
        if any(space in argument for space in " \t\n") and len(argument) < 4096:
            with contextlib.suppress(ValueError):  # a shell line (sh -c '...'): its words too
                words += shlex.split(argument)
    for word in words:
        value = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        if not value or value.startswith("-"):
            continue
        try:
            if os.path.isdir(value):
                found += _folder_files(value, suffix_only=True)
            elif looks_like_model(value) and os.path.isfile(value):
                found.append(value)
        except OSError:  # a name too long for a path, a permission: not a model
            continue
    return list(dict.fromkeys(found))


class ModelFiles:
    """The run's model files, in the order they became known, found by identity.

    ``scope``: the ``--model`` paths; when given, only files under them count (a file named
    by ``--model`` and any file in a folder named by it). Without it, files named before the
    run (by the command's arguments) set the scope to their folders; with none named, any
    model-named file of at least MIN_FOUND_BYTES the program opens or maps counts.
    """

    def __init__(self, scope: Iterable[str] = ()) -> None:
        self.scope = tuple(os.path.realpath(path) for path in scope)
        self._by_identity: dict[Identity, ModelFile] = {}
        self.files: list[ModelFile] = []
        self._refused: set[str] = set()  # paths seen and not the model: not stat'ed again

    def add_named(self, paths: Iterable[str]) -> list[ModelFile]:
        """Files named before the program runs; the new ones. Without ``--model``, their
        folders become the scope."""
        added = [f for f in (self._add(path, named=True) for path in paths) if f is not None]
        if not self.scope and added:
            self.scope = tuple(dict.fromkeys(os.path.dirname(f.path) for f in added))
            self._folders_only = True
        return added

    _folders_only = False  # the scope is the named files' folders: model-named files in them

    def by_identity(self, identity: Identity) -> ModelFile | None:
        return self._by_identity.get(identity)

    def in_scope(self, path: str) -> bool:
        if not self.scope:
            return looks_like_model(path)
        if self._folders_only and not looks_like_model(path):
            return False
        return any(
            path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in self.scope
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
        if not self.in_scope(resolved) and not self.in_scope(path):
            self._refused.add(path)
            return None
        if not self.scope:
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
        model_file = ModelFile(len(self.files), resolved, size, identity, named)
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


def file_stamp(path: str) -> tuple[int, int] | None:
    """(size, modification time) of a file, None once it is gone."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns
