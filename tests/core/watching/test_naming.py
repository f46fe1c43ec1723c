"""A watch takes a model as every verb does: a shard index is its shards (never the JSON), a
folder the model it holds, ``hf:`` and ``ollama:`` references what they name in the local
stores, by ``--model`` (``Watch(model=...)``) and among the command's arguments alike; a bad
one fails with the error ``open_model`` gives for it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import open_model, write_safetensors_model
from modelmon.core.errors import ModelFormatError, ModelReferenceError, ReferenceSyntaxError
from modelmon.core.watching.files import ModelFiles
from modelmon.core.watching.naming import models_in_arguments, named_files, resolve_model
from modelmon.core.watching.watch import Watch

# Reads the files the WATCHED variable lists (so no path is among the command's words).
READER = "import os\nfor p in os.environ['WATCHED'].split(os.pathsep): open(p, 'rb').read()\n"


def shards_of(index: Path) -> list[str]:
    return sorted(os.path.realpath(f.path) for f in open_model(index).files)


def reading(paths: list[str], *words: str, model: object = ()) -> Watch:
    """A watch of a Python program that reads ``paths``; ``words`` are its arguments."""
    env = {**os.environ, "WATCHED": os.pathsep.join(paths)}
    command = [sys.executable, "-c", READER, *words]
    return Watch(command, model=model, env=env, stdout=subprocess.DEVNULL, interval_s=0.01)  # type: ignore[arg-type]


def watched(result) -> list[str]:
    return sorted(f.path for f in result.files)


def test_an_index_is_its_shards_never_the_json(sharded_model: Path) -> None:
    shards = shards_of(sharded_model)
    assert len(shards) == 3
    named = resolve_model(str(sharded_model))
    assert sorted(map(os.path.realpath, named.files)) == shards and named.folder is None
    folder = resolve_model(str(sharded_model.parent))
    assert sorted(map(os.path.realpath, folder.files)) == shards
    assert folder.folder == str(sharded_model.parent)
    # Named by the index, only the shards count: the JSON the program reads is not the model.
    files = ModelFiles(named.files)
    assert files.consider(str(sharded_model)) is None
    assert files.consider(shards[1]) is not None


def test_a_folder_counts_its_model_files_not_its_json(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    write_safetensors_model(folder, layers=1, hidden=32, vocab=64)
    (folder / "tokenizer.json").write_text("{}" + " " * (1 << 17))
    named = resolve_model(str(folder))
    files = ModelFiles(named.files, [named.folder] if named.folder else [])
    assert files.consider(str(folder / "tokenizer.json")) is None
    (folder / "extra.safetensors").write_bytes(b"x")
    assert files.consider(str(folder / "extra.safetensors")) is not None


def test_a_folder_of_a_layout_open_model_does_not_take(tmp_path: Path) -> None:
    """diffusers keeps its weights one level down: its model-named files are the model."""
    unet, vae = tmp_path / "sd" / "unet", tmp_path / "sd" / "vae"
    for part in (unet, vae):
        part.mkdir(parents=True)
        (part / "diffusion_pytorch_model.safetensors").write_bytes(b"w" * 100)
    (tmp_path / "sd" / "model_index.json").write_text("{}")
    named = resolve_model(str(tmp_path / "sd"))
    assert [Path(p).parent.name for p in named.files] == ["unet", "vae"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ModelFormatError) as raised:
        resolve_model(str(empty))
    with pytest.raises(ModelFormatError) as from_open_model:
        open_model(str(empty))
    assert str(raised.value) == str(from_open_model.value)


@pytest.mark.parametrize(
    ("given", "error"),
    [
        ("hf:foo", ReferenceSyntaxError),
        ("hf:nobody/nothing", ModelReferenceError),
        ("ollama:nothing", ModelReferenceError),
        ("/nonexistent/model.safetensors", ModelFormatError),
    ],
)
def test_a_bad_model_fails_as_open_model_fails(
    model_home: SimpleNamespace, given: str, error: type[Exception], tmp_path: Path
) -> None:
    with pytest.raises(error) as raised:
        Watch(["true"], model=given)
    with pytest.raises(error) as from_open_model:
        open_model(given)
    assert str(raised.value) == str(from_open_model.value)
    bad_index = tmp_path / "config.json"  # a JSON that is not an index is refused too
    bad_index.write_text(json.dumps({"architectures": []}))
    with pytest.raises(ModelFormatError, match="weight_map"):
        Watch(["true"], model=str(bad_index))


def test_the_arguments_name_references_and_indexes(
    model_home: SimpleNamespace, sharded_model: Path
) -> None:
    argv = ["serve", str(sharded_model), "hf:acme/tiny-llama", "--model=ollama:tinyllama"]
    models, notes = models_in_arguments(argv)
    assert notes == []
    snapshot = model_home.snapshots["acme/tiny-llama"]
    blobs = sorted(os.path.realpath(p) for p in snapshot.glob("*.safetensors"))
    ollama = os.path.realpath(resolve_model("ollama:tinyllama").files[0])
    assert sorted(map(os.path.realpath, named_files(models))) == sorted(
        [*shards_of(sharded_model), *blobs, ollama]
    )
    _, notes = models_in_arguments(["serve", "hf:nobody/nothing"])
    assert len(notes) == 1 and "hf:nobody/nothing: not in the Hugging Face cache" in notes[0]


@pytest.mark.parametrize("how", ["model", "argument"])
def test_a_watch_of_an_index_watches_its_shards_from_cold(sharded_model: Path, how: str) -> None:
    shards = shards_of(sharded_model)
    if how == "model":
        watch = reading(shards, model=str(sharded_model))
    else:
        watch = reading(shards, str(sharded_model))
    result = watch.run()
    assert result.exit_code == 0
    assert watched(result) == shards and all(f.named for f in result.files)
    size = sum(os.path.getsize(p) for p in shards)
    assert result.model_bytes == result.bytes_read == size
    assert result.cache is not None and result.cache.cold
    assert "not-cold" not in {f.code for f in result.findings}
    assert not any("no model was named" in note for note in result.notes)


def test_a_watch_of_a_folder_is_of_the_model_open_model_finds_there(tmp_path: Path) -> None:
    """Its index's shards: not a consolidated copy beside them the program never reads."""
    index = write_safetensors_model(tmp_path / "m", layers=1, hidden=64, vocab=128, shards=2)
    shards = shards_of(index)
    shutil.copy(shards[0], index.parent / "consolidated.safetensors")
    result = reading(shards, model=index.parent).run()
    assert watched(result) == shards and result.cache is not None and result.cache.cold
    assert result.model_bytes == sum(os.path.getsize(p) for p in shards)


