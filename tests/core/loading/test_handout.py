"""A worker's handout: its tensors as its parent parsed them, never the header parsed again,
and memory in proportion to the tensors it is handed."""

from __future__ import annotations

import os
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.errors import LoadError
from modelmon.core.loading.fills import Fills, tiled_checksums
from modelmon.core.loading.handout import Handout, ModelPart, hand_out
from modelmon.core.loading.runner import LoadRun
from modelmon.core.model.formats import open_model
from modelmon.core.model.plan import partition
from modelmon.core.model.synth import encode_safetensors_header
from modelmon.core.options import LoadOptions


def test_a_part_is_its_tensors_as_the_parent_parsed_them(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    share = partition(model, 3, "round-robin")[1]
    handout = Handout(ModelPart.of(model, share))
    part = handout.take().model()
    assert part.extents == tuple(model.extents[i] for i in share)
    assert part.files == model.files  # every file: the read log's file indexes hold
    assert (part.path, part.format) == (model.path, model.format)
    shapes = {}
    for extent in part.extents:  # one shape object for all tensors of a kind
        assert shapes.setdefault(extent.shape, extent.shape) is extent.shape


def test_one_handout_of_everything_serves_every_worker_of_shared_work(
    sharded_model: Path,
) -> None:
    """Workers that share their work are handed one memfd: each reads it whole, whatever the
    others read of it meanwhile (no shared file offset)."""
    model = open_model(sharded_model)
    handouts = hand_out(model, 2, None)
    assert handouts[0] is handouts[1]
    copies = [as_received(handouts[0]) for _ in range(2)]
    handouts[0].close()
    assert [copy.take().model().extents for copy in copies] == [model.extents] * 2


def as_received(handout: Handout) -> Handout:
    """The handout as a spawned worker gets it: its own duplicate of the memfd."""
    copy = Handout.__new__(Handout)
    copy._fd = os.dup(handout._fd)
    return copy


def many_tensor_model(folder: Path, count: int) -> Path:
    """A safetensors file of ``count`` one-byte tensors: a header of ~60 bytes a tensor."""
    path = folder / "many.safetensors"
    header = encode_safetensors_header([(f"t{i}", "U8", (1,), 1) for i in range(count)])
    path.write_bytes(header + bytes(range(256)) * (count // 256) + bytes(count % 256))
    return path


def test_a_worker_holds_memory_for_its_share_only(tmp_path: Path) -> None:
    """A header of 100 000 tensors: a worker handed half of them holds about half of what one
    handed all holds, and a few hundred bytes a tensor (parsing the header took a kilobyte
    a tensor, per worker, whatever its share)."""
    model = open_model(many_tensor_model(tmp_path, 100_000))
    held = {}
    for name, share in (("half", partition(model, 2, "contiguous")[0]), ("all", range(100_000))):
        handout = Handout(ModelPart.of(model, share))
        tracemalloc.start()
        try:
            part = handout.take().model()
            held[name], _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(part.extents) == len(share)
        assert held[name] / len(share) < 300, held
        del part
    assert held["half"] < 0.6 * held["all"], held


def test_workers_load_what_their_parent_planned_without_the_header(tmp_path: Path) -> None:
    """The header is overwritten (same size) after the parent parsed it: the workers never
    read it, so the load is of the tensors as planned, every one checksummed."""
    path = many_tensor_model(tmp_path, 5000)
    model = open_model(path)
    header_end = 8 + int.from_bytes(path.read_bytes()[:8], "little")
    with open(path, "r+b") as file:
        file.seek(8)
        file.write(b"!" * (header_end - 8))
    for strategy in ("sequential", "mmap-shared-fd"):  # shared work; fixed shares
        options = LoadOptions(workers=2, threads=2, verify=True, cache="keep")
        result = LoadRun(model, strategy, options).run()
        assert result.status == "ok", result.error
        assert result.bytes == 5000
        data = path.read_bytes()[header_end:]
        assert result.tensor_checksums["t300"] == zlib.crc32(data[300:301])


def test_a_file_resized_after_planning_is_refused(tmp_path: Path) -> None:
    path = many_tensor_model(tmp_path, 100)
    model = open_model(path)
    with open(path, "ab") as file:
        file.write(b"\0" * 10)
    result = LoadRun(model, "sequential", LoadOptions(workers=2, cache="keep")).run()
    assert result.status == "failed"
    assert "changed between planning and loading" in (result.error or "")


def rows_of(model_path: Path, pieces: list[list[tuple[int, int, int]]]) -> list[np.ndarray]:
    """Each worker's span rows after filling ``pieces`` (tensor, start, end) of the model."""
    model = open_model(model_path)
    data = model_path.read_bytes()
    found = []
    for mine in pieces:
        fills = Fills(model, range(len(model.extents)), verify=True)
        for tensor, start, end in mine:
            offset = model.extents[tensor].offset
            fills.filled(tensor, start, data[offset + start : offset + end])
        found.append(fills.rows())
    return found


def test_the_workers_spans_tile_the_model_checked_over_whole_columns(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    entries = [(f"t{i}", "U8", (64,), 64) for i in range(4)]
    path.write_bytes(encode_safetensors_header(entries) + bytes(range(256)))
    model = open_model(path)
    data = path.read_bytes()
    crcs = {e.name: zlib.crc32(data[e.offset : e.end]) for e in model.extents}
    whole = [[(0, 0, 64), (1, 0, 64)], [(2, 0, 64), (3, 0, 64)]]
    assert tiled_checksums(model, rows_of(path, whole), verify=True) == crcs
    split = [[(0, 0, 64), (1, 0, 10), (2, 0, 64)], [(1, 10, 64), (3, 0, 30), (3, 30, 64)]]
    assert tiled_checksums(model, rows_of(path, split), verify=True) == crcs
    assert tiled_checksums(model, rows_of(path, split), verify=False) == {}
    broken = {
        "bytes 10-20 skipped": [[(0, 0, 64), (1, 0, 10), (2, 0, 64)], [(1, 20, 64), (3, 0, 64)]],
        "bytes 5-10 read twice": [[(0, 0, 64), (1, 0, 10), (2, 0, 64)], [(1, 5, 64), (3, 0, 64)]],
        "0 of 64 bytes loaded": [[(0, 0, 64), (1, 0, 64)], [(2, 0, 64)]],
        "bytes 0-64 read twice": [[(0, 0, 64), (1, 0, 64), (2, 0, 64)], [(2, 0, 64), (3, 0, 64)]],
    }
    for problem, pieces in broken.items():
        with pytest.raises(LoadError, match=problem):
            tiled_checksums(model, rows_of(path, pieces), verify=False)
