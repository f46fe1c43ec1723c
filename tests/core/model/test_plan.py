"""The planner: partitions cover every tensor once; coalesced reads cover every byte once."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelmon.core.model.blocks import block_of
from modelmon.core.model.formats import open_model
from modelmon.core.model.plan import (
    IOV_MAX,
    ShareQueue,
    coalesce,
    in_load_order,
    load_order,
    partition,
    split_contiguous,
)
from modelmon.core.model.records import Model, ModelFile, TensorExtent


def fake_model(lengths: list[int], gaps: list[int] | None = None, files: int = 1) -> Model:
    extents, position = [], 0
    gaps = gaps or [0] * len(lengths)
    per_file = -(-len(lengths) // files)
    for i, (length, gap) in enumerate(zip(lengths, gaps, strict=True)):
        if i % per_file == 0:
            position = 0
        position += gap
        name = f"blk.{i}.w"
        extents.append(
            TensorExtent(
                name,
                f"f{i // per_file}",
                position,
                length,
                "U8",
                (length,),
                block_of(name),
                "uint8",
                (length,),
            )
        )
        position += length
    paths = sorted({e.file for e in extents})
    return Model("m", "safetensors", tuple(ModelFile(p, 10**12) for p in paths), tuple(extents))


def covered_bytes(model: Model, reads: list) -> dict[int, list[tuple[int, int]]]:
    seen: dict[int, list[tuple[int, int]]] = {}
    for read in reads:
        assert sum(p.length for p in read.pieces) == read.length
        position = read.offset
        for piece in read.pieces:
            if piece.extent >= 0:
                extent = model.extents[piece.extent]
                assert extent.offset + piece.start == position  # pieces tile the read
                seen.setdefault(piece.extent, []).append((piece.start, piece.length))
            position += piece.length
    return seen


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 5000), min_size=1, max_size=60),
    gap=st.integers(0, 100),
    chunk=st.integers(1, 9000),
    workers=st.integers(1, 8),
    files=st.integers(1, 3),
)
def test_every_byte_read_exactly_once_in_order(
    lengths: list[int], gap: int, chunk: int, workers: int, files: int
) -> None:
    model = fake_model(lengths, [gap] * len(lengths), files=min(files, len(lengths)))
    parts = partition(model, workers, "contiguous")
    assert sorted(i for part in parts for i in part) == list(range(len(lengths)))
    for part in parts:
        reads = coalesce(model, part, chunk)
        assert all(r.length <= chunk and len(r.pieces) <= IOV_MAX for r in reads)
        seen = covered_bytes(model, reads)
        for index in part:
            pieces = seen.get(index, [])
            position = 0
            for start, length in pieces:  # in order, without holes or overlaps
                assert start == position
                position += length
            assert position == model.extents[index].length


def test_contiguous_partition_is_balanced_and_ordered() -> None:
    model = fake_model([100] * 40)
    parts = partition(model, 4, "contiguous")
    assert [len(p) for p in parts] == [10, 10, 10, 10]
    assert [i for p in parts for i in p] == load_order(model)


def test_round_robin_deals_in_offset_order() -> None:
    model = fake_model([10] * 7)
    assert partition(model, 3, "round-robin") == [[0, 3, 6], [1, 4], [2, 5]]


def test_big_tensor_goes_to_the_part_holding_its_middle() -> None:
    model = fake_model([10, 1000, 10, 10])
    parts = split_contiguous(model, load_order(model), 2)
    assert parts == [[0, 1], [2, 3]]


def test_many_tiny_tensors_respect_iov_max() -> None:
    model = fake_model([1] * (IOV_MAX * 2 + 5))
    reads = coalesce(model, range(len(model.extents)), 1 << 20)
    assert [len(r.pieces) for r in reads] == [IOV_MAX, IOV_MAX, 5]


def test_large_gap_splits_runs() -> None:
    model = fake_model([10, 10], gaps=[0, 1 << 20])
    assert len(coalesce(model, [0, 1], 1 << 30)) == 2


def test_plan_of_real_sharded_model(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    parts = partition(model, 4, "contiguous")
    reads = [r for part in parts for r in coalesce(model, part, 1 << 20)]
    assert sum(r.length for r in reads) == model.total_bytes  # safetensors has no gaps


@pytest.mark.parametrize("workers", [1, 3, 64])
def test_more_workers_than_tensors(workers: int) -> None:
    model = fake_model([5, 5])
    parts = partition(model, workers, "contiguous")
    assert len(parts) == workers and sorted(i for p in parts for i in p) == [0, 1]


@settings(max_examples=80, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    chunk=st.integers(1, 3000),
    readers=st.integers(1, 6),
    turns=st.lists(st.integers(0, 5), max_size=400),
)
def test_read_queue_hands_out_every_read_once_in_runs(
    lengths: list[int], chunk: int, readers: int, turns: list[int]
) -> None:
    """Whatever order the readers come back in, every read goes to exactly one of them, and
    each reader's reads form ascending runs (one run per share it started or took)."""
    model = fake_model(lengths, files=min(2, len(lengths)))
    reads = coalesce(model, range(len(model.extents)), chunk)
    queue = ShareQueue.of_reads(reads, readers)
    taken: dict[int, list[int]] = {r: [] for r in range(readers)}
    active = list(range(readers))
    position = {id(read): n for n, read in enumerate(reads)}
    for turn in itertools.chain(turns, itertools.cycle(range(readers))):  # then round-robin
        if not active:
            break
        reader = active[turn % len(active)]
        read = queue.take(reader)
        if read is None:
            active.remove(reader)
        else:
            taken[reader].append(position[id(read)])
    assert sorted(n for got in taken.values() for n in got) == list(range(len(reads)))


