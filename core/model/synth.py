"""Realistic synthetic checkpoints for tests, the demo model and benchmarks.

Both writers stream tensor by tensor (GGUF, ``synth_gguf``) or chunk by chunk (safetensors),
so a 2 GB model never sits in RAM. Values are deterministic for a seed: each tensor draws from its
own generator, seeded with ``(seed, tensor index)``.

Speed: numpy's float32 → float16 cast runs at ~15 M values/s on some CPUs, far too slow
for gigabytes. So values come from a 65536-entry table of N(0, 0.02) samples, already in
the target dtype, indexed by random uint16s (~200 M values/s): exact normal samples,
only drawn from a finite pool.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SAFETENSORS_DTYPES = ("F32", "F16", "BF16")
GGUF_TENSOR_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K")
WEIGHT_STD = 0.02  # the usual init scale of transformer weights
CHUNK_ELEMENTS = 1 << 22  # values generated at once: 8 MB of F16
_TABLE_SIZE = 1 << 16
_TABLE_STREAM = 1 << 32  # seeds the value table apart from every tensor index


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


class ValueTables:
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


def tensor_rng(seed: int, tensor: PlannedTensor) -> np.random.Generator:
    return np.random.default_rng([seed, tensor.index])


def checked_shape(
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
    width = checked_shape("dtype", dtype, SAFETENSORS_DTYPES, layers, hidden, intermediate, vocab)
    plan = llama_safetensors_plan(layers, hidden, width, vocab)
    if not 1 <= shards <= len(plan):
        raise ValueError(f"shards must be 1..{len(plan)} for {len(plan)} tensors, got {shards}")
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    if transformers_config:
        config = _transformers_config(layers, hidden, width, vocab, dtype)
        (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tables = ValueTables(seed)
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
    path: Path, tensors: Sequence[PlannedTensor], dtype: str, seed: int, tables: ValueTables
) -> None:
    item_size = _SAFETENSORS_ITEM_SIZE[dtype]
    entries = [(t.name, dtype, t.shape, t.elements * item_size) for t in tensors]
    with open(path, "wb") as out:
        out.write(encode_safetensors_header(entries))
        for tensor in tensors:
            rng = tensor_rng(seed, tensor)
            for chunk in _safetensors_chunks(rng, tables, dtype, tensor.elements):
                out.write(chunk.data)


def _safetensors_chunks(
    rng: np.random.Generator, tables: ValueTables, dtype: str, elements: int
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
