"""``*.safetensors.index.json``: which shard beside the index holds each tensor."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from modelmon.core.errors import ModelFormatError
from modelmon.core.system.files import UnusableFile, parse_json, read_small_file
from modelmon.core.system.model_files import MAX_HEADER_BYTES


def _fail(path: str, problem: str) -> ModelFormatError:
    return ModelFormatError(path, problem, None)


def parse_index(index_path: str | os.PathLike[str]) -> dict[str, str]:
    """``*.safetensors.index.json`` → {tensor name: shard path}. Shards must sit beside it."""
    name = str(index_path)
    try:
        data = read_small_file(name, MAX_HEADER_BYTES)
    except UnusableFile as exc:
        raise _fail(name, f"index: {exc.reason}") from None
    folder = Path(name).parent
    return weight_map_of(name, data, lambda shard: str(folder / shard))


def weight_map_of(name: str, data: bytes, beside: Callable[[str], str]) -> dict[str, str]:
    """An index's bytes → {tensor name: where its shard is}, ``beside(shard name)`` naming
    the shard beside the index (a path, a URL)."""
    try:
        document = parse_json(data)
    except UnusableFile as exc:
        raise _fail(name, f"index: {exc.reason}") from None
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        # A model's config.json, say, opened for its index: say what would open it.
        raise _fail(
            name,
            "not a shard index (no 'weight_map' of tensors to shards): open the model's "
            "folder, its *.safetensors.index.json or a .safetensors file",
        )
    result: dict[str, str] = {}
    for tensor, shard in weight_map.items():
        if not isinstance(shard, str) or not shard or "/" in shard or shard in (".", ".."):
            raise _fail(name, f"weight_map[{tensor!r}] is not a file name beside the index")
        result[tensor] = beside(shard)
    return result
