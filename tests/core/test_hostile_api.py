"""The library API under hostile input: every error is a ModelmonError of one line naming the
file, never a raw exception, a hang or an unbounded read."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

import modelmon.core as core
from modelmon.core.configuration import StrategyConfig
from modelmon.core.errors import ConfigError, EmptyModelError, ModelFormatError
from modelmon.core.measuring.ab_run import run_ab
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions


def _vocab_only_gguf(path: Path) -> Path:
    key, value = b"general.architecture", b"llama"
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<I", 8)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv + struct.pack("<Q", 5) + value)
    return path


def test_a_model_without_tensors_opens_but_no_load_is_planned(tmp_path: Path) -> None:
    path = _vocab_only_gguf(tmp_path / "vocab.gguf")
    model = open_model(path)
    assert model.total_bytes == 0 and model.extents == ()
    options = LoadOptions()
    attempts: dict[str, Callable[[], object]] = {
        "load": lambda: core.load(path),
        "measure": lambda: core.measure(path),
        "ceilings": lambda: measure_ceilings(model),
        "a/b": lambda: run_ab(
            model, StrategyConfig("sequential", options), StrategyConfig("pread", options), n=1
        ),
    }
    for name, attempt in attempts.items():
        with pytest.raises(EmptyModelError) as caught:
            attempt()
        assert str(caught.value) == f"{path}: holds no tensor data (vocab-only?): " + (
            "there is nothing to load"
        ), name


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"a = " + b"[" * 50_000 + b"]" * 50_000, "nested too deep"),
        (b"format_version = " + b"9" * 5000, "digits"),
        (b"format_version = '\xff'", "not UTF-8"),
        (b"x" * (2 << 20), "byte limit"),
    ],
    ids=["deep", "huge-integer", "not-utf8", "huge"],
)
def test_hostile_config_files(sharded_model: Path, tmp_path: Path, content: bytes, says: str):
    config = tmp_path / "modelmon.toml"
    config.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        core.load(sharded_model, config=config, discard=True)
    message = str(caught.value)
    assert message.startswith(f"{config}: ") and says in message and "\n" not in message


def test_special_config_files(sharded_model: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.toml"
    loop.symlink_to(loop)
    for config, says in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (loop, "symbolic links"),
        (tmp_path / ("x" * 5000), "too long"),
    ):
        with pytest.raises(ConfigError, match=says):
            core.load(sharded_model, config=config, discard=True)


def test_an_error_is_one_line_whatever_its_path_holds(tmp_path: Path) -> None:
    """Every engine error prints as one line: control characters in a path are escaped."""
    path = tmp_path / "a\nb\u2028c.safetensors"
    path.write_bytes(b"junk")
    with pytest.raises(ModelFormatError) as caught:
        core.load(path)
    message = str(caught.value)
    assert message.splitlines() == [message] and "a\\nb\\u2028c.safetensors" in message
    assert caught.value.file == str(path)  # the attribute keeps the name as it is