@pytest.mark.parametrize("how", ["model", "argument"])
def test_a_watch_of_hub_and_ollama_references(model_home: SimpleNamespace, how: str) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama"]
    shards = sorted(str(p) for p in snapshot.glob("*.safetensors"))
    blob = str(resolve_model("ollama:tinyllama").files[0])
    references = ["hf:acme/tiny-llama", "ollama:tinyllama"]
    if how == "model":
        watch = reading([*shards, blob], model=references)
    else:
        watch = reading([*shards, blob], *references)
    result = watch.run()
    assert result.exit_code == 0
    expected = sorted(os.path.realpath(p) for p in [*shards, blob])
    assert watched(result) == expected and all(f.named for f in result.files)
    assert result.cache is not None and result.cache.cold
    assert result.bytes_read == sum(os.path.getsize(p) for p in expected)


def test_a_file_named_as_weights_without_their_first_bytes_is_not_the_model(
    tmp_path: Path,
) -> None:
    """A data file named big.bin in a command's arguments is not torch's pytorch_model.bin:
    its first bytes are neither a zip's nor a pickle's."""
    from modelmon.core.watching.files import holds_weights
    from modelmon.core.watching.naming import models_in_arguments

    data = tmp_path / "big.bin"
    data.write_bytes(os.urandom(1 << 20))
    torch_file = tmp_path / "pytorch_model.bin"
    torch_file.write_bytes(b"PK\x03\x04" + os.urandom(1000))
    assert not holds_weights(str(data)) and holds_weights(str(torch_file))
    found, _ = models_in_arguments(["python", "x.py", str(data), str(torch_file)])
    assert [m.files for m in found] == [(str(torch_file),)]
