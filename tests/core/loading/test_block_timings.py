"""Block timings and the model summary, computed column-wise, agree with the plain per-tensor
computations (each read against each tensor it overlaps; a loop over the tensors), for any
reads over a model of several files."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from modelmon.core.loading.result import block_share_timings, block_timings
from modelmon.core.model.records import Model, ModelFile, TensorExtent
from modelmon.core.output.text import model_summary

BLOCKS = ["embeddings", "model.layers.0", "model.layers.1", "head", "other"]


def model_of(lengths: list[int], blocks: list[int]) -> Model:
    """Tensors laid end to end, alternating between two files."""
    extents, ends = [], [0, 0]
    for number, (length, block) in enumerate(zip(lengths, blocks, strict=True)):
        file = number % 2
        extents.append(
            TensorExtent(
                f"t{number}", f"f{file}", ends[file], length, "U8", (length,), BLOCKS[block],
                "|u1", (length,),
            )
        )  # fmt: skip
        ends[file] += length
    files = (ModelFile("f0", ends[0]), ModelFile("f1", ends[1]))
    return Model("m", "safetensors", files, tuple(extents))


def plain_timings(model: Model, reads: dict[str, np.ndarray], t0: int) -> list[tuple]:
    """Each block: its bytes, and the first start and last end of the reads touching it."""
    touched: dict[str, list[int]] = {}
    for row in range(len(reads["file"])):
        if reads["prefetch"][row]:
            continue
        begin, end = int(reads["offset"][row]), int(reads["offset"][row] + reads["length"][row])
        for extent in model.extents:
            same_file = extent.file == f"f{int(reads['file'][row])}"
            if same_file and extent.offset < end and begin < extent.end:
                span = touched.setdefault(extent.block, [2**62, 0])
                span[0] = min(span[0], int(reads["start"][row]))
                span[1] = max(span[1], int(reads["end"][row]))
    totals = {name: sum(e.length for e in model.extents if e.block == name) for name in BLOCKS}
    return [
        (name, totals[name], (touched[name][0] - t0) / 1e9, (touched[name][1] - t0) / 1e9)
        for name in BLOCKS
        if name in touched
    ]


@settings(max_examples=60, deadline=None)
@given(
    tensors=st.lists(st.tuples(st.integers(1, 50), st.integers(0, 4)), min_size=1, max_size=12),
    reads=st.lists(
        st.tuples(st.integers(0, 1), st.integers(0, 300), st.integers(1, 120), st.booleans()),
        max_size=10,
    ),
)
def test_block_timings_agree_with_the_plain_computation(
    tensors: list[tuple[int, int]], reads: list[tuple[int, int, int, bool]]
) -> None:
    model = model_of([length for length, _ in tensors], [block for _, block in tensors])
    log = {
        "file": np.array([r[0] for r in reads], dtype=np.int64),
        "offset": np.array([r[1] for r in reads], dtype=np.int64),
        "length": np.array([r[2] for r in reads], dtype=np.int64),
        "prefetch": np.array([r[3] for r in reads], dtype=bool),
        "start": np.arange(len(reads), dtype=np.int64) * 10 + 1000,
        "end": np.arange(len(reads), dtype=np.int64) * 10 + 1005,
        "worker": np.zeros(len(reads), dtype=np.int64),
    }
    timings = block_timings(model, log, 1000)
    expected = plain_timings(model, log, 1000)
    assert sorted((t.name, t.bytes, t.start, t.end) for t in timings) == sorted(expected)
    shares = block_share_timings(model, log, 1000)
    assert [(s.block, s.start, s.end) for s in shares] == [
        (t.name, t.start, t.end) for t in timings
    ]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 90), st.integers(0, 4)), min_size=0, max_size=15))
def test_model_summary_sums_per_dtype_and_block_as_a_plain_loop(tensors: list[tuple[int, int]]):
    model = model_of([length for length, _ in tensors], [block for _, block in tensors])
    summary = model_summary(model)
    blocks: dict[str, int] = {}
    for extent in model.extents:
        blocks[extent.block] = blocks.get(extent.block, 0) + extent.length
    assert summary["blocks"] == [{"name": name, "bytes": n} for name, n in blocks.items()]
    total = sum(e.length for e in model.extents)
    assert summary["dtypes"] == (
        {"U8": {"tensors": len(tensors), "bytes": total}} if tensors else {}
    )
