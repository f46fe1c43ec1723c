"""A tensor-parallel rank's part of each tensor, as engines shard a checkpoint: loaded by
each strategy in this process and held against numpy's slices of the library's own load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from modelmon.core.loading.inproc import load_in_process
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.tensor_parallel import ROW_PARALLEL, kept_bytes, tp_slice
from modelmon.core.options import LoadOptions

RANKS = 3  # splits 32 rows unevenly: the last rank's part is shorter, as engines cut it


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_safetensors_model(
        tmp_path_factory.mktemp("tp"), layers=2, hidden=32, vocab=64, shards=2, seed=5
    )


def expected(full: np.ndarray, name: str, rank: int) -> np.ndarray:
    if full.ndim < 2:
        return full
    axis = 1 if ROW_PARALLEL.search(name) else 0
    per = -(-full.shape[axis] // RANKS)
    part = slice(rank * per, (rank + 1) * per)
    return full[:, part] if axis else full[part]


@pytest.mark.parametrize("strategy", ["sequential", "pread", "mmap", "mmap-view", "direct"])
def test_each_rank_loads_its_part_of_every_tensor(model: Path, strategy: str) -> None:
    opened = open_model(model)
    whole = {name: array for f in opened.files for name, array in load_file(f.path).items()}
    for rank in range(RANKS):
        got = load_in_process(opened, strategy, LoadOptions(cache="keep"), rank=(rank, RANKS))
        assert set(got) == set(whole)
        for name, array in got.items():
            want = expected(whole[name], name, rank)
            assert array.shape == want.shape and np.array_equal(array, want), name


def test_a_rank_reads_its_rows_and_strided_tensors_whole(model: Path) -> None:
    opened = open_model(model)
    part, kept = tp_slice(opened, 1, RANKS)
    assert tp_slice(opened, 0, 1) == (opened, {})
    by_name = {e.name: e for e in opened.extents}
    for extent in part.extents:
        full = by_name[extent.name]
        if extent.name in kept:  # row-parallel: read whole, a stretch of every row kept
            assert ROW_PARALLEL.search(extent.name) and extent == full
        elif len(full.array_shape) >= 2:  # column-parallel: one range of its rows
            assert full.offset <= extent.offset and extent.end <= full.end
            assert extent.length < full.length
    assert kept_bytes(part, kept) < opened.total_bytes / 2
    with pytest.raises(ValueError, match="rank 3"):
        tp_slice(opened, 3, RANKS)
