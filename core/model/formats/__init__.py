"""Model formats: a path (file, shard index, directory) or a reference → a validated ``Model``."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from modelmon.core.errors import EmptyModelError, ModelFormatError, ModelReferenceError
from modelmon.core.model.formats.combine import combine
from modelmon.core.model.formats.opening import format_of, not_gguf_magic, open_model_file
from modelmon.core.model.formats.safetensors import parse_safetensors_file
from modelmon.core.model.formats.safetensors_index import parse_index
from modelmon.core.model.records import Model
from modelmon.core.model.references import resolve_reference
from modelmon.core.storage.urls import is_url
from modelmon.core.system.files import (
    UnusableFile,
    not_regular,
    path_problem,
    resolve_descriptor_path,
)

# A URL of object storage that lost a slash of its "//" (as a shell or a join may make it).
URL_SLIP = re.compile(r"^(s3|https?):/([^/].*)$")


def open_model(path: str | os.PathLike[str]) -> Model:
    """Parse what the user named into a Model; every problem is a one-line ModelFormatError.

    A string may be a reference (``hf:ORG/NAME``, ``ollama:NAME``; see
    ``modelmon.core.model.references``): it opens the file or folder it resolves to. A
    descriptor's path (``/proc/self/fd/N``, ``/dev/fd/N``) is replaced by the path of the file
    it has open, which the worker processes can open too. A URL (``s3://BUCKET/KEY``, a
    prefix, ``https://host/path``) opens the object(s) by ranged GETs of their headers.
    """
    if "\x00" in os.fspath(path):  # no file's name holds one: the kernel's end of a name
        raise ModelFormatError(os.fspath(path), "a path cannot hold a NUL byte")
    if is_url(path):
        # Lazy: network code is imported only for a URL.
        from modelmon.core.model.formats.remote import open_remote_model

        return open_remote_model(str(path))
    given = os.fspath(path)
    try:
        named = resolve_descriptor_path(given)
    except UnusableFile as exc:
        raise ModelFormatError(given, exc.reason) from None
    if named != given:
        return open_model(Path(named))
    if isinstance(path, str):
        resolved = resolve_reference(path)
        if resolved is not None:
            try:
                return open_model(resolved)
            except ModelFormatError as exc:
                # A problem with the snapshot folder itself is told about what the user named;
                # one with a file names the file.
                if exc.file != str(resolved) or not resolved.is_dir():
                    raise
                raise ModelReferenceError(path, f"{exc.problem} (in {resolved})") from None
    target = Path(path)
    try:
        mode = target.stat().st_mode
    except OSError:  # permission denied, a symlink loop, a name too long...
        problem = path_problem(target) or "cannot be read"
        slip = URL_SLIP.match(given)  # "s3:/bucket/key": a URL with one slash lost
        if slip is not None:
            problem += f"; for a model in object storage, name it {slip[1]}://{slip[2]}"
        raise ModelFormatError(str(target), problem) from None
    if stat.S_ISDIR(mode):
        return _open_directory(target)
    if not stat.S_ISREG(mode):
        raise ModelFormatError(str(target), not_regular(mode))
    if target.name.endswith(".json"):
        return _open_sharded(target)
    return _open_file(target)


def _open_file(target: Path) -> Model:
    name = str(target)
    try:
        with open_model_file(name) as handle:
            magic = handle.read(4)
    except OSError as exc:
        raise ModelFormatError(name, exc.strerror or str(exc)) from None
    if format_of(name, magic) == "gguf":
        # Lazy for start-up time: the gguf library is imported only when a GGUF file is opened.
        from modelmon.core.model.formats.gguf import parse_gguf

        return parse_gguf(name)
    try:
        extents, file, metadata = parse_safetensors_file(name)
    except ModelFormatError as exc:
        if not target.name.lower().endswith(".gguf"):
            raise
        # Named as a GGUF, it is judged as one first: a safetensors parser's complaint
        # about a file its user meant as a GGUF names the wrong format.
        raise ModelFormatError(
            name,
            f"not a GGUF file: {not_gguf_magic(magic)}, and it is no safetensors file either",
        ) from exc
    return Model(name, "safetensors", (file,), tuple(extents), metadata)


def _open_directory(folder: Path) -> Model:
    indexes = sorted(folder.glob("*.safetensors.index.json"))
    if len(indexes) == 1:
        return _open_sharded(indexes[0])
    if len(indexes) > 1:
        names = ", ".join(p.name for p in indexes)
        raise ModelFormatError(str(folder), f"several shard indexes ({names}); name one")
    shards, unusable = _regular_files(folder, "*.safetensors")
    if len(shards) == 1:
        return _open_file(shards[0])
    if shards:
        return _combine(str(folder), [str(p) for p in shards], None)
    ggufs, unusable_ggufs = _regular_files(folder, "*.gguf")
    if len(ggufs) == 1:
        return _open_file(ggufs[0])
    if ggufs:
        names = ", ".join(p.name for p in ggufs[:4])
        raise ModelFormatError(str(folder), f"several GGUF files ({names}...); name one")
    unusable += unusable_ggufs
    if unusable:
        (first, problem), more = unusable[0], len(unusable) - 1
        others = f" (and {more} more such)" if more else ""
        raise ModelFormatError(
            str(folder), f"holds no model file that can be read: {first.name} is {problem}{others}"
        )
    raise ModelFormatError(str(folder), "directory holds no .safetensors, index or .gguf file")


def _regular_files(folder: Path, pattern: str) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The entries of ``folder`` matching ``pattern`` that are regular files (or symlinks to
    one), and the others with what they are ("a FIFO", "a symlink loop"...)."""
    regular: list[Path] = []
    unusable: list[tuple[Path, str]] = []
    for path in sorted(folder.glob(pattern)):
        problem = path_problem(path)
        if problem is None:
            regular.append(path)
        elif not path.is_dir():  # a folder named x.safetensors is no candidate
            unusable.append((path, problem))
    return regular, unusable


def _open_sharded(index: Path) -> Model:
    weight_map = parse_index(index)
    shards = sorted(set(weight_map.values()))
    for shard in shards:
        if not os.path.lexists(shard):
            raise ModelFormatError(shard, f"shard named by {index.name} is missing")
    return _combine(str(index), shards, weight_map)


def _combine(path: str, shards: list[str], weight_map: dict[str, str] | None) -> Model:
    return combine(path, shards, weight_map, parse_safetensors_file)


def require_tensor_bytes(model: Model) -> None:
    """Refuse, with one EmptyModelError, to plan a load of a model with no tensor bytes."""
    if model.total_bytes == 0:
        raise EmptyModelError(model.path)
