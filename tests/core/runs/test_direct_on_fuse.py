"""A program that reads the model with O_DIRECT from a network FUSE mount: no page cache holds
its bytes and no block layer counts them, so it is timed by the bytes its reads returned."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from modelmon.core import open_model, run_program, write_safetensors_model
from modelmon.core.configuration import parse_program

from ...fuse import mounted_or_skip

LIMIT_MIB_S = 16  # the mount's bandwidth: the load takes about a second
# rclone's --bwlimit is a token bucket of 4 MiB: a reader that starts after the mount idled
# for a quarter of a second gets that much at once, then the rate.
BUCKET = 4 << 20
EDGES = 1.1  # the span from the sample before the reads to the one after them
# Reads the whole file with O_DIRECT into an aligned buffer, as llama.cpp's load_mode=dio.
READER = (
    "import mmap, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECT)\n"
    "buffer, offset = mmap.mmap(-1, 1 << 20), 0\n"
    "while (count := os.preadv(fd, [buffer], offset)):\n"
    "    offset += count\n"
)


@pytest.fixture
def mounted_model(tmp_path: Path, own_state: Path) -> Iterator[Path]:
    source = tmp_path / "source"
    model = write_safetensors_model(source, layers=2, hidden=512, vocab=4096, seed=3)
    with mounted_or_skip(
        source, tmp_path / "mnt", mount_flags=("--bwlimit", f"{LIMIT_MIB_S}M")
    ) as mounted:
        yield mounted / model.name


def test_a_direct_reader_on_fuse_is_timed_by_what_it_read(mounted_model: Path) -> None:
    model = open_model(str(mounted_model))
    program = parse_program(f"cmd: python3 -c '{READER}' {{path}}")
    outcome = run_program(model, program, path=str(mounted_model))
    load = outcome.result
    assert outcome.watch is not None
    assert any(d.o_direct for d in outcome.watch.descriptions)
    assert outcome.watch.arrived_bytes == 0  # nothing arrived in the page cache
    assert load.status == "ok", load.error
    assert load.bytes == mounted_model.stat().st_size  # the file, header and all
    # Timed over the reads, to the sample: never faster than the mount lets bytes through.
    assert 0 < load.mbps <= EDGES * fastest(mounted_model)
    assert any("rchar on FUSE or NFS" in note for note in load.notes)


def test_an_engine_reading_past_the_page_cache_is_timed_by_its_own_clock(
    mounted_model: Path,
) -> None:
    # Run:ai's streamer reads with O_DIRECT (io_uring or libaio) where a mount takes it: no
    # page cache holds its bytes and its asynchronous reads count in no read call's rchar.
    pytest.importorskip("runai_model_streamer")
    model = open_model(str(mounted_model))
    outcome = run_program(model, parse_program("engine: runai"), path=str(mounted_model))
    load = outcome.result
    assert load.status == "ok", load.error
    own = outcome.own or {}
    assert outcome.watch is not None and outcome.watch.arrived_bytes == 0
    # Its own clock, over its load and its touch of every byte, times it; the tree's reads
    # do not (read_bytes counts a direct read as it is asked, rchar not an asynchronous one).
    assert load.bytes == own["bytes"] and load.seconds == pytest.approx(own["seconds"])
    assert any("timed by the loader's own clock" in note for note in load.notes)
    assert not any(note.startswith("partial-read") for note in load.notes)
    assert 0 < load.mbps <= EDGES * fastest(mounted_model)


def fastest(path: Path) -> float:
    """MB/s of the fastest read of the file the mount allows: a full bucket, then the rate."""
    size, rate = path.stat().st_size, LIMIT_MIB_S * (1 << 20)
    return size / ((size - BUCKET) / rate) / 1e6
