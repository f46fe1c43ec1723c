"""stream: blocks in the order a model uses them, a bounded look-ahead ahead of the first one
still loading; what an async preloader that hands layers over as they arrive would do."""

from __future__ import annotations

import threading

from modelmon.core.loading.strategies.base import Strategy, WorkerContext, register
from modelmon.core.loading.strategies.sequential import read_scattered
from modelmon.core.model.blocks import block_sort_key
from modelmon.core.model.plan import Read, coalesce

# Readers work on the block that is being finished and the next one. One block ahead keeps
# every reader busy on models whose layers are many chunks each, and bounds what a consumer
# that frees blocks after use would hold; more would drift back to whole-file order.
LOOKAHEAD_BLOCKS = 2
WAIT_S = 0.05  # how often a reader held at the window looks at the stop flag


class BlockWindow:
    """Reads in block order, handed out at most ``lookahead`` blocks past the first block
    that is not complete. Thread-safe."""

    def __init__(self, items: list[tuple[int, Read]], blocks: int, lookahead: int) -> None:
        self._items = items
        self._next = 0
        self._left = [0] * blocks
        for block, _ in items:
            self._left[block] += 1
        self._first_open = 0
        self._lookahead = lookahead
        self._changed = threading.Condition()
        self._skip_done()

    def _skip_done(self) -> None:
        while self._first_open < len(self._left) and self._left[self._first_open] == 0:
            self._first_open += 1

    def take(self, ctx: WorkerContext) -> tuple[int, Read] | None:
        with self._changed:
            while self._next < len(self._items):
                block, read = self._items[self._next]
                if block < self._first_open + self._lookahead:
                    self._next += 1
                    return block, read
                self._changed.wait(WAIT_S)
                ctx.check()
            return None

    def done(self, block: int) -> None:
        with self._changed:
            self._left[block] -= 1
            self._skip_done()
            self._changed.notify_all()


def block_ordered_reads(ctx: WorkerContext) -> tuple[list[tuple[int, Read]], int]:
    """The worker's reads grouped by block, blocks in use order, each block's reads in file
    order and at most ``chunk`` bytes; and how many blocks there are."""
    by_block: dict[str, list[int]] = {}
    for index in ctx.indexes:
        by_block.setdefault(ctx.model.extents[index].block, []).append(index)
    items: list[tuple[int, Read]] = []
    for number, name in enumerate(sorted(by_block, key=block_sort_key)):
        items.extend(
            (number, read) for read in coalesce(ctx.model, by_block[name], ctx.options.chunk)
        )
    return items, len(by_block)


@register
class StreamStrategy(Strategy):
    name = "stream"
    summary = (
        "blocks in use order (embeddings, layers, head); threads, each with its own "
        f"descriptor, read chunks at most {LOOKAHEAD_BLOCKS} blocks ahead: first layers early"
    )
    uses = Strategy.uses | {"chunk", "fadvise"}
    shares_work = False  # its readers follow one worker's block window, in use order

    def run(self, ctx: WorkerContext) -> None:
        items, blocks = block_ordered_reads(ctx)
        window = BlockWindow(items, blocks, LOOKAHEAD_BLOCKS)
        readers = max(1, min(ctx.options.threads, len(items)))

        def drain(_: int) -> None:
            while (item := window.take(ctx)) is not None:
                ctx.check()
                block, read = item
                read_scattered(ctx, read, ctx.fd(read.file))
                window.done(block)

        ctx.in_threads(readers, drain)
