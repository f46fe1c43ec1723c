"""core.system.files: regular files only, whole-file reads bounded, parsers' failures typed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelmon.core.system.files import (
    UnusableFile,
    open_regular,
    parse_json,
    parse_toml,
    read_small_file,
)

LIMIT = 1 << 10


def _reason(call, *args) -> str:
    with pytest.raises(UnusableFile) as caught:
        call(*args)
    return caught.value.reason


def test_read_small_file_refuses_fifos_devices_and_big_files(tmp_path: Path) -> None:
    small = tmp_path / "main"
    small.write_text("abc")
    assert read_small_file(small, LIMIT) == b"abc"
    big = tmp_path / "big"
    big.write_bytes(b"x" * (LIMIT + 1))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "to_fifo"
    to_fifo.symlink_to(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert f"over the {LIMIT} byte limit" in _reason(read_small_file, big, LIMIT)
    for special in (fifo, to_fifo, Path("/dev/zero"), tmp_path):
        assert _reason(read_small_file, special, LIMIT).startswith("not a regular file")
    assert _reason(read_small_file, tmp_path / "absent", LIMIT) == "no such file or directory"
    assert "symbolic links" in _reason(read_small_file, loop, LIMIT)
    assert "too long" in _reason(read_small_file, tmp_path / ("x" * 5000), LIMIT)


def test_open_regular_gives_a_blocking_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"12345")
    fd = open_regular(path)
    try:
        assert os.get_blocking(fd) and os.read(fd, 10) == b"12345"
    finally:
        os.close(fd)


def test_parsers_turn_hostile_text_into_one_reason() -> None:
    assert parse_json(b'{"a": [1, 2]}') == {"a": [1, 2]}
    assert "nested too deep" in _reason(parse_json, b"[" * 100_000 + b"]" * 100_000)
    assert "digits" in _reason(parse_json, b"[" + b"9" * 5000 + b"]")
    assert "not UTF-8 (byte 2)" in _reason(parse_json, b'["\xff"]')
    assert "not valid JSON" in _reason(parse_json, b"{nope")
    assert parse_toml(b"a = 1") == {"a": 1}
    assert "nested too deep" in _reason(parse_toml, b"a = " + b"[" * 100_000 + b"]" * 100_000)
    assert "digits" in _reason(parse_toml, b"a = " + b"9" * 5000)
    assert "not UTF-8" in _reason(parse_toml, b"a = '\xff'")
    assert "not valid TOML" in _reason(parse_toml, b"a = = 1")
