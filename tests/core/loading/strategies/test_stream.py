"""stream: blocks complete in the order a model uses them, never more than the look-ahead
ahead; results carry when the first and half of the blocks were ready."""

from __future__ import annotations

import threading
from pathlib import Path

from modelmon.core.loading.result import blocks_ready_s
from modelmon.core.loading.runner import run_load
from modelmon.core.loading.strategies.stream import BlockWindow
from modelmon.core.model.plan import Read
from modelmon.core.options import LoadOptions
from modelmon.core.output.text import render_result


def test_one_reader_completes_blocks_in_use_order(sharded_model: Path) -> None:
    result = run_load(sharded_model, "stream", LoadOptions(threads=1, chunk=64 << 10))
    assert result.status == "ok"
    ends = [block.end for block in result.blocks]
    assert len(ends) > 3 and ends == sorted(ends)
    assert result.first_block_s == ends[0]
    assert result.half_blocks_s == ends[(len(ends) + 1) // 2 - 1]
    data = result.to_dict()
    assert data["first_block_seconds"] == ends[0]
    assert "first     block ready at" in render_result(result)


def test_sequential_reports_the_same_metrics(sharded_model: Path) -> None:
    result = run_load(sharded_model, "sequential", LoadOptions(threads=2))
    ends = [block.end for block in result.blocks]
    assert result.first_block_s == ends[0]
    assert result.half_blocks_s == max(ends[: (len(ends) + 1) // 2])
    assert 0 < result.first_block_s <= result.half_blocks_s <= result.seconds + 1e-3


def test_blocks_ready_without_blocks_is_none() -> None:
    assert blocks_ready_s((), 1) is None


class _Running:
    def check(self) -> None:
        return None


def test_the_window_holds_a_reader_until_the_first_block_is_done() -> None:
    reads = [Read(0, n, 1, ()) for n in range(4)]
    items = [(0, reads[0]), (0, reads[1]), (1, reads[2]), (2, reads[3])]
    window = BlockWindow(items, blocks=3, lookahead=2)
    ctx = _Running()
    taken = [window.take(ctx), window.take(ctx), window.take(ctx)]  # type: ignore[arg-type]
    assert [block for block, _ in taken] == [0, 0, 1]  # type: ignore[misc]
    got: list[object] = []
    held = threading.Thread(target=lambda: got.append(window.take(ctx)))  # type: ignore[arg-type]
    held.start()
    window.done(0)
    assert got == []  # block 2 only once block 0 is complete (one of its reads is still out)
    window.done(0)
    held.join()
    assert got == [(2, reads[3])]
    assert window.take(ctx) is None  # type: ignore[arg-type]
