"""A watch's blocks are timed from what it saw arrive only where it saw the whole model
arrive from a verified cold cache: otherwise the first block to arrive is not the model's
first block, and the reason says why none is timed."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest

from modelmon.core import Model, Watch, open_model, parse_configuration, write_safetensors_model
from modelmon.core.runs.arrivals import NO_ARRIVALS, arrival_blocks, untimed_reason
from modelmon.core.runs.program import run_program
from modelmon.core.system.cache import NO_LOCAL_CACHE
from modelmon.core.watching.result import WatchResult

# Reads the model to its end, then holds it open a moment: a read of a cached model can end
# between two of the watch's looks, and a watch that never saw the file open fails the run.
READER = """
import sys, time
with open(sys.argv[1], "rb") as f:
    while f.read(1 << 16):
        pass
    time.sleep(0.5)
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Model:
    folder = tmp_path_factory.mktemp("arrivals")
    (folder / "read.py").write_text(READER)
    return open_model(write_safetensors_model(folder, layers=2, hidden=512, vocab=4096))


def reader(model: Model) -> tuple[str, ...]:
    return (sys.executable, str(Path(model.path).parent / "read.py"), model.path)


@pytest.fixture(scope="module")
def cold(model: Model) -> tuple[Watch, WatchResult]:
    watch = Watch(reader(model), model=model.paths, cache="cold", interval_s=0.05)
    return watch, watch.run()


def test_a_whole_cold_arrival_times_every_block_from_the_first(model: Model, cold) -> None:
    watch, watched = cold
    assert watched.cache is not None and watched.cache.cold
    assert untimed_reason(watched) is None
    blocks = arrival_blocks(model, watch, watched)
    assert [b.name for b in blocks] == model.blocks()
    assert blocks[0].start < blocks[-1].end


def test_part_of_the_model_arriving_times_no_block_and_says_why(cold) -> None:
    _, watched = cold
    assert watched.cache is not None
    warm = dataclasses.replace(watched.cache, resident_before=0.6, cold=False)
    assert (untimed_reason(dataclasses.replace(watched, cache=warm)) or "").startswith(
        "60% of the model was in the page cache before it: a block already cached never arrives"
    )
    assert (untimed_reason(dataclasses.replace(watched, cache=None)) or "").startswith(
        "the model may have been in the page cache before it"
    )
    half = dataclasses.replace(watched, bytes_read=watched.model_bytes // 2)
    assert untimed_reason(half) == (
        "only 50% of the model was seen arriving, so its blocks are not timed"
    )
    none = dataclasses.replace(watched, first_byte_s=None, bytes_read=0)
    assert untimed_reason(none) == NO_ARRIVALS
    bucket = dataclasses.replace(watched.cache, method=NO_LOCAL_CACHE)
    assert "a bucket's bytes come over sockets" in (
        untimed_reason(dataclasses.replace(watched, cache=bucket)) or ""
    )


def test_a_program_run_on_a_cached_model_times_no_block(model: Model, cold) -> None:
    """A ``cmd:`` run with the cache kept, half the model cached: its arrivals once timed
    the second half's blocks alone, the first of them called the first block."""
    program = parse_configuration(f"cmd: {' '.join(reader(model))}")
    # The cold watch left the model cached: its second half is dropped, so that half arrives.
    size = os.path.getsize(model.path)
    fd = os.open(model.path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, size // 2, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    ran = run_program(model, program, "keep")
    assert ran.result.status == "ok", ran.result.error
    assert 0.3 < ran.result.cache.resident_before < 0.9, ran.result.cache
    assert ran.result.blocks == ()
