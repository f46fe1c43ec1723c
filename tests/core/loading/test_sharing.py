"""Work shared by worker processes: one ShareQueue whose shares live in shared memory, so a
worker that is slow leaves its unread stretch to the others, and every byte is still read once
(the byte-identical tests check the checksums of shared loads against the reference)."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from modelmon.core.loading.runner import LoadRun
from modelmon.core.loading.sharing import RunMemory
from modelmon.core.model.formats import open_model
from modelmon.core.model.plan import ShareQueue
from modelmon.core.options import LoadOptions

ITEMS = 64


def take_one_then_wait(memory: RunMemory, conn: Connection) -> None:
    """A slow worker (reader 0 of 2): takes one item, then waits until let go, takes again."""
    _, shares = memory.attach()
    assert shares is not None
    queue = ShareQueue(list(range(ITEMS)), [1] * ITEMS, 2, shares)
    conn.send(queue.take(0))
    conn.recv()
    conn.send(queue.take(0))
    conn.close()


def test_a_fast_process_takes_over_what_a_slow_one_left_unread() -> None:
    context = mp.get_context("spawn")
    memory = RunMemory(2)
    mine, theirs = context.Pipe()
    slow = context.Process(target=take_one_then_wait, args=(memory, theirs))
    slow.start()
    theirs.close()
    fast: list[int] = []
    try:
        first = mine.recv()  # the slow one has its first item: the shares are dealt
        _, shares = memory.attach()
        assert shares is not None
        queue = ShareQueue(list(range(ITEMS)), [1] * ITEMS, 2, shares)
        while (item := queue.take(1)) is not None:
            fast.append(item)
        del queue, shares  # the mapping closes only once nothing views it
        mine.send("go on")
        second = mine.recv()
    finally:
        mine.close()  # its end lets the slow one go, whatever happened
        slow.join(60)
        memory.close()
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


def hold_the_lock(memory: RunMemory, conn: Connection) -> None:
    """Takes the queue's lock and says so, then waits inside it (to be killed there)."""
    _, shares = memory.attach()
    assert shares is not None
    with shares.lock:
        conn.send(os.getpid())
        conn.recv()


def test_a_process_killed_holding_the_queue_lock_blocks_no_one() -> None:
    context = mp.get_context("spawn")
    memory = RunMemory(2)
    mine, theirs = context.Pipe()
    holder = context.Process(target=hold_the_lock, args=(memory, theirs))
    holder.start()
    theirs.close()
    taken: list[int | None] = []
    try:
        pid = mine.recv()  # inside the lock now
        # A record lock the holder owns (not one of a description it shares with us).
        with open("/proc/locks") as locks:
            owners = [line.split()[1:5] for line in locks]
        assert ["POSIX", "ADVISORY", "WRITE", str(pid)] in owners
        os.kill(pid, signal.SIGKILL)
        holder.join(10)
        _, shares = memory.attach()
        assert shares is not None
        queue = ShareQueue(list(range(ITEMS)), [1] * ITEMS, 2, shares)
        taker = threading.Thread(
            target=lambda q: taken.append(q.take(1)), args=(queue,), daemon=True
        )
        taker.start()
        taker.join(10)  # the kernel dropped the dead holder's lock: at once
        del queue, shares
    finally:
        mine.close()
        if holder.is_alive():
            holder.kill()
            holder.join()
        memory.close()
    assert holder.exitcode == -signal.SIGKILL
    assert taken, "the queue's lock stayed held by the killed process"
