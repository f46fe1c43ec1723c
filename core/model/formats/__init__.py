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
from modelmon.core.system.files import NOT_REGULAR

GGUF_MAGIC = b"GGUF"


def open_model(path: str | os.PathLike[str]) -> Model:
    """Parse what the user named into a Model; every problem is a one-line ModelFormatError.

    A string may be a reference (``hf:ORG/NAME``, ``ollama:NAME``; see
    ``modelmon.core.model.references``): it opens the file or folder it resolves to.
    """
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
    except FileNotFoundError:
        raise ModelFormatError(str(target), "no such file or directory") from None
    except OSError as exc:  # permission denied, a symlink loop, a name too long...
        raise ModelFormatError(str(target), (exc.strerror or str(exc)).lower()) from None
    if stat.S_ISDIR(mode):
        return _open_directory(target)
    if not stat.S_ISREG(mode):
        raise ModelFormatError(str(target), NOT_REGULAR)
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
    shards = sorted(p for p in folder.glob("*.safetensors") if p.is_file())
    if len(shards) == 1:
        return _open_file(shards[0])
    if shards:
        return _combine(str(folder), [str(p) for p in shards], None)
    ggufs = sorted(p for p in folder.glob("*.gguf") if p.is_file())
    if len(ggufs) == 1:
        return _open_file(ggufs[0])
    if ggufs:
        names = ", ".join(p.name for p in ggufs[:4])
        raise ModelFormatError(str(folder), f"several GGUF files ({names}...); name one")
    raise ModelFormatError(str(folder), "directory holds no .safetensors, index or .gguf file")


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
