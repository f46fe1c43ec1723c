"""A sharded safetensors model: every shard parsed, holding exactly the tensors its index
assigns to it. Shards may be files or objects: ``parse`` reads one."""

from __future__ import annotations

from collections.abc import Callable

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.records import Model, ModelFile, TensorExtent

ParseShard = Callable[[str], tuple[list[TensorExtent], ModelFile, dict[str, str]]]


def _name(shard: str) -> str:
    """A shard's file name: the last part of its path or URL."""
    return shard.rstrip("/").rpartition("/")[2]


def combine(
    path: str,
    shards: list[str],
    weight_map: dict[str, str] | None,
    parse: ParseShard,
) -> Model:
    """Parse every shard; the tensors must be exactly those the index assigns to it."""
    extents: list[TensorExtent] = []
    files: list[ModelFile] = []
    metadata: dict[str, str] = {}
    owner: dict[str, str] = {}
    for shard in shards:
        shard_extents, file, shard_metadata = parse(shard)
        files.append(file)
        metadata.update(shard_metadata)
        for extent in shard_extents:
            if extent.name in owner:
                raise ModelFormatError(
                    shard, f"tensor {extent.name!r} is also in {_name(owner[extent.name])}"
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
