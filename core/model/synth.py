"""Realistic synthetic checkpoints for tests, the demo model and benchmarks.

Both writers stream tensor by tensor (GGUF) or chunk by chunk (safetensors), so a 2 GB
model never sits in RAM. Values are deterministic for a seed: each tensor draws from its
own generator, seeded with ``(seed, tensor index)``.

Speed: numpy's float32 → float16 cast runs at ~15 M values/s on some CPUs, far too slow
for gigabytes. So values come from a 65536-entry table of N(0, 0.02) samples, already in
the target dtype, indexed by random uint16s (~200 M values/s): exact normal samples,
only drawn from a finite pool.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, LlamaFileType, quants

SAFETENSORS_DTYPES = ("F32", "F16", "BF16")
GGUF_TENSOR_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K")
WEIGHT_STD = 0.02  # the usual init scale of transformer weights
CHUNK_ELEMENTS = 1 << 22  # values generated at once: 8 MB of F16
_TABLE_SIZE = 1 << 16
_TABLE_STREAM = 1 << 32  # seeds the value table apart from every tensor index
_GGUF_FILE_TYPES = {
    "F32": LlamaFileType.ALL_F32,
    "F16": LlamaFileType.MOSTLY_F16,
    "BF16": LlamaFileType.MOSTLY_BF16,
    "Q8_0": LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": LlamaFileType.MOSTLY_Q4_0,
    "Q4_K": LlamaFileType.MOSTLY_Q4_K_M,
    "Q6_K": LlamaFileType.MOSTLY_Q6_K,
}


@dataclass(frozen=True, slots=True)
class PlannedTensor:
    """One tensor of a synthetic model, numpy order (rows first)."""

    index: int  # seeds its values
    name: str
    shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def default_intermediate(hidden: int) -> int:
    """Llama's MLP width: 8/3 of hidden rounded up to a multiple of 256 (a K-quant block);
    11008 for hidden 4096, as in Llama 2 7B."""
    return max(1, -(-hidden * 8 // (3 * 256))) * 256


def _llama_tensors(
    layers: int, hidden: int, intermediate: int, vocab: int
) -> list[tuple[str, str, tuple[int, ...]]]:
    """Llama's tensors in load order: (Hugging Face name, llama.cpp name, numpy shape)."""
    square, up, down = (hidden, hidden), (intermediate, hidden), (hidden, intermediate)
    norm = (hidden,)
    tensors: list[tuple[str, str, tuple[int, ...]]] = [
        ("model.embed_tokens.weight", "token_embd.weight", (vocab, hidden))
    ]
    for n in range(layers):
        hf, cpp = f"model.layers.{n}", f"blk.{n}"
        tensors += [
            (f"{hf}.self_attn.q_proj.weight", f"{cpp}.attn_q.weight", square),
            (f"{hf}.self_attn.k_proj.weight", f"{cpp}.attn_k.weight", square),
            (f"{hf}.self_attn.v_proj.weight", f"{cpp}.attn_v.weight", square),
            (f"{hf}.self_attn.o_proj.weight", f"{cpp}.attn_output.weight", square),
            (f"{hf}.mlp.gate_proj.weight", f"{cpp}.ffn_gate.weight", up),
            (f"{hf}.mlp.up_proj.weight", f"{cpp}.ffn_up.weight", up),
            (f"{hf}.mlp.down_proj.weight", f"{cpp}.ffn_down.weight", down),
            (f"{hf}.input_layernorm.weight", f"{cpp}.attn_norm.weight", norm),
            (f"{hf}.post_attention_layernorm.weight", f"{cpp}.ffn_norm.weight", norm),
        ]
    tensors += [
        ("model.norm.weight", "output_norm.weight", norm),
        ("lm_head.weight", "output.weight", (vocab, hidden)),
    ]
    return tensors


def llama_safetensors_plan(
    layers: int, hidden: int, intermediate: int, vocab: int
) -> list[PlannedTensor]:
    """Hugging Face Llama names and shapes, in load order."""
    tensors = _llama_tensors(layers, hidden, intermediate, vocab)
    return [PlannedTensor(i, name, shape) for i, (name, _, shape) in enumerate(tensors)]


def llama_gguf_plan(layers: int, hidden: int, intermediate: int, vocab: int) -> list[PlannedTensor]:
    """llama.cpp names and shapes (numpy order; GGUF stores them reversed)."""
    tensors = _llama_tensors(layers, hidden, intermediate, vocab)
    return [PlannedTensor(i, name, shape) for i, (_, name, shape) in enumerate(tensors)]


