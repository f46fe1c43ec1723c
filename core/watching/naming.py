"""Which files a named model is: a ``--model`` value, or a word of the watched command,
resolved as every verb resolves a model (``open_model``): a file is itself, a shard index is
its shards (never the JSON), a folder is the model it holds, and ``hf:ORG/NAME`` and
``ollama:NAME`` are what they name in the local stores. A bad ``--model`` fails with the
error ``inspect`` or ``load`` would give for it.

A folder ``open_model`` cannot take as one model (diffusers' subfolders, torch's ``.bin``
files, several GGUF quantizations side by side) stands for its model-named files: a loader
of any kind reads what it reads of them.
"""

from __future__ import annotations

import contextlib
import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.errors import ModelFormatError, OptionsError, ReferenceSyntaxError
from modelmon.core.model.folder_models import INDEX_SUFFIX
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.model.references import is_reference, resolve_reference
from modelmon.core.storage.urls import is_url
from modelmon.core.watching.connections import BucketArrivals
from modelmon.core.watching.files import holds_weights, looks_like_model

FOLDER_DEPTH = 3  # a model folder's files: diffusers keeps them one level down (unet/...)
FOLDER_FILES = 4096  # bound on the files a folder walk looks at


@dataclass(frozen=True, slots=True)
class NamedModel:
    """A model as named: its weight files, and the folder it was named by (whose other
    model-named files count too when the program reads them); None for a file or an index."""

    given: str
    files: tuple[str, ...]
    folder: str | None


def folder_files(folder: str) -> list[str]:
    """Model-named regular files under ``folder``, FOLDER_DEPTH levels down, in name order."""
    found: list[str] = []
    base = folder.rstrip(os.sep).count(os.sep)
    for root, dirs, names in os.walk(folder, followlinks=True):
        if root.count(os.sep) - base >= FOLDER_DEPTH - 1:
            dirs[:] = []
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if looks_like_model(name) and os.path.isfile(path) and holds_weights(path):
                found.append(path)
            if len(found) >= FOLDER_FILES:
                return found
    return found


def resolve_model(given: str) -> NamedModel:
    """The model ``given`` names. Raises what ``open_model`` raises for it (ModelFormatError,
    ModelReferenceError, ReferenceSyntaxError), and OptionsError for a URL: a watch sees the
    page cache of this machine's files, not objects in storage."""
    if is_url(given):
        raise OptionsError(f"{given}: a watch sees files on this machine, not a URL's objects")
    resolved = resolve_reference(given)
    target = str(resolved) if resolved is not None else given
    if os.path.isfile(target) and not target.endswith(".json"):
        return NamedModel(given, (target,), None)  # any file a loader reads, as it is
    try:
        model = open_model(given)
    except ModelFormatError as error:
        # No one model in the folder itself (a bad file in it is told as it is).
        if not os.path.isdir(target) or error.file not in (given, str(Path(target))):
            raise
        found = folder_files(target)
        if not found:
            raise
        return NamedModel(given, tuple(found), target)
    files = tuple(model_file.path for model_file in model.files)
    return NamedModel(given, files, target if os.path.isdir(target) else None)


# What a watch may be told its model is: named as every verb names one, or opened already.
WatchedModel = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Model


def bucket_watch(given: Sequence[str], *, attached: bool) -> BucketArrivals | None:
    """A model in a bucket that ``given`` names (one URL, nothing else), watched through the
    tree's connections to its endpoint; None when ``given`` names files."""
    urls = [name for name in given if is_url(name)]
    if not urls:
        return None
    if len(given) != 1:
        raise OptionsError(
            "a model in a bucket is watched alone: name its URL once (s3://BUCKET/PREFIX/), "
            "without files beside it"
        )
    model = open_model(urls[0])
    if model.files[0].remote is None:
        raise OptionsError(f"{urls[0]}: not a model in object storage")
    return bucket_arrivals(model, attached=attached)


def bucket_arrivals(model: Model, *, attached: bool) -> BucketArrivals:
    """The arrivals of a model in a bucket, named as what they are: its one object, or the
    prefix of its objects (never its index, a few KiB, with the objects' bytes as its size)."""
    remote = model.files[0].remote
    assert remote is not None
    first = model.files[0].path
    url = first if len(model.files) == 1 else first.rsplit("/", 1)[0] + "/"
    return BucketArrivals(
        url,
        model.file_bytes,
        remote.endpoint,
        from_start=not attached,
        objects=len(model.files),
    )


def watched_models(
    model: WatchedModel, *, attached: bool
) -> tuple[list[NamedModel], BucketArrivals | None]:
    """What a watch's ``model`` names: models of files, or a model in a bucket (opened
    already: a ``Model``, whose objects are not read again while the watch listens)."""
    if isinstance(model, Model):
        remote = model.files[0].remote if model.files else None
        if remote is not None:
            return [], bucket_arrivals(model, attached=attached)
        model = [file.path for file in model.files]
    given = [os.fspath(m) for m in ([model] if isinstance(model, (str, os.PathLike)) else model)]
    bucket = bucket_watch(given, attached=attached)
    return ([] if bucket is not None else [resolve_model(name) for name in given]), bucket


def named_files(models: Iterable[NamedModel]) -> list[str]:
    return list(dict.fromkeys(path for model in models for path in model.files))


def _words(argv: Sequence[str]) -> list[str]:
    """The arguments after the program, a shell line's words too (``sh -c '...'``), each
    ``--flag=value`` by its value."""
    words: list[str] = []
    for argument in argv[1:]:
        words.append(argument)
        if any(space in argument for space in " \t\n") and len(argument) < 4096:
            with contextlib.suppress(ValueError):
                words += shlex.split(argument)
    values = [
        word.split("=", 1)[1] if word.startswith("-") and "=" in word else word for word in words
    ]
    return [value for value in values if value and not value.startswith("-")]


def _folder_in_arguments(folder: str) -> list[NamedModel]:
    """The model a folder among the arguments holds; its model-named files when it holds no
    model ``open_model`` accepts (a damaged shard: the program may read it all the same)."""
    try:
        return [resolve_model(folder)]
    except ModelFormatError:
        found = folder_files(folder)
        return [NamedModel(folder, tuple(found), folder)] if found else []


def models_in_arguments(argv: Sequence[str]) -> tuple[list[NamedModel], list[str]]:
    """The models a command's arguments name, and a note for each word that is written as a
    model (a reference, a shard index) but names none here. The program itself (argv[0]) and
    its script are not models; a folder without a model-named file is just a folder."""
    found: list[NamedModel] = []
    notes: list[str] = []
    for value in dict.fromkeys(_words(argv)):
        try:
            if is_reference(value) or (value.endswith(INDEX_SUFFIX) and os.path.isfile(value)):
                found.append(resolve_model(value))
            elif os.path.isdir(value):
                found += _folder_in_arguments(value)
            elif looks_like_model(value) and os.path.isfile(value) and holds_weights(value):
                found.append(NamedModel(value, (value,), None))
        except (ModelFormatError, ReferenceSyntaxError) as error:
            notes.append(f"the command's argument {error}: not watched as its model")
        except OSError:  # a name too long for a path, a permission: not a model
            continue
    return found, notes
