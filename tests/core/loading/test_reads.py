"""ReadLog: the reads of a run as columns, whole or by cursor, while they are still coming in."""

from __future__ import annotations

import threading

import numpy as np

from modelmon.core.loading.messages import ReadBatch
from modelmon.core.loading.reads import (
    READER_BITS,
    DescriptorSharing,
    DescriptorTally,
    ReadLog,
    ReadRecorder,
    descriptor_sharing,
    new_descriptor_id,
)


def batch(worker: int, first: int, reads: int, prefetch: bool = False) -> ReadBatch:
    """``reads`` reads numbered from ``first``: read i at offset i·4096, 4096 long, time i."""
    numbers = range(first, first + reads)
    return ReadBatch(
        worker,
        tuple(i % 2 for i in numbers),
        tuple(i * 4096 for i in numbers),
        (4096,) * reads,
        tuple(numbers),
        tuple(i + 1 for i in numbers),
        prefetch,
    )


def test_columns_since_a_cursor_take_whole_batches_up_to_the_bound():
    log = ReadLog()
    for index in range(5):
        log.add(batch(index % 2, 10 * index, 10, prefetch=index == 4))
    assert (log.count, log.bytes) == (50, 40 * 4096)  # prefetch reads are not load bytes
    first, cursor = log.columns_since(0, max_reads=15)
    assert cursor == 20  # 15 reads end inside the second batch: it comes whole
    assert first["start"].tolist() == list(range(20))
    rest, cursor = log.columns_since(cursor)
    assert cursor == 50 and rest["start"].tolist() == list(range(20, 50))
    assert rest["worker"].tolist() == [0] * 10 + [1] * 10 + [0] * 10
    assert rest["prefetch"].tolist() == [False] * 20 + [True] * 10
    nothing, same = log.columns_since(cursor)
    assert same == 50 and all(len(column) == 0 for column in nothing.values())
    whole = log.columns()
    assert whole["offset"].tolist() == [i * 4096 for i in range(50)]
    assert whole["file"].dtype == np.int32 and whole["end"].dtype == np.int64
    log.add(batch(1, 50, 3))  # a read after the whole was built: the next ask includes it
    assert log.columns()["start"].tolist() == list(range(53))
    assert log.columns_since(48)[0]["start"].tolist() == [48, 49, 50, 51, 52]


def test_a_reader_by_cursor_sees_every_read_once_while_batches_come_in():
    log = ReadLog()
    batches, size = 3000, 7

    def receive() -> None:
        for index in range(batches):
            log.add(batch(index % 4, index * size, size))

    receiver = threading.Thread(target=receive)
    receiver.start()
    seen, cursor = [], 0
    while receiver.is_alive() or cursor < log.count:
        columns, cursor = log.columns_since(cursor, max_reads=500)
        assert len(columns["start"]) <= 500 + size
        seen.append(columns["start"])
    receiver.join()
    assert np.concatenate(seen).tolist() == list(range(batches * size))
    assert log.columns()["start"].tolist() == list(range(batches * size))


def test_a_reader_that_must_not_wait_gets_nothing_while_another_converts():
    log = ReadLog()
    log.add(batch(0, 0, 10))
    with log._converting:  # another thread assembling the result, as far as the reader knows
        columns, cursor = log.columns_since(0, wait=False)
    assert cursor == 0 and len(columns["start"]) == 0
    columns, cursor = log.columns_since(0, wait=False)
    assert cursor == 10 and columns["start"].tolist() == list(range(10))


def test_recorder_tags_each_read_with_its_reader_thread_and_description():
    batches: list[ReadBatch] = []
    recorder = ReadRecorder(worker=1, send=batches.append, max_batch=1_000)
    shared = new_descriptor_id()

    def reader(number: int, own: bool) -> None:
        recorder.reading_as(number)
        recorder.reading_through(0, new_descriptor_id() if own else shared)
        recorder.record(0, number * 4096, 4096, number, number + 1)

    for own in (True, False):
        threads = [threading.Thread(target=reader, args=(n, own)) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    recorder.record(1, 0, 4096, 9, 10)  # this thread declared no descriptor for file 1
    recorder.flush()
    log = ReadLog()
    for sent in batches:
        log.add(sent)
    columns = log.columns()
    assert sorted(set((columns["reader"] - (1 << READER_BITS)).tolist())) == [0, 1, 2]
    assert columns["descriptor"][-1] == -1
    assert len(set(columns["descriptor"][:3].tolist())) == 3  # own descriptors
    assert set(columns["descriptor"][3:6].tolist()) == {shared}
    sharing = descriptor_sharing(columns)
    assert sharing is not None and sharing.shared
    assert sharing.text() == "3 readers share 4 descriptors"  # 3 own + the shared one
    own_only = descriptor_sharing({key: column[:3] for key, column in columns.items()})
    assert own_only is not None and own_only.text() == "3 readers, each its own descriptor"


def test_batches_without_reader_columns_read_as_reader_zero_and_unknown_description():
    log = ReadLog()
    log.add(batch(2, 0, 4))
    columns = log.columns()
    assert columns["reader"].tolist() == [2 << READER_BITS] * 4
    assert columns["descriptor"].tolist() == [-1] * 4
    assert descriptor_sharing(columns) is None


def test_sharing_text_counts_descriptions_per_file():
    tally = DescriptorTally()
    # Two files, one description each, four readers through both.
    tally.add(
        np.array([0, 0, 0, 0, 1, 1, 1, 1]),
        np.array([0, 1, 2, 3, 0, 1, 2, 3]),
        np.array([7, 7, 7, 7, 8, 8, 8, 8]),
    )
    sharing = tally.sharing()
    assert sharing == DescriptorSharing(readers=4, descriptions=1, most_sharing=4, files=2)
    assert sharing.text() == "4 readers share 1 descriptor per file"


def test_a_buckets_readers_are_said_as_connections():
    """Reads of objects go through connections to the endpoint, not file descriptors: the
    bucket's search says "threads=4" and the app "Connections: 4"; the sharing line agrees."""
    own = {
        "file": np.array([0, 0, 0, 0]),
        "reader": np.array([0, 1, 2, 3]),
        "descriptor": np.array([5, 6, 7, 8]),
    }
    sharing = descriptor_sharing(own, objects=True)
    assert sharing is not None and sharing.text() == "4 connections, one per reader"
    assert "descriptor" not in sharing.text()
    tally = DescriptorTally(objects=True)
    tally.add(own["file"], own["reader"], np.array([5, 5, 6, 6]))
    shared = tally.sharing()
    assert shared is not None and shared.text() == "4 readers share 2 connection(s)"
