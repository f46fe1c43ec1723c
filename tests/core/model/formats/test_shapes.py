"""Shapes numpy can allocate: the check every format's parser runs on each tensor."""

from __future__ import annotations

import numpy as np
import pytest

from modelmon.core.model.formats.shapes import MAX_ARRAY_DIMS, array_shape_problem


@pytest.mark.parametrize(
    ("shape", "itemsize"),
    [((), 4), ((0,), 4), ((3, 5), 2), ((1,) * MAX_ARRAY_DIMS, 1), ((0, 1 << 40, 4), 2)],
)
def test_shapes_numpy_allocates_pass(shape: tuple[int, ...], itemsize: int) -> None:
    assert array_shape_problem(shape, itemsize) is None
    if 0 in shape or not shape:  # small enough to allocate here: numpy agrees
        assert np.empty(shape, dtype=f"u{itemsize}").size == int(np.prod(shape))


@pytest.mark.parametrize(
    ("shape", "itemsize", "says"),
    [
        ((1,) * (MAX_ARRAY_DIMS + 1), 1, "65 dimensions"),
        ((0, 1 << 62, 4), 4, "absurd shape"),  # the zero does not save numpy's product
        ((1 << 63,), 1, "absurd shape"),
    ],
)
def test_shapes_numpy_refuses_are_refused(shape: tuple[int, ...], itemsize: int, says: str):
    problem = array_shape_problem(shape, itemsize)
    assert problem is not None and says in problem
    with pytest.raises((ValueError, OverflowError, MemoryError)):
        np.empty(shape, dtype=f"u{itemsize}")
