"""Shapes a loader can allocate: checked when a file is parsed, so ``inspect`` refuses what
every load would fail on later with a numpy message that names no tensor."""

from __future__ import annotations

import math
from collections.abc import Sequence

MAX_ARRAY_DIMS = 64  # numpy's NPY_MAXDIMS (numpy 2)
INTPTR_LIMIT = 1 << 63  # numpy sizes arrays in npy_intp: dims, and their product in bytes


def array_shape_problem(shape: Sequence[int], itemsize: int) -> str | None:
    """Why numpy could not make an array of ``shape`` × ``itemsize``-byte items, or None.

    numpy multiplies the non-zero dimensions and the item size with an overflow check (a zero
    dimension does not save the product), so that product must stay below 2**63.
    """
    if len(shape) > MAX_ARRAY_DIMS:
        return f"{len(shape)} dimensions (numpy allows {MAX_ARRAY_DIMS})"
    if math.prod(dim for dim in shape if dim) * itemsize >= INTPTR_LIMIT:
        return f"absurd shape {list(shape)[:8]}{'...' if len(shape) > 8 else ''} (past int64)"
    return None