class _ValueTables:
    """N(0, WEIGHT_STD) samples in every dtype we write, indexed by random uint16s."""

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng([seed, _TABLE_STREAM])
        self.f32 = (rng.standard_normal(_TABLE_SIZE) * WEIGHT_STD).astype(np.float32)
        self.f16 = self.f32.astype(np.float16)
        bits = self.f32.view(np.uint32)
        # bfloat16 = the top half of a float32, rounded to nearest even.
        self.bf16 = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)

    def draw(self, rng: np.random.Generator, table: np.ndarray, count: int) -> np.ndarray:
        return np.take(table, rng.integers(0, _TABLE_SIZE, count, dtype=np.uint16))


def _tensor_rng(seed: int, tensor: PlannedTensor) -> np.random.Generator:
    return np.random.default_rng([seed, tensor.index])


def _checked_shape(
    what: str,
    kind: str,
    kinds: Sequence[str],
    layers: int,
    hidden: int,
    intermediate: int | None,
    vocab: int,
) -> int:
    """Refuse an unknown ``kind`` (a dtype, a tensor type) or sizes that make no model;
    return the MLP width, Llama's default for ``hidden`` when none is given."""
    if kind not in kinds:
        raise ValueError(f"{what} {kind!r} is not one of {', '.join(kinds)}")
    intermediate = default_intermediate(hidden) if intermediate is None else intermediate
    if layers < 0 or min(hidden, intermediate, vocab) < 1:
        raise ValueError(
            f"need layers >= 0 and positive sizes, got layers={layers} hidden={hidden} "
            f"intermediate={intermediate} vocab={vocab}"
        )
    return intermediate


# --- safetensors -------------------------------------------------------------------------------

_SAFETENSORS_ITEM_SIZE = {"F32": 4, "F16": 2, "BF16": 2}


