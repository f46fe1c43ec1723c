"""A safetensors model whose data is a hole, for tests of memory: reading it fills the page
cache with zeroed pages at memory speed and writes nothing to the disk, so a test can stream
a file larger than the memory it allows without the I/O of one."""

from __future__ import annotations

from pathlib import Path

from modelmon.core.model.synth import encode_safetensors_header


def sparse_model(folder: Path, tensors: int, tensor_bytes: int) -> Path:
    """``folder/model.safetensors``: ``tensors`` U8 tensors of ``tensor_bytes``, all zero."""
    entries = [
        (f"model.layers.{i}.weight", "U8", (tensor_bytes,), tensor_bytes) for i in range(tensors)
    ]
    header = encode_safetensors_header(entries)
    path = folder / "model.safetensors"
    with open(path, "wb") as out:
        out.write(header)
        out.truncate(len(header) + tensors * tensor_bytes)
    return path
