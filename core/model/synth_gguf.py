"""Synthetic GGUF checkpoints, llama.cpp-shaped: the plan and values of ``synth``, written
tensor by tensor through gguf-py (quantized by it where it can), so a large model never sits
in RAM."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, LlamaFileType, quants

from modelmon.core.model.synth import (
    CHUNK_ELEMENTS,
    GGUF_TENSOR_TYPES,
    WEIGHT_STD,
    ValueTables,
    checked_shape,
    llama_gguf_plan,
    tensor_rng,
)

_GGUF_FILE_TYPES = {
    "F32": LlamaFileType.ALL_F32,
    "F16": LlamaFileType.MOSTLY_F16,
    "BF16": LlamaFileType.MOSTLY_BF16,
    "Q8_0": LlamaFileType.MOSTLY_Q8_0,
    "Q4_0": LlamaFileType.MOSTLY_Q4_0,
    "Q4_K": LlamaFileType.MOSTLY_Q4_K_M,
    "Q6_K": LlamaFileType.MOSTLY_Q6_K,
}


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
    width = checked_shape(
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
    tables = ValueTables(seed)

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
            data = _gguf_tensor_data(tensor_rng(seed, tensor), tables, tensor.shape, ggml_type)
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
    tables: ValueTables,
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
