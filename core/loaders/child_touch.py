"""Touching what a load loaded: one byte of every 4 KiB page, so that a lazy mapping that read
nothing cannot pass for a load. Part of the child harness (``child.py``): plain Python that
never imports modelmon."""

from __future__ import annotations

import ctypes
import importlib
import os
from collections.abc import Iterator
from typing import Any

PAGE = 4096


def touch_array(array: Any) -> int:
    """Read one byte of every page of a numpy array; its bytes."""
    import numpy as np

    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    int(flat[::PAGE].sum(dtype=np.uint64))
    return int(flat.nbytes)


def touch_tensors(tensors: Iterator[Any]) -> tuple[int, int]:
    """Read one byte of every page of each torch tensor or numpy array; (bytes, tensors).
    The bytes are those of the union of the tensors' spans of memory: tied weights count
    once, and views that share one buffer (fastsafetensors' tensors lie side by side in the
    buffer it read the file into) count each its own part of it."""
    spans: set[tuple[int, int]] = set()
    touched = count = 0
    for tensor in tensors:
        count += 1
        if type(tensor).__module__.startswith("numpy"):
            touched += touch_array(tensor)
            continue
        if tensor.device.type != "cpu":  # meta tensors hold no bytes
            continue
        size = tensor.numel() * tensor.element_size()
        span = (tensor.data_ptr(), tensor.data_ptr() + size)
        if not size or span in spans:  # tied weights: one span, touched once
            continue
        spans.add(span)
        torch = importlib.import_module("torch")
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        int(data[::PAGE].sum())
    return touched + union_bytes(spans), count


def union_bytes(spans: set[tuple[int, int]]) -> int:
    """Bytes covered by (start, end) spans, each byte once."""
    total, reached = 0, 0
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def touch_mappings(path: str) -> int:
    """Read one byte of every page of this process's readable mappings of ``path``."""
    real = os.path.realpath(path)
    touched = 0
    with open("/proc/self/maps") as maps:
        lines = maps.read().splitlines()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[5] != real or "r" not in fields[1]:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        mapped = memoryview((ctypes.c_uint8 * (end - start)).from_address(start)).cast("B")
        touched += touch_array(mapped)
    return touched