def runs_of(indexes: list[int]) -> int:
    """How many sequential runs (n, n+1, n+2...) a reader's reads make."""
    return len(indexes) and 1 + sum(b != a + 1 for a, b in itertools.pairwise(indexes))


def test_readers_finish_together_on_one_big_tensor() -> None:
    """Four readers, one of them three times as fast: the fast one steals, all stay busy."""
    model = fake_model([64 << 20])
    reads = coalesce(model, [0], 1 << 20)
    queue = ShareQueue.of_reads(reads, 4)
    done: dict[int, list[int]] = {r: [] for r in range(4)}
    clock = {r: 0.0 for r in range(4)}
    finished: dict[int, float] = {}
    while True:
        reader = min(clock, key=clock.__getitem__)
        read = queue.take(reader)
        if read is None:
            finished[reader] = clock.pop(reader)
            if not clock:
                break
            continue
        done[reader].append(reads.index(read))
        clock[reader] += 1 / 3 if reader == 0 else 1
    count = {r: len(got) for r, got in done.items()}
    assert sum(count.values()) == len(reads) == 64
    assert count[0] > 2 * max(count[r] for r in (1, 2, 3))  # the fast reader took more
    assert max(finished.values()) - min(finished.values()) <= 1  # within one (slow) read
    # The slow readers stream their share in one run; the fast one makes a few long hops.
    assert [runs_of(done[r]) for r in (1, 2, 3)] == [1, 1, 1] and runs_of(done[0]) <= 8


def test_tensor_shares_start_contiguous_in_file_order() -> None:
    model = fake_model([100] * 8, files=2)
    queue = ShareQueue.of_tensors(model, [7, 3, 1, 0, 2, 6, 5, 4], 2)
    assert [queue.take(0) for _ in range(4)] == [0, 1, 2, 3]  # reader 0: the first half
    assert queue.take(1) == 4  # reader 1 starts on the second half
    # Reader 0 is done first: it takes the back half of reader 1's rest (7), then again (6).
    assert [queue.take(0) for _ in range(2)] == [7, 6]
    assert queue.take(1) == 5 and queue.take(1) is None and queue.take(0) is None


def split_one_by_one(model: Model, indexes: list[int], parts: int) -> list[list[int]]:
    """``split_contiguous`` as a loop over the tensors: each to the part holding its middle."""
    result: list[list[int]] = [[] for _ in range(parts)]
    lengths = [model.extents[i].length for i in indexes]
    total, seen = sum(lengths), 0
    for n, (index, length) in enumerate(zip(indexes, lengths, strict=True)):
        part = n % parts if total == 0 else min(parts - 1, int((seen + length / 2) * parts / total))
        result[part].append(index)
        seen += length
    return result


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.sampled_from([0, 0, 1, 7, 4096, 10**9, 3 * 10**12]), max_size=40),
    parts=st.integers(1, 9),
    files=st.integers(1, 3),
    shuffle=st.randoms(use_true_random=False),
)
def test_load_order_and_split_as_one_tensor_at_a_time(
    lengths: list[int], parts: int, files: int, shuffle: random.Random
) -> None:
    """The whole-column load order and split are the sort by (file, offset) and the loop
    over the tensors, also from a shuffled order and with empty tensors at one offset."""
    model = fake_model(lengths or [0], files=min(files, len(lengths) or 1))
    indexes = list(range(len(model.extents)))
    shuffle.shuffle(indexes)
    files_order = {f.path: n for n, f in enumerate(model.files)}
    extents = model.extents
    expected = sorted(indexes, key=lambda i: (files_order[extents[i].file], extents[i].offset))
    assert in_load_order(model, indexes) == expected
    assert split_contiguous(model, expected, parts) == split_one_by_one(model, expected, parts)
