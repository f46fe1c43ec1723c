"""Synthetic checkpoints: valid per the reference readers, right sizes, deterministic."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize
from hypothesis import given
from hypothesis import strategies as st
from safetensors import safe_open

from modelmon.core.loading.strategies.gguf_reader import read_gguf_tensors
from modelmon.core.model import synth
from modelmon.core.model.formats.gguf import parse_gguf
from modelmon.core.model.synth import (
    default_intermediate,
    llama_gguf_plan,
    llama_safetensors_plan,
    split_evenly,
    write_safetensors_model,
)
from modelmon.core.model.synth_gguf import write_gguf_model

ITEM_SIZE = {"F32": 4, "F16": 2, "BF16": 2}
SMALL = {"layers": 2, "hidden": 64, "vocab": 96}


def read_header(path: Path) -> tuple[dict[str, dict[str, object]], int, bytes]:
    """Tensor entries (in file order), where the data starts, and the raw header text."""
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    text = raw[8 : 8 + length]
    header = json.loads(text)
    header.pop("__metadata__")
    return header, 8 + length, text


def tensor_bytes(path: Path, name: str) -> bytes:
    header, data_start, _ = read_header(path)
    begin, end = header[name]["data_offsets"]  # type: ignore[misc]
    return path.read_bytes()[data_start + begin : data_start + end]


def bf16_to_f32(raw: bytes) -> np.ndarray:
    return (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)


# --- safetensors -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_safetensors_file_has_the_reference_layout(tmp_path: Path, dtype: str) -> None:
    path = write_safetensors_model(tmp_path, dtype=dtype, **SMALL)
    assert path == tmp_path / "model.safetensors"
    header, data_start, text = read_header(path)
    plan = llama_safetensors_plan(2, 64, default_intermediate(64), 96)
    assert list(header) == [t.name for t in plan]  # load order, as written
    assert data_start % 8 == 0 and text.rstrip(b" ").endswith(b"}")  # padded with spaces
    offset = 0
    for tensor in plan:
        entry = header[tensor.name]
        assert entry["dtype"] == dtype and tuple(entry["shape"]) == tensor.shape  # type: ignore[arg-type]
        assert entry["data_offsets"] == [offset, offset + tensor.elements * ITEM_SIZE[dtype]]
        offset += tensor.elements * ITEM_SIZE[dtype]
    assert path.stat().st_size == data_start + offset
    with safe_open(path, framework="numpy") as reference:  # the Rust reader validates it all
        assert set(reference.keys()) == set(header)
        assert reference.get_slice("lm_head.weight").get_shape() == [96, 64]
        assert reference.metadata() == {"format": "pt"}


@pytest.mark.parametrize("dtype", ["F32", "F16"])
def test_safetensors_values_are_small_normals(tmp_path: Path, dtype: str) -> None:
    path = write_safetensors_model(tmp_path, dtype=dtype, **SMALL)
    tensors = safetensors.numpy.load_file(path)
    values = np.concatenate([t.ravel().astype(np.float64) for t in tensors.values()])
    assert tensors["model.embed_tokens.weight"].dtype == np.dtype(dtype.replace("F", "float"))
    assert abs(values.mean()) < 0.001 and 0.019 < values.std() < 0.021


def test_bf16_holds_the_same_values_as_f16(tmp_path: Path) -> None:
    f16 = write_safetensors_model(tmp_path / "f16", dtype="F16", **SMALL)
    bf16 = write_safetensors_model(tmp_path / "bf16", dtype="BF16", **SMALL)
    for name in ("model.embed_tokens.weight", "model.layers.1.mlp.down_proj.weight"):
        as_f16 = np.frombuffer(tensor_bytes(f16, name), "<f2").astype(np.float32)
        as_bf16 = bf16_to_f32(tensor_bytes(bf16, name))
        np.testing.assert_allclose(as_bf16, as_f16, rtol=1 / 128, atol=1e-7)


def test_sharded_checkpoint_and_index_agree(tmp_path: Path) -> None:
    index = write_safetensors_model(tmp_path, dtype="F16", shards=3, **SMALL)
    assert index == tmp_path / "model.safetensors.index.json"
    body = json.loads(index.read_text())
    names = [t.name for t in llama_safetensors_plan(2, 64, default_intermediate(64), 96)]
    shard_names = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]
    assert list(body["weight_map"]) == names
    assert sorted(set(body["weight_map"].values())) == shard_names
    in_file_order: list[str] = []
    shard_bytes = []
    for shard in shard_names:
        header, data_start, _ = read_header(tmp_path / shard)
        assert [n for n, s in body["weight_map"].items() if s == shard] == list(header)
        in_file_order += header
        shard_bytes.append((tmp_path / shard).stat().st_size - data_start)
    assert in_file_order == names  # shards split the load order, they don't reorder it
    assert body["metadata"]["total_size"] == sum(shard_bytes)
    largest = max(t.elements for t in llama_safetensors_plan(2, 64, 256, 96)) * 2
    assert max(shard_bytes) <= sum(shard_bytes) / 3 + largest


def test_content_depends_on_the_seed_only(tmp_path: Path) -> None:
    first = write_safetensors_model(tmp_path / "a", seed=7, **SMALL).read_bytes()
    again = write_safetensors_model(tmp_path / "b", seed=7, **SMALL).read_bytes()
    other = write_safetensors_model(tmp_path / "c", seed=8, **SMALL).read_bytes()
    assert first == again and first != other
    sharded = write_safetensors_model(tmp_path / "d", seed=7, shards=2, **SMALL)
    name = "model.layers.1.self_attn.v_proj.weight"
    shard = json.loads(sharded.read_text())["weight_map"][name]
    assert tensor_bytes(tmp_path / "d" / shard, name) == tensor_bytes(
        tmp_path / "a" / "model.safetensors", name
    )


def test_big_tensors_are_written_in_distinct_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth, "CHUNK_ELEMENTS", 1000)
    path = write_safetensors_model(tmp_path, dtype="F16", **SMALL)
    embed = safetensors.numpy.load_file(path)["model.embed_tokens.weight"].ravel()
    assert embed.size > 5000
    chunks = {embed[i : i + 1000].tobytes() for i in range(0, 5000, 1000)}
    assert len(chunks) == 5  # each chunk drawn afresh, none repeated
    assert 0.018 < float(embed.astype(np.float64).std()) < 0.022


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="dtype"):
        write_safetensors_model(tmp_path, dtype="F8")
    with pytest.raises(ValueError, match="shards"):
        write_safetensors_model(tmp_path, layers=0, shards=4)  # 3 tensors only
    with pytest.raises(ValueError, match="positive"):
        write_safetensors_model(tmp_path, hidden=0)
    with pytest.raises(ValueError, match="multiples of 256"):
        write_gguf_model(tmp_path / "m.gguf", hidden=64, tensor_type="Q4_K")
    with pytest.raises(ValueError, match="tensor_type"):
        write_gguf_model(tmp_path / "m.gguf", tensor_type="IQ2_XS")
    assert not list(tmp_path.iterdir())


def test_split_evenly_examples() -> None:
    assert split_evenly([10] * 12, 4) == [range(0, 3), range(3, 6), range(6, 9), range(9, 12)]
    assert split_evenly([100, 1, 1, 1], 2) == [range(0, 1), range(1, 4)]
    assert split_evenly([1, 1, 1, 100], 3) == [range(0, 2), range(2, 3), range(3, 4)]
    assert split_evenly([5], 1) == [range(0, 1)]
    with pytest.raises(ValueError):
        split_evenly([1, 2], 3)


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=40), st.data())
def test_split_evenly_makes_contiguous_non_empty_runs(
    sizes: list[int], data: st.DataObject
) -> None:
    parts = data.draw(st.integers(1, len(sizes)))
    runs = split_evenly(sizes, parts)
    assert len(runs) == parts and all(len(run) > 0 for run in runs)
    assert [i for run in runs for i in run] == list(range(len(sizes)))


# --- GGUF --------------------------------------------------------------------------------------


@pytest.mark.parametrize("tensor_type", synth.GGUF_TENSOR_TYPES)
def test_gguf_model_has_the_planned_tensors_and_sizes(tmp_path: Path, tensor_type: str) -> None:
    path = write_gguf_model(tmp_path / "m.gguf", layers=2, vocab=64, tensor_type=tensor_type)
    model = parse_gguf(path)
    plan = llama_gguf_plan(2, 256, default_intermediate(256), 64)
    assert [e.name for e in model.extents] == [t.name for t in plan]
    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[tensor_type]]
    for extent, tensor in zip(model.extents, plan, strict=True):
        if len(tensor.shape) == 1:
            assert (extent.dtype, extent.length) == ("F32", tensor.elements * 4)
        else:
            assert extent.dtype == tensor_type
            assert extent.length == tensor.elements // block_size * type_size
        assert extent.shape == tensor.shape[::-1]
    assert model.metadata["general.name"].startswith("modelmon synthetic")


@pytest.mark.parametrize("tensor_type", ["F16", "BF16", "Q8_0", "Q4_0"])
def test_gguf_weights_decode_to_small_normals(tmp_path: Path, tensor_type: str) -> None:
    path = write_gguf_model(tmp_path / "m.gguf", layers=1, vocab=512, tensor_type=tensor_type)
    arrays = read_gguf_tensors(path)
    stored = arrays["token_embd.weight"]
    if tensor_type == "BF16":
        weights = bf16_to_f32(stored.tobytes())
    else:
        weights = dequantize(stored, GGMLQuantizationType[tensor_type]).astype(np.float64)
    assert abs(float(weights.mean())) < 0.001 and 0.0185 < float(weights.std()) < 0.0215
    norm = arrays["blk.0.attn_norm.weight"]
    assert norm.dtype == np.float32 and abs(float(norm.mean()) - 1.0) < 0.01


def test_gguf_content_depends_on_the_seed_only(tmp_path: Path) -> None:
    first = write_gguf_model(tmp_path / "a.gguf", layers=1, vocab=64, seed=3).read_bytes()
    again = write_gguf_model(tmp_path / "b.gguf", layers=1, vocab=64, seed=3).read_bytes()
    other = write_gguf_model(tmp_path / "c.gguf", layers=1, vocab=64, seed=4).read_bytes()
    assert first == again and first != other and len(first) == len(other)


def test_gguf_rows_are_generated_in_distinct_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(synth, "CHUNK_ELEMENTS", 1024)  # 4 rows of 256 at a time
    path = write_gguf_model(tmp_path / "m.gguf", layers=1, vocab=64, tensor_type="Q8_0")
    embed = dequantize(read_gguf_tensors(path)["token_embd.weight"], GGMLQuantizationType.Q8_0)
    assert embed.shape == (64, 256)
    assert len({embed[i : i + 4].tobytes() for i in range(0, 64, 4)}) == 16