def encode_safetensors_header(
    entries: Sequence[tuple[str, str, tuple[int, ...], int]],
    metadata: dict[str, str] | None = None,
) -> bytes:
    """Length prefix + JSON header for ``(name, dtype, shape, nbytes)`` laid out in order.

    As the reference writer does: compact JSON, ``__metadata__`` first, tensors in data
    order, padded with spaces to a multiple of 8 so the data starts aligned.
    """
    header: dict[str, object] = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, dtype, shape, nbytes in entries:
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_safetensors_model(
    directory: str | os.PathLike[str],
    *,
    layers: int = 4,
    hidden: int = 256,
    intermediate: int | None = None,
    vocab: int = 1024,
    dtype: str = "F16",
    shards: int = 1,
    seed: int = 0,
    transformers_config: bool = False,
) -> Path:
    """A Llama-shaped checkpoint in ``directory``: ``model.safetensors``, or with
    ``shards > 1`` the shard files and ``model.safetensors.index.json`` (returned).
    ``transformers_config``: also the ``config.json`` that makes the folder one that
    ``transformers`` loads (``AutoModelForCausalLM.from_pretrained(directory)``)."""
    width = _checked_shape("dtype", dtype, SAFETENSORS_DTYPES, layers, hidden, intermediate, vocab)
    plan = llama_safetensors_plan(layers, hidden, width, vocab)
    if not 1 <= shards <= len(plan):
        raise ValueError(f"shards must be 1..{len(plan)} for {len(plan)} tensors, got {shards}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    if transformers_config:
        config = _transformers_config(layers, hidden, width, vocab, dtype)
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tables = _ValueTables(seed)
    item_size = _SAFETENSORS_ITEM_SIZE[dtype]
    if shards == 1:
        target = folder / "model.safetensors"
        _write_safetensors_file(target, plan, dtype, seed, tables)
        return target
    groups = split_evenly([t.elements * item_size for t in plan], shards)
    weight_map: dict[str, str] = {}
    for number, group in enumerate(groups, start=1):
        shard_name = f"model-{number:05d}-of-{shards:05d}.safetensors"
        shard_tensors = [plan[i] for i in group]
        _write_safetensors_file(folder / shard_name, shard_tensors, dtype, seed, tables)
        weight_map.update((plan[i].name, shard_name) for i in group)
    index = folder / "model.safetensors.index.json"
    total = sum(t.elements for t in plan) * item_size
    index_body = {"metadata": {"total_size": total}, "weight_map": weight_map}
    index.write_text(json.dumps(index_body, indent=2) + "\n")
    return index


_TORCH_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def _transformers_config(
    layers: int, hidden: int, intermediate: int, vocab: int, dtype: str
) -> dict[str, object]:
    """A ``LlamaForCausalLM`` config with the checkpoint's shapes: heads of 64, as many
    key/value heads as query heads (the k and v projections are square)."""
    heads = max(1, hidden // 64)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "vocab_size": vocab,
        "max_position_embeddings": 2048,
        "rms_norm_eps": 1e-5,
        "tie_word_embeddings": False,
        "torch_dtype": _TORCH_DTYPES[dtype],
    }


def split_evenly(sizes: Sequence[int], parts: int) -> list[range]:
    """Split ``sizes`` into ``parts`` non-empty runs of about equal sum, at item boundaries."""
    if not 1 <= parts <= len(sizes):
        raise ValueError(f"cannot split {len(sizes)} items into {parts} parts")
    total = sum(sizes)
    runs: list[range] = []
    start = 0
    done = 0  # bytes in the runs so far
    for part in range(parts - 1):
        goal = total * (part + 1) / parts
        end = start + 1  # every run takes at least one item...
        done += sizes[start]
        # ...and leaves at least one for each later run; it grows while that gets it closer.
        while end < len(sizes) - (parts - 1 - part) and abs(done + sizes[end] - goal) < abs(
            done - goal
        ):
            done += sizes[end]
            end += 1
        runs.append(range(start, end))
        start = end
    runs.append(range(start, len(sizes)))
    return runs


def _write_safetensors_file(
    path: Path, tensors: Sequence[PlannedTensor], dtype: str, seed: int, tables: _ValueTables
) -> None:
    item_size = _SAFETENSORS_ITEM_SIZE[dtype]
    entries = [(t.name, dtype, t.shape, t.elements * item_size) for t in tensors]
    with open(path, "wb") as out:
        out.write(encode_safetensors_header(entries))
        for tensor in tensors:
            rng = _tensor_rng(seed, tensor)
            for chunk in _safetensors_chunks(rng, tables, dtype, tensor.elements):
                out.write(chunk.data)


def _safetensors_chunks(
    rng: np.random.Generator, tables: _ValueTables, dtype: str, elements: int
) -> Iterator[np.ndarray]:
    for start in range(0, elements, CHUNK_ELEMENTS):
        count = min(CHUNK_ELEMENTS, elements - start)
        if dtype == "F32":
            # Full-precision values from the generator itself: 2**16 distinct float32s
            # would compress 2:1 and flatter a compressing filesystem.
            values = rng.standard_normal(count, dtype=np.float32)
            values *= np.float32(WEIGHT_STD)
            yield values.astype("<f4", copy=False)
        else:
            table = tables.f16 if dtype == "F16" else tables.bf16
            yield tables.draw(rng, table, count).astype(table.dtype.newbyteorder("<"), copy=False)


# --- GGUF --------------------------------------------------------------------------------------


def write_gguf_model(
    path: str | os.PathLike[str],
    *,
    layers: int = 4,
    hidden: int = 256,
    intermediate: int | None = None,
    vocab: int = 1024,
    tensor_type: str = "Q8_0",
    seed: int = 0,
    arch: str = "llama",
) -> Path:
    """A llama.cpp-shaped GGUF file: ``tensor_type`` weights, F32 norms, a small tokenizer."""
    width = _checked_shape(
        "tensor_type", tensor_type, GGUF_TENSOR_TYPES, layers, hidden, intermediate, vocab
    )
    weight_type = GGMLQuantizationType[tensor_type]
    block_size = GGML_QUANT_SIZES[weight_type][0]
    if hidden % block_size or width % block_size:
        raise ValueError(
            f"{tensor_type} needs hidden and intermediate to be multiples of {block_size}, "
            f"got {hidden} and {width}"
        )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    plan = llama_gguf_plan(layers, hidden, width, vocab)
    tables = _ValueTables(seed)

    # Written to a side file, then copied into place in large writes. GGUFWriter's many small
    # writes (header, metadata, then tensor by tensor with padding) leave a file whose
    # page-cache reads reach the disk in ~0.8 MB requests instead of ~4 MB (in the benchmarks'
    # blkio cgroup, 150 MiB/s and 200 IOPS: 96 MB/s for such a file, 155 MB/s for a `cp` of
    # the same bytes): the test model would measure how it was written, not the loaders.
    drafted = target.with_name(target.name + ".partial")
    writer = GGUFWriter(drafted, arch)
    try:
        _add_gguf_metadata(writer, layers, hidden, width, vocab, tensor_type)
        # Declare every tensor first and write the data one tensor at a time afterwards:
        # GGUFWriter.add_tensor would keep all of them in RAM until the end.
        types = [GGMLQuantizationType.F32 if len(t.shape) == 1 else weight_type for t in plan]
        for tensor, ggml_type in zip(plan, types, strict=True):
            stored_shape, stored_dtype = _gguf_stored_layout(tensor.shape, ggml_type)
            nbytes = int(np.prod(stored_shape)) * stored_dtype.itemsize
            writer.add_tensor_info(
                tensor.name, stored_shape, stored_dtype, nbytes, raw_dtype=ggml_type
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_ti_data_to_file()
        for tensor, ggml_type in zip(plan, types, strict=True):
            data = _gguf_tensor_data(_tensor_rng(seed, tensor), tables, tensor.shape, ggml_type)
            writer.write_tensor_data(data)
    finally:
        writer.close()
    try:
        shutil.copyfile(drafted, target)
    finally:
        drafted.unlink()
    return target


def _add_gguf_metadata(
    writer: GGUFWriter, layers: int, hidden: int, intermediate: int, vocab: int, tensor_type: str
) -> None:
    writer.add_name(f"modelmon synthetic {layers}x{hidden} {tensor_type}")
    writer.add_block_count(layers)
    writer.add_context_length(2048)
    writer.add_embedding_length(hidden)
    writer.add_feed_forward_length(intermediate)
    writer.add_head_count(max(1, hidden // 64))
    writer.add_head_count_kv(max(1, hidden // 64))
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(int(_GGUF_FILE_TYPES[tensor_type]))
    writer.add_quantization_version(2)
    # A vocabulary like real files carry: readers must walk its arrays before the tensors.
    writer.add_tokenizer_model("llama")
    writer.add_token_list([f"<t{i}>" for i in range(vocab)])
    writer.add_token_scores([float(-i) for i in range(vocab)])
    writer.add_token_types([1] * vocab)


def _gguf_stored_layout(
    shape: tuple[int, ...], ggml_type: GGMLQuantizationType
) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of the array we hand GGUFWriter (quantized: bytes per row)."""
    if ggml_type == GGMLQuantizationType.F32:
        return shape, np.dtype(np.float32)
    if ggml_type == GGMLQuantizationType.F16:
        return shape, np.dtype(np.float16)
    if ggml_type == GGMLQuantizationType.BF16:
        return shape, np.dtype(np.uint16)  # raw bfloat16 bits
    return quants.quant_shape_to_byte_shape(shape, ggml_type), np.dtype(np.uint8)


def _gguf_tensor_data(
    rng: np.random.Generator,
    tables: _ValueTables,
    shape: tuple[int, ...],
    ggml_type: GGMLQuantizationType,
) -> np.ndarray:
    """One tensor's stored array, generated a bounded number of rows at a time."""
    stored_shape, stored_dtype = _gguf_stored_layout(shape, ggml_type)
    if ggml_type in (GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K):
        # gguf-py can dequantize K-quants but not quantize them. Random bytes of the exact
        # quantized size load exactly like real ones (block scales may decode to NaN/inf,
        # which no byte-level load test looks at).
        return rng.integers(0, 256, stored_shape, dtype=np.uint8)
    out = np.empty(stored_shape, stored_dtype)
    if ggml_type == GGMLQuantizationType.F32 and len(shape) == 1:
        out[...] = 1.0 + tables.draw(rng, tables.f32, out.size)  # norm weights sit near 1
        return out
    rows_out = out.reshape(-1, out.shape[-1])
    columns = shape[-1]
    step = max(1, CHUNK_ELEMENTS // columns)
    for row in range(0, rows_out.shape[0], step):
        block = rows_out[row : row + step]
        count = block.shape[0] * columns
        if ggml_type == GGMLQuantizationType.F32:
            block[...] = rng.standard_normal(block.shape, dtype=np.float32) * WEIGHT_STD
        elif ggml_type == GGMLQuantizationType.F16:
            block[...] = tables.draw(rng, tables.f16, count).reshape(block.shape)
        elif ggml_type == GGMLQuantizationType.BF16:
            block[...] = tables.draw(rng, tables.bf16, count).reshape(block.shape)
        else:  # Q8_0, Q4_0: real quantization by gguf-py (numpy)
            source = tables.draw(rng, tables.f32, count).reshape(block.shape[0], columns)
            block[...] = quants.quantize(source, ggml_type)
    return out
