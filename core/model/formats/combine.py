"""A sharded safetensors model: every shard parsed, holding exactly the tensors its index
assigns to it. Shards may be files or objects: ``parse`` reads one."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable
from itertools import repeat

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.safetensors_columns import first_true
from modelmon.core.model.records import Model, ModelFile, TensorExtent

ParseShard = Callable[[str], tuple[list[TensorExtent], ModelFile, dict[str, str]]]


_NAME = operator.attrgetter("name")


def _name(shard: str) -> str:
    """A shard's file name: the last part of its path or URL."""
    return shard.rstrip("/").rpartition("/")[2]


def combine(
    path: str,
    shards: list[str],
    weight_map: dict[str, str] | None,
    parse: ParseShard,
) -> Model:
    """Parse every shard; the tensors must be exactly those the index assigns to it.

    Checked over whole columns (a million tensors): with an index, each tensor is placed in
    its shard (then no two shards hold it) and as many tensors as the index names; without,
    no name is held twice. What fails is then found, and named, tensor by tensor.
    """
    extents: list[TensorExtent] = []
    files: list[ModelFile] = []
    metadata: dict[str, str] = {}
    held: list[list[str]] = []  # each shard's tensor names
    seen: set[str] = set()
    for shard in shards:
        shard_extents, file, shard_metadata = parse(shard)
        files.append(file)
        metadata.update(shard_metadata)
        names = list(map(_NAME, shard_extents))
        if weight_map is None:
            first = first_true(map(seen.__contains__, names))
            seen.update(names)
        else:  # a tensor an earlier shard holds is placed there, so not here
            first = first_true(map(operator.ne, map(weight_map.get, names), repeat(shard)))
        if first is not None:
            _name_misplaced(shard, shards, held, names[first:], weight_map)
        held.append(names)
        extents.extend(shard_extents)
    if weight_map is not None and len(extents) != len(weight_map):
        owned = set(itertools.chain.from_iterable(held))
        missing = list(itertools.filterfalse(owned.__contains__, weight_map))
        raise ModelFormatError(
            weight_map[missing[0]],
            f"lacks tensor {missing[0]!r} named by the index "
            f"({len(missing)} missing; a shard of another model?)",
        )
    return Model(path, "safetensors", tuple(files), tuple(extents), metadata)


def _name_misplaced(
    shard: str,
    shards: list[str],
    held: list[list[str]],
    names: list[str],
    weight_map: dict[str, str] | None,
) -> None:
    """Raise for the first of ``names`` (of ``shard``) that an earlier shard holds or the index
    places elsewhere."""
    earlier = zip(shards[: len(held)], held, strict=True)
    owner = {name: shard_name for shard_name, holds in earlier for name in holds}
    for name in names:
        if name in owner:
            raise ModelFormatError(shard, f"tensor {name!r} is also in {_name(owner[name])}")
        if weight_map is not None and weight_map.get(name) != shard:
            raise ModelFormatError(
                shard,
                f"holds tensor {name!r} that the index does not place in it "
                "(a shard of another model?)",
            )
