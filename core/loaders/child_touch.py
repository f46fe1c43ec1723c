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
    """Read one byte of every page of each torch tensor or numpy array; (bytes, tensors)."""
    seen: set[tuple[int, int]] = set()
    touched = count = 0
    for tensor in tensors:
        count += 1
        if type(tensor).__module__.startswith("numpy"):
            touched += touch_array(tensor)
            continue
        if tensor.device.type != "cpu":  # meta tensors hold no bytes
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        if key in seen:  # tied weights: one storage, touched once
            continue
        seen.add(key)
        torch = importlib.import_module("torch")
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        int(data[::PAGE].sum())
        touched += int(data.numel())
    return touched, count


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
