"""warmup: a prefetch pass first (parallel reads and/or WILLNEED), then mmap and copy out."""

from __future__ import annotations

import os

from modelmon.core.loading.reads import ReadRecorder
from modelmon.core.loading.strategies.base import (
    FADVISE,
    Strategy,
    WorkerContext,
    pread_exact,
    register,
    timed_read,
)
from modelmon.core.loading.strategies.mapped import copy_out_of_maps
from modelmon.core.model.plan import Read


def _prefetch(ctx: WorkerContext, read: Read, recorder: ReadRecorder) -> None:
    """Read (and/or WILLNEED) one byte range so the mmap pass finds it cached."""
    mode = ctx.options.prefetch
    fd = ctx.fd(read.file)
    if mode in ("willneed", "both"):
        os.posix_fadvise(fd, read.offset, read.length, FADVISE["willneed"])
    if mode in ("read", "both"):
        scratch = ctx.sink.scratch(read.length)
        timed_read(
            recorder, read.file, read.offset, read.length, pread_exact, fd, scratch, read.offset
        )


@register
class WarmupStrategy(Strategy):
    maps_file = True  # its second pass copies out of a mapping
    name = "warmup"
    summary = (
        "prefetch pass first (parallel sequential reads and/or POSIX_FADV_WILLNEED), "
        "then mmap and copy out of the page cache"
    )
    uses = Strategy.uses | {"chunk", "fadvise", "madvise", "prefetch"}
    shares_work = False  # two passes, two queues: each worker keeps its own share
    descriptors_per_file = 2  # the copy pass's own and its mapping's duplicate

    @classmethod
    def descriptors(cls, files: int, readers: int) -> int:
        # Prefetch threads close theirs when they end; a lone reader runs inline and keeps
        # its prefetch descriptors through the copy pass.
        return super().descriptors(files, readers) + (files if readers == 1 else 0)

    def run(self, ctx: WorkerContext) -> None:
        recorder = ctx.prefetch_recorder or ctx.recorder
        ctx.reads_in_threads(lambda read: _prefetch(ctx, read, recorder))
        recorder.flush()
        copy_out_of_maps(ctx)
