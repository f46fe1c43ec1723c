"""A model is known by its first bytes, whatever its name: a safetensors header, GGUF's magic,
a shard index's weight_map; nothing else is taken for one, and nothing blocks the asking."""

from __future__ import annotations

import json
import os
import struct
import threading
from pathlib import Path

import pytest

from modelmon.core import write_gguf_model, write_safetensors_model
from modelmon.core.system.model_files import (
    GGUF,
    INDEX_SNIFF_BYTES,
    SAFETENSORS,
    SHARD_INDEX,
    model_kind,
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    single = write_safetensors_model(root / "single", layers=1, hidden=32, vocab=64)
    index = write_safetensors_model(root / "sharded", layers=2, hidden=32, vocab=64, shards=2)
    gguf = write_gguf_model(root / "m.gguf", layers=1, hidden=32, vocab=64)
    return {
        "single": single,
        "index": index,
        "shard": next(index.parent.glob("*-00001-*")),
        "gguf": gguf,
    }


def copy_as(source: Path, target: Path) -> Path:
    target.write_bytes(source.read_bytes())
    return target


def test_models_are_known_by_their_bytes_under_any_name(
    models: dict[str, Path], tmp_path: Path
) -> None:
    for name, kind in (
        ("single", SAFETENSORS),
        ("shard", SAFETENSORS),
        ("gguf", GGUF),
        ("index", SHARD_INDEX),
    ):
        assert model_kind(models[name]) == kind, name
        assert model_kind(copy_as(models[name], tmp_path / f"{name}.toml")) == kind, name
    (tmp_path / "link.csv").symlink_to(models["single"])
    assert model_kind(tmp_path / "link.csv") == SAFETENSORS


def test_an_index_with_its_map_after_whitespace_or_a_bom_is_one(tmp_path: Path) -> None:
    document = {"metadata": {"total_size": 8}, "weight_map": {"w": "model.safetensors"}}
    spaced = tmp_path / "spaced.json"
    spaced.write_bytes(b" " * 200 + b"\n" + json.dumps(document).encode())
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(document, indent=2).encode())
    assert model_kind(spaced) == model_kind(bom) == SHARD_INDEX


def test_a_header_after_whitespace_is_a_safetensors_model(tmp_path: Path) -> None:
    header = b'  {"__metadata__":{}}'
    path = tmp_path / "spaced.bin"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    assert model_kind(path) == SAFETENSORS


def test_what_only_looks_like_a_model_is_not_one(tmp_path: Path) -> None:
    header = b'{"w":{"dtype":"F16","shape":[1],"data_offsets":[0,2]}}'
    cases = {
        "config.toml": b'format_version = 1\n[recommended]\nstrategy = "sequential"\n',
        "results.json": json.dumps({"runs": [{"mbps": 1.0}], "note": "weight_map"}).encode(),
        "array.json": b'["weight_map", {"weight_map": {}}]',
        "rows.csv": b"run,label,mbps\n1,A,5.0\n",
        "empty": b"",
        "short": b"\x05\x00\x00",
        "eight": struct.pack("<Q", 2),  # a length, then nothing
        "truncated": struct.pack("<Q", len(header) + 10) + header,  # more than it holds
        "not-json": struct.pack("<Q", 4) + b"abcd",
        "gguf-late": b"xGGUF" + b"\0" * 64,
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        assert model_kind(tmp_path / name) is None, name
    assert model_kind(tmp_path / "missing") is None
    assert model_kind(tmp_path) is None


def test_an_index_whose_map_lies_past_the_bytes_read_is_not_read_whole(tmp_path: Path) -> None:
    """The read is bounded: a JSON object as large as an index may be is read only so far."""
    path = tmp_path / "large.json"
    filler = "x" * INDEX_SNIFF_BYTES
    path.write_text(json.dumps({"metadata": {"note": filler}, "weight_map": {"w": "a"}}))
    assert model_kind(path) is None


def test_special_files_answer_at_once_and_are_left_alone(tmp_path: Path) -> None:
    """A FIFO with no writer (a plain open would wait forever), a device that never ends."""
    fifo = tmp_path / "fifo.safetensors"
    os.mkfifo(fifo)
    answers: list[str | None] = []
    asking = threading.Thread(
        target=lambda: answers.extend([model_kind(fifo), model_kind("/dev/zero")])
    )
    asking.start()
    asking.join(timeout=30)
    if asking.is_alive():  # unblock it before failing, so that no thread is left behind
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        asking.join()
        pytest.fail("model_kind blocked on a FIFO")
    assert answers == [None, None]


def test_a_transformers_config_is_a_model_file(models: dict[str, Path], tmp_path: Path) -> None:
    """Walk 24: `recommend FOLDER -o FOLDER/config.json` replaced the model's config.json (the
    file that names its architecture, which the same run read to list vLLM's lines) with the
    report. A JSON object naming a "model_type" or "architectures" is a model's config, under
    any name; a JSON object without them is not."""
    from modelmon.core.system.model_files import MODEL_CONFIG

    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32}
    written = tmp_path / "config.json"
    written.write_text(json.dumps(config, indent=2))
    assert model_kind(written) == MODEL_CONFIG
    only_type = tmp_path / "other.toml"
    only_type.write_text(json.dumps({"model_type": "bert"}))
    assert model_kind(only_type) == MODEL_CONFIG
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"hidden_size": 32, "note": "model_type is not a key here"}))
    assert model_kind(plain) is None
