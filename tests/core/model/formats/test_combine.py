"""A sharded model: each tensor in one shard only, the one its index places it in; the first
tensor (shard by shard, in offset order) that is not is the one named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model


def shard(path: Path, *names: str) -> str:
    """A shard holding ``names`` in this order (the library orders a file's tensors by name)."""
    safetensors.numpy.save_file({name: np.zeros(2, np.float32) for name in names}, str(path))
    return path.name


def index(folder: Path, weight_map: dict[str, str]) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return path


@pytest.mark.parametrize(
    ("second", "named"),
    [
        (("a.taken", "b.misplaced"), "tensor 'a.taken' is also in 1.safetensors"),
        (("a.misplaced", "b.taken"), "holds tensor 'a.misplaced' that the index does not place"),
    ],
)
def test_first_tensor_out_of_place_is_named(
    tmp_path: Path, second: tuple[str, str], named: str
) -> None:
    names = [f"t{i}" for i in range(50)]
    first = shard(tmp_path / "1.safetensors", *names, "a.taken", "b.taken")
    other = shard(tmp_path / "2.safetensors", *second, "z.placed")
    placed = {name: first for name in [*names, "a.taken", "b.taken"]}
    path = index(tmp_path, {**placed, "z.placed": other})
    with pytest.raises(ModelFormatError) as caught:
        open_model(path)
    assert named in str(caught.value) and "2.safetensors" in str(caught.value)


def test_shards_without_index_hold_each_tensor_once(tmp_path: Path) -> None:
    shard(tmp_path / "1.safetensors", "x", "y")
    shard(tmp_path / "2.safetensors", "w", "y", "z")
    with pytest.raises(ModelFormatError, match=r"tensor 'y' is also in 1\.safetensors"):
        open_model(tmp_path)


def test_tensor_the_index_names_but_no_shard_holds(tmp_path: Path) -> None:
    first = shard(tmp_path / "1.safetensors", "x", "y")
    path = index(tmp_path, {"x": first, "y": first, "v": first, "u": first})
    with pytest.raises(ModelFormatError, match=r"lacks tensor 'v' named by the index \(2 missing"):
        open_model(path)
    model = open_model(index(tmp_path, {"x": first, "y": first}))
    assert [extent.name for extent in model.extents] == ["x", "y"]
