"""Model formats: a path (file, shard index, directory) or a reference → a validated ``Model``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from modelmon.core.errors import EmptyModelError, ModelFormatError, ModelReferenceError
from modelmon.core.model.formats.opening import open_model_file
from modelmon.core.model.formats.safetensors import parse_index, parse_safetensors_file
from modelmon.core.model.records import Model, ModelFile, TensorExtent
from modelmon.core.model.references import resolve_reference
from modelmon.core.system.files import (
    UnusableFile,
    not_regular,
    path_problem,
    resolve_descriptor_path,
)

GGUF_MAGIC = b"GGUF"
# GGUF's magic read as a big-endian number: a file written wholly byte-swapped. gguf-py's
# reader and llama.cpp read the magic as bytes and refuse it; so does modelmon, saying so.
SWAPPED_GGUF_MAGIC = GGUF_MAGIC[::-1]


def open_model(path: str | os.PathLike[str]) -> Model:
    """Parse what the user named into a Model; every problem is a one-line ModelFormatError.

    A string may be a reference (``hf:ORG/NAME``, ``ollama:NAME``; see
    ``modelmon.core.model.references``): it opens the file or folder it resolves to. A
    descriptor's path (``/proc/self/fd/N``, ``/dev/fd/N``) is replaced by the path of the file
    it has open, which the worker processes can open too.
    """
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
        raise ModelFormatError(str(target), path_problem(target) or "cannot be read") from None
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
    if not magic:
        raise ModelFormatError(name, "empty file (0 bytes)")
    if magic == SWAPPED_GGUF_MAGIC:
        raise ModelFormatError(
            name,
            f"a byte-swapped GGUF (magic {magic!r}, not {GGUF_MAGIC!r}): written in the wrong "
            "byte order, which the gguf reader and llama.cpp refuse too",
            0,
        )
    if magic == GGUF_MAGIC:
        # Lazy for start-up time: the gguf library is imported only when a GGUF file is opened.
        from modelmon.core.model.formats.gguf import parse_gguf

        return parse_gguf(name)
    extents, file, metadata = parse_safetensors_file(name)
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
    """Parse every shard; the tensors must be exactly those the index assigns to it."""
    extents: list[TensorExtent] = []
    files: list[ModelFile] = []
    metadata: dict[str, str] = {}
    owner: dict[str, str] = {}
    for shard in shards:
        shard_extents, file, shard_metadata = parse_safetensors_file(shard)
        files.append(file)
        metadata.update(shard_metadata)
        for extent in shard_extents:
            if extent.name in owner:
                raise ModelFormatError(
                    shard, f"tensor {extent.name!r} is also in {Path(owner[extent.name]).name}"
                )
            owner[extent.name] = shard
            if weight_map is not None and weight_map.get(extent.name) != shard:
                raise ModelFormatError(
                    shard,
                    f"holds tensor {extent.name!r} that the index does not place in it "
                    "(a shard of another model?)",
                )
        extents.extend(shard_extents)
    if weight_map is not None:
        missing = [name for name in weight_map if name not in owner]
        if missing:
            raise ModelFormatError(
                weight_map[missing[0]],
                f"lacks tensor {missing[0]!r} named by the index "
                f"({len(missing)} missing; a shard of another model?)",
            )
    return Model(path, "safetensors", tuple(files), tuple(extents), metadata)


def require_tensor_bytes(model: Model) -> None:
    """Refuse, with one EmptyModelError, to plan a load of a model with no tensor bytes."""
    if model.total_bytes == 0:
        raise EmptyModelError(model.path)
