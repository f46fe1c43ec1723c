"""safetensors parsing: valid files match the reference library; malformed ones are refused
with one clear line, fast, without allocating more than the file holds."""

from __future__ import annotations

import functools
import json
import os
import struct
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model
from modelmon.core.model.formats.safetensors import parse_safetensors_file, read_header
from modelmon.core.model.formats.safetensors_scan import scan_header

from ....unprivileged import run_unprivileged


def write_raw(
    path: Path,
    header: object,
    data: bytes = b"",
    *,
    raw_header: bytes | None = None,
    length: int | None = None,
) -> Path:
    body = raw_header if raw_header is not None else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(body) if length is None else length) + body + data)
    return path


def entry(dtype: str, shape: list[int], begin: int, end: int) -> dict[str, object]:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def test_single_file_matches_reference(tmp_path: Path) -> None:
    tensors = {
        "model.layers.0.mlp.up_proj.weight": np.arange(24, dtype=np.float16).reshape(4, 6),
        "model.embed_tokens.weight": np.ones((3, 5), dtype=np.float32),
        "lm_head.weight": np.zeros((2,), dtype=np.int64),
    }
    path = tmp_path / "m.safetensors"
    safetensors.numpy.save_file(tensors, str(path))
    model = open_model(path)
    raw = path.read_bytes()
    assert model.format == "safetensors" and len(model.extents) == 3
    for extent in model.extents:
        expected = tensors[extent.name]
        assert raw[extent.offset : extent.end] == expected.tobytes()
        assert extent.array_shape == expected.shape
        assert np.dtype(extent.array_dtype) == expected.dtype
    blocks = {e.name: e.block for e in model.extents}
    assert blocks["model.layers.0.mlp.up_proj.weight"] == "model.layers.0"
    assert blocks["model.embed_tokens.weight"] == "embeddings"
    assert blocks["lm_head.weight"] == "head"


def test_sharded_index_and_directory(sharded_model: Path) -> None:
    by_index = open_model(sharded_model)
    by_folder = open_model(sharded_model.parent)
    assert len(by_index.files) == 3
    assert [e.name for e in by_index.extents] == [e.name for e in by_folder.extents]
    weight_map = json.loads(sharded_model.read_text())["weight_map"]
    assert {e.name for e in by_index.extents} == set(weight_map)
    for extent in by_index.extents:
        assert Path(extent.file).name == weight_map[extent.name]


