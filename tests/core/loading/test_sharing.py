"""Work shared by worker processes: one ShareQueue whose shares live in shared memory, so a
worker that is slow leaves its unread stretch to the others, and every byte is still read once
(the byte-identical tests check the checksums of shared loads against the reference)."""

from __future__ import annotations

import multiprocessing as mp
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from modelmon.core.loading.runner import LoadRun
from modelmon.core.loading.sharing import SharedShares
from modelmon.core.model.formats import open_model
from modelmon.core.model.plan import ShareQueue
from modelmon.core.options import LoadOptions

ITEMS = 64


def take_one_then_wait(shares: SharedShares, gate: Any, conn: Connection) -> None:
    """A slow worker (reader 0 of 2): takes one item, then waits until let go, takes again."""
    queue = ShareQueue(list(range(ITEMS)), [1] * ITEMS, 2, shares.attach())
    conn.send(queue.take(0))
    gate.wait()
    conn.send(queue.take(0))
    conn.close()


def test_a_fast_process_takes_over_what_a_slow_one_left_unread() -> None:
    context = mp.get_context("spawn")
    shares = SharedShares(context, 2)
    gate = context.Event()
    mine, theirs = context.Pipe(duplex=False)
    slow = context.Process(target=take_one_then_wait, args=(shares, gate, theirs))
    slow.start()
    theirs.close()
    fast: list[int] = []
    try:
        first = mine.recv()  # the slow one has its first item: the shares are dealt
        queue = ShareQueue(list(range(ITEMS)), [1] * ITEMS, 2, shares.attach())
        while (item := queue.take(1)) is not None:
            fast.append(item)
        del queue  # the mapping closes only once nothing views it
        gate.set()
        second = mine.recv()
    finally:
        gate.set()
        slow.join(60)
        mine.close()
        shares.close()
    assert slow.exitcode == 0
    assert first == 0 and second is None  # one item, then nothing left
    assert sorted([first, *fast]) == list(range(ITEMS))  # each item handed out once


def test_workers_of_a_load_share_one_queue_and_fill_the_model_once(sharded_model: Path) -> None:
    options = LoadOptions(workers=3, threads=2, chunk=64 << 10, verify=True, cache="keep")
    run = LoadRun(sharded_model, "sequential", options)
    assert run.shares_work
    result = run.run()
    assert result.status == "ok", result.error
    assert result.bytes == open_model(sharded_model).total_bytes  # the parent checked spans
    assert result.checksum is not None
    assert sum(w.bytes for w in result.workers) == result.bytes


def test_fixed_shares_where_a_strategy_needs_them(sharded_model: Path) -> None:
    for strategy, options in [
        ("mmap-shared-fd", LoadOptions(workers=2)),
        ("warmup", LoadOptions(workers=2)),
        ("sequential", LoadOptions(workers=2, partition="round-robin")),
        ("sequential", LoadOptions(workers=1)),
    ]:
        assert not LoadRun(sharded_model, strategy, options).shares_work, strategy