MALFORMED = {
    "shorter than the length field": (None, None, b"", 3),
    "huge header length": ({}, b"", None, 2**62),
    "header length past end": ({}, b"", None, 1000),
    "not JSON": (None, b"{not json", None, None),
    "not an object": (None, b"[1, 2]", None, None),
    "an entry that is a number": (None, b' {"a": 1}', None, None),
    "not UTF-8": (None, b'{"\xff": 1}', None, None),
    "unknown dtype": ({"t": entry("F12", [1], 0, 2)}, None, b"\0\0", None),
    "negative shape": ({"t": entry("F16", [-1], 0, 2)}, None, b"\0\0", None),
    "shape not a list": (
        {"t": {"dtype": "F16", "shape": 3, "data_offsets": [0, 2]}},
        None,
        b"\0\0",
        None,
    ),
    "offsets past data": ({"t": entry("U8", [8], 0, 8)}, None, b"\0\0\0\0", None),
    "end before begin": ({"t": entry("U8", [0], 4, 2)}, None, b"\0" * 4, None),
    "overlap": ({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 2, 6)}, None, b"\0" * 6, None),
    "gap": ({"a": entry("U8", [2], 0, 2), "b": entry("U8", [2], 4, 6)}, None, b"\0" * 6, None),
    "shape x dtype mismatch": ({"t": entry("F32", [3], 0, 8)}, None, b"\0" * 8, None),
    "trailing bytes": ({"t": entry("U8", [2], 0, 2)}, None, b"\0" * 5, None),
    "bad metadata": ({"__metadata__": {"a": 1}}, None, b"", None),
    "offsets not ints": (
        {"t": {"dtype": "U8", "shape": [1], "data_offsets": ["0", "1"]}},
        None,
        b"\0",
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_is_refused_fast_and_small(tmp_path: Path, case: str) -> None:
    header, raw_header, data, length = MALFORMED[case]
    path = tmp_path / "bad.safetensors"
    if case == "shorter than the length field":
        path.write_bytes(b"\1\2\3")
    else:
        write_raw(path, header, data or b"", raw_header=raw_header, length=length)
    size = path.stat().st_size
    tracemalloc.start()
    # This thread's CPU time: the work a header causes, which a busy neighbour cannot stretch
    started = time.thread_time()
    with pytest.raises(ModelFormatError) as caught:
        open_model(path)
    elapsed = time.thread_time() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert elapsed < 0.5
    assert peak < size + (1 << 20)


def test_the_first_number_serde_refuses_is_the_one_named(tmp_path: Path) -> None:
    """serde reads the header in order and stops at the first number it refuses: 1e400, not
    the NaN after it (which a reading of Python's numbers would meet first)."""
    text = '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":1e400,"y":NaN}}'
    path = write_raw(tmp_path / "m.safetensors", None, b"abcd", raw_header=text.encode())
    with pytest.raises(ModelFormatError, match="number 1e400 is out of range"):
        open_model(path)


def test_reference_agrees_that_malformed_files_are_bad(tmp_path: Path) -> None:
    """Our refusals are the reference's refusals (for the cases it checks)."""
    for case in ("overlap", "gap", "offsets past data", "shape x dtype mismatch", "unknown dtype"):
        header, _, data, _ = MALFORMED[case]
        path = write_raw(tmp_path / f"{case}.safetensors", header, data)
        with pytest.raises(Exception):  # noqa: B017  (the library raises its own types)
            safetensors.numpy.load_file(str(path))


def test_metadata_and_zero_sized_tensor(tmp_path: Path) -> None:
    path = write_raw(
        tmp_path / "m.safetensors",
        {
            "__metadata__": {"format": "pt"},
            "empty": entry("F32", [0, 4], 0, 0),
            "x": entry("U8", [3], 0, 3),
        },
        b"abc",
    )
    extents, file, metadata = parse_safetensors_file(path)
    assert metadata == {"format": "pt"} and file.size == path.stat().st_size
    assert [(e.name, e.length) for e in extents] == [("empty", 0), ("x", 3)]


def test_zero_byte_fifo_and_missing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.safetensors"
    empty.write_bytes(b"")
    fifo = tmp_path / "pipe.safetensors"
    os.mkfifo(fifo)
    for path, words in (
        (empty, "empty"),
        (fifo, "not a regular file"),
        (tmp_path / "missing.safetensors", "no such file"),
    ):
        with pytest.raises(ModelFormatError, match=words):
            open_model(path)


def test_directory_without_models(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(ModelFormatError, match=r"holds no \.safetensors"):
        open_model(tmp_path)


UNREADABLE = """
import sys
from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats import open_model
try:
    open_model(sys.argv[1])
except ModelFormatError as error:
    assert "permission denied" in str(error), error
else:
    raise AssertionError("an unreadable file was opened")
"""


def test_unreadable_file(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "m.safetensors", {"x": entry("U8", [1], 0, 1)}, b"a")
    path.chmod(0)
    done = run_unprivileged(UNREADABLE, str(path))
    assert done.returncode == 0, done.stderr


def _copy_shards(sharded_model: Path, target: Path) -> Path:
    target.mkdir()
    for item in sharded_model.parent.iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    return target / sharded_model.name


def test_index_naming_a_missing_shard(sharded_model: Path, tmp_path: Path) -> None:
    index = _copy_shards(sharded_model, tmp_path / "copy")
    shard = sorted(index.parent.glob("*-of-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(ModelFormatError, match="missing") as caught:
        open_model(index)
    assert shard.name in str(caught.value)


def test_shard_of_another_model(sharded_model: Path, tmp_path: Path) -> None:
    index = _copy_shards(sharded_model, tmp_path / "copy")
    shard = sorted(index.parent.glob("*-of-*.safetensors"))[0]
    safetensors.numpy.save_file({"other.weight": np.zeros(4, np.float32)}, str(shard))
    with pytest.raises(ModelFormatError, match="another model"):
        open_model(index)


def test_index_that_is_not_json(tmp_path: Path) -> None:
    index = tmp_path / "model.safetensors.index.json"
    index.write_text("{weight_map")
    with pytest.raises(ModelFormatError, match="not valid JSON"):
        open_model(index)
    index.write_text(json.dumps({"weight_map": {"a": "../../etc/passwd"}}))
    with pytest.raises(ModelFormatError, match="beside the index"):
        open_model(index)


def test_permission_denied_is_one_clear_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root reads anything, so the kernel's EACCES is simulated where the file is opened."""
    path = write_raw(tmp_path / "m.safetensors", {"x": entry("U8", [1], 0, 1)}, b"a")
    real_open = os.open

    def denying_open(file: object, *args: object, **kwargs: object) -> object:
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("os.open", denying_open)
    with pytest.raises(ModelFormatError, match="permission denied") as caught:
        open_model(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_text_and_truncated_files_are_named_for_what_they_are(tmp_path: Path) -> None:
    """A user's words: "not a safetensors file", "truncated"; never a meaningless length."""
    text = tmp_path / "notes.safetensors"
    text.write_text("this is a plain text file, not weights\n" * 20)
    with pytest.raises(ModelFormatError, match="not a safetensors file") as caught:
        open_model(text)
    assert "header length" not in str(caught.value) and "(at byte" not in str(caught.value)
    # Named as a GGUF, it is said not to be one (walk 20 read "not a safetensors file" of a
    # text file named notes.gguf); a safetensors file of that name still opens, as
    # safetensors' own loader opens it whatever its name.
    named_gguf = tmp_path / "notes.gguf"
    named_gguf.write_text("this is a plain text file, not weights\n" * 20)
    with pytest.raises(ModelFormatError) as named:
        open_model(named_gguf)
    said = 'not a GGUF file: it begins with "this", not GGUF\'s magic "GGUF", and it is no'
    assert said in str(named.value) and "(at byte" not in str(named.value)
    short = tmp_path / "short.gguf"
    short.write_bytes(b"ab")  # fewer bytes than the magic: never "it begins with 0x6162"
    with pytest.raises(ModelFormatError, match="it holds 2 bytes, fewer than GGUF's magic"):
        open_model(short)
    weights = write_raw(tmp_path / "w.gguf", {"t": entry("U8", [64], 0, 64)}, b"\0" * 64)
    assert open_model(weights).format == "safetensors"

    good = write_raw(tmp_path / "good.safetensors", {"t": entry("U8", [64], 0, 64)}, b"\0" * 64)
    content = good.read_bytes()
    cut_header = tmp_path / "cut-header.safetensors"
    cut_header.write_bytes(content[:20])  # in the middle of the JSON header
    cut_data = tmp_path / "cut-data.safetensors"
    cut_data.write_bytes(content[:-10])  # the last tensor's bytes are missing
    for path in (cut_header, cut_data):
        with pytest.raises(ModelFormatError, match="truncated"):
            open_model(path)


MANY = 100_000  # the size of header the whole-column checks exist for


def many_tensors(tensors: int = MANY) -> dict[str, dict[str, object]]:
    """A valid header of ``tensors`` 2-byte U8 tensors, in offset order."""
    return {
        f"model.layers.{i // 10}.t{i % 10}": entry("U8", [2], 2 * i, 2 * i + 2)
        for i in range(tensors)
    }


# One bad entry among 100k good ones: (its new fields, the problem that must name it).
ONE_BAD_ENTRY = {
    "gap": ({"data_offsets": [2 * 50_000 + 1, 2 * 50_000 + 2], "shape": [1]}, "leaves a gap"),
    "bool dimension": ({"shape": [True, 2]}, "shape [true, 2] is not a list of non-negative"),
    "float offset": ({"data_offsets": [100_000, 100_002.0]}, "is not [begin, end]"),
    "size": ({"dtype": "F16"}, "is 4 bytes but data_offsets span 2"),
    "sub-byte": ({"dtype": "F4", "shape": [3]}, "3 x 4-bit is not whole bytes"),
    "absurd": ({"shape": [0, 2**62, 4]}, "absurd shape"),
    "dtype": ({"dtype": "f16"}, "unknown dtype 'f16'"),
}


def member(name: str, info: object) -> str:
    return f"{json.dumps(name)}: {json.dumps(info)}"


@functools.cache
def many_members() -> tuple[str, ...]:
    """``many_tensors()``'s members as json.dumps writes them, made once: each case changes one
    or two (json.dumps of 100k entries took a case longer than the parse it tests)."""
    return tuple(
        f'"model.layers.{i // 10}.t{i % 10}": '
        f'{{"dtype": "U8", "shape": [2], "data_offsets": [{2 * i}, {2 * i + 2}]}}'
        for i in range(MANY)
    )


@pytest.mark.parametrize("case", sorted(ONE_BAD_ENTRY))
def test_one_bad_tensor_among_many_is_named(tmp_path: Path, case: str) -> None:
    members = list(many_members())
    changes, problem = ONE_BAD_ENTRY[case]
    bad = "model.layers.5000.t0"  # tensor 50 000
    changed = {**entry("U8", [2], 100_000, 100_002), **changes}
    if case == "absurd":  # empty, so only its non-zero dimensions are wrong
        changed["data_offsets"] = [100_000, 100_000]
        del members[50_001]  # its two bytes...
        members.append(member("model.layers.5000.t1", entry("U8", [4], 100_000, 100_004)))
    members[50_000] = member(bad, changed)
    text = "{" + ", ".join(members) + "}"
    path = write_raw(tmp_path / "many.safetensors", None, bytes(2 * MANY), raw_header=text.encode())
    with pytest.raises(ModelFormatError) as caught:
        parse_safetensors_file(path)
    assert f"tensor {bad!r}" in str(caught.value) and problem in str(caught.value)


def test_many_tensors_in_any_header_order(tmp_path: Path) -> None:
    """The writers'-form scan and the whole-column checks accept a valid header in any key
    order, empty tensors included, and give the tensors in offset order with every field as
    the format says."""
    header = many_tensors(1000)
    header["empty"] = entry("F4", [0, 7], 600, 600)
    header["__metadata__"] = {"format": "pt"}
    shuffled = dict(reversed(header.items()))
    path = write_raw(tmp_path / "m.safetensors", shuffled, bytes(2000))
    extents, _, metadata = parse_safetensors_file(path)
    raw, _, _ = read_header(path)
    assert scan_header(raw.decode()) is not None  # read without json.loads
    assert metadata == {"format": "pt"}
    assert [e.offset - extents[0].offset for e in extents] == sorted(
        [2 * i for i in range(1000)] + [600]
    )
    assert extents[300].name == "empty" and extents[301].name == "model.layers.30.t0"
    assert extents[300].array_shape == (0,) and extents[300].shape == (0, 7)
    assert extents[301].block == "model.layers.30" and extents[301].array_dtype == "uint8"


def test_a_models_config_json_opened_says_what_would_open_it(tmp_path: Path) -> None:
    """A new user opens the config.json beside the weights: one line that says what it is
    not and what to open instead."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"}))
    with pytest.raises(ModelFormatError) as caught:
        open_model(config)
    said = str(caught.value)
    assert "not a shard index" in said and "open the model's folder" in said
    assert "\n" not in said
