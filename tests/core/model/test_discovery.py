"""Discovery on a fake home: the HF hub cache, Ollama, LM Studio, llama.cpp, user folders."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core.errors import ModelReferenceError
from modelmon.core.model import discovery
from modelmon.core.model.discovery import MAX_FOLDER_DEPTH, discover_models
from modelmon.core.model.formats import open_model
from modelmon.core.model.stores import (
    hub_cache_dir,
    llamacpp_cache_dirs,
    ollama_model_dirs,
    user_model_dirs,
)
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.model.synth_gguf import write_gguf_model
from modelmon.core.system.storage import storage_facts

TINY = {"layers": 1, "hidden": 64, "vocab": 128}


def by_reference(found: discovery.Discovery) -> dict[str, discovery.DiscoveredModel]:
    return {model.reference: model for model in found.models}


def test_every_store_is_listed_with_format_files_bytes_and_revision(
    model_home: SimpleNamespace,
) -> None:
    found = discover_models()
    models = by_reference(found)
    studio = str(model_home.lmstudio_gguf)
    assert set(models) == {
        "hf:acme/tiny-llama",
        "hf:acme/tiny-llama-GGUF/tiny-F16.gguf",
        "hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf",
        "ollama:tinyllama:latest",
        studio,
    }
    sharded = models["hf:acme/tiny-llama"]
    snapshot = model_home.snapshots["acme/tiny-llama"]
    assert (sharded.source, sharded.format, sharded.name) == (
        "hf",
        "safetensors",
        "acme/tiny-llama",
    )
    assert sharded.path == str(snapshot / "model.safetensors.index.json")
    assert [Path(f).name for f in sharded.files] == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    # Sizes are the blobs' (the snapshot holds symlinks), and nothing but the weight files.
    assert all(os.path.islink(f) for f in sharded.files)
    assert sharded.bytes == sum(os.path.getsize(os.path.realpath(f)) for f in sharded.files)
    assert sharded.revision == model_home.commits["acme/tiny-llama"]
    quant = models["hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf"]
    assert (quant.format, quant.name) == ("gguf", "acme/tiny-llama-GGUF/tiny-Q8_0.gguf")
    assert quant.revision == model_home.commits["acme/tiny-llama-GGUF"]
    pulled = models["ollama:tinyllama:latest"]
    assert (pulled.source, pulled.format, pulled.name) == ("ollama", "gguf", "tinyllama:latest")
    assert Path(pulled.path).name == pulled.revision.replace(":", "-")
    assert pulled.bytes == os.path.getsize(pulled.path)
    assert (models[studio].source, models[studio].name) == (
        "lmstudio",
        "acme/tiny-GGUF/tiny-Q8_0.gguf",
    )
    assert [(m.source, m.name) for m in found.models] == sorted(
        (m.source, m.name) for m in found.models
    )
    assert found.skipped == () and not found.truncated
    assert str(model_home.hub) in found.searched and str(model_home.ollama) in found.searched


def test_each_reference_opens_the_model_it_lists(model_home: SimpleNamespace) -> None:
    for listed in discover_models().models:
        model = open_model(listed.reference)
        assert model.format == listed.format
        assert model.file_bytes == listed.bytes, listed.reference
        real = sorted(os.path.realpath(file.path) for file in model.files)
        assert real == sorted(os.path.realpath(file) for file in listed.files)


def test_storage_facts_are_worked_out_once_per_filesystem(
    model_home: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def counting(path: str) -> discovery.StorageFacts:
        calls.append(path)
        return storage_facts(path)

    monkeypatch.setattr(discovery, "storage_facts", counting)
    models = discover_models().models
    devices = {os.stat(model.files[0]).st_dev for model in models}
    assert len(calls) == len(devices) < len(models)
    expected = storage_facts(model_home.home)
    for model in models:
        assert model.storage is not None
        assert (model.storage.fs_type, model.storage.mount_point) == (
            expected.fs_type,
            expected.mount_point,
        )
        # The facts name the model's own bytes (the resolved blob), not another model's.
        assert model.storage.path == os.path.realpath(model.files[0])


def test_a_home_of_unrelated_files_is_not_walked(model_home: SimpleNamespace) -> None:
    for folder in ("Documents", "Pictures", ".cache/pip", ".local/share/junk"):
        (model_home.home / folder).mkdir(parents=True)
        for number in range(1250):
            (model_home.home / folder / f"file-{number}.txt").touch()
    found = discover_models()
    assert len(found.models) == 5
    # hub: 2 repo folders + their snapshots (3 + 2 entries); ollama: 1 entry per level + the
    # manifest; LM Studio: 1 + 1 + 1. Bounded by the stores' size, not by the home's.
    assert found.entries_visited < 30, found.entries_visited


def test_the_entry_budget_bounds_a_huge_user_folder(model_home: SimpleNamespace) -> None:
    junk = model_home.home / "junk"
    junk.mkdir()
    for number in range(3000):
        (junk / f"file-{number}").touch()
    found = discover_models([model_home.home], max_entries=500)
    assert found.truncated and found.entries_visited == 500


def test_user_folders_from_arguments_and_environment(
    model_home: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, third = (tmp_path / name for name in ("first", "second", "third"))
    write_gguf_model(first / "a" / "one.gguf", tensor_type="Q8_0", **TINY)
    write_safetensors_model(second / "b", dtype="F16", shards=2, **TINY)
    write_safetensors_model(third, dtype="BF16", **TINY)
    monkeypatch.setenv("MODELMON_MODEL_DIRS", f"{second}{os.pathsep}{third}")
    folder_models = [m for m in discover_models([first]).models if m.source == "folder"]
    assert [(m.name, m.format, len(m.files)) for m in folder_models] == [
        ("a/one.gguf", "gguf", 1),
        ("b/model.safetensors.index.json", "safetensors", 2),
        ("model.safetensors", "safetensors", 1),
    ]
    assert folder_models[0].reference == str(first / "a" / "one.gguf")


def test_user_folders_are_searched_to_a_depth_and_skip_hidden_folders(
    model_home: SimpleNamespace, tmp_path: Path
) -> None:
    root = tmp_path / "models"
    deep = root.joinpath(*[f"d{level}" for level in range(MAX_FOLDER_DEPTH)])
    write_gguf_model(deep / "deepest.gguf", tensor_type="Q8_0", **TINY)
    write_gguf_model(deep / "too-deep" / "lost.gguf", tensor_type="Q8_0", **TINY)
    write_gguf_model(root / ".trash" / "hidden.gguf", tensor_type="Q8_0", **TINY)
    names = [m.name for m in discover_models([root]).models if m.source == "folder"]
    assert names == [str(Path(*deep.relative_to(root).parts, "deepest.gguf"))]


def test_symlink_loops_end_and_nothing_is_listed_twice(
    model_home: SimpleNamespace, tmp_path: Path
) -> None:
    root = tmp_path / "models"
    write_gguf_model(root / "llama" / "m.gguf", tensor_type="Q8_0", **TINY)
    (root / "llama" / "again").symlink_to(root)  # a loop
    (root / "alias").symlink_to(root / "llama")  # a second way in
    (root / "hub").symlink_to(model_home.hub)  # a store, already listed as hf
    found = discover_models([root, root / "llama"])
    folder_models = [m for m in found.models if m.source == "folder"]
    assert [m.name for m in folder_models] == ["llama/m.gguf"]
    assert len(found.models) == 6


def test_a_repo_without_refs_main_lists_its_only_snapshot(model_home: SimpleNamespace) -> None:
    repo_dir = model_home.hub / "models--acme--tiny-llama"
    (repo_dir / "refs" / "main").unlink()
    assert "hf:acme/tiny-llama" in by_reference(discover_models())
    os.symlink(repo_dir / "snapshots" / ("1" * 40), repo_dir / "snapshots" / ("3" * 40))
    found = discover_models()
    assert "hf:acme/tiny-llama" not in by_reference(found)
    assert any("@REVISION: 111111111111, 333333333333" in line for line in found.skipped)


def test_a_dangling_blob_link_skips_that_model_only(model_home: SimpleNamespace) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama-GGUF"]
    os.unlink(os.path.realpath(snapshot / "tiny-F16.gguf"))
    found = discover_models()
    models = by_reference(found)
    assert "hf:acme/tiny-llama-GGUF/tiny-F16.gguf" not in models
    # The survivor keeps its file in the reference: the folder no longer opens cleanly.
    assert "hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf" in models
    assert [line for line in found.skipped if "tiny-F16.gguf" in line]


def test_a_missing_shard_skips_the_sharded_model(model_home: SimpleNamespace) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama"]
    (snapshot / "model-00002-of-00002.safetensors").unlink()
    found = discover_models()
    assert "hf:acme/tiny-llama" not in by_reference(found)
    assert any("shard model-00002-of-00002.safetensors is missing" in s for s in found.skipped)


def test_split_gguf_files_are_reported_not_listed(model_home: SimpleNamespace) -> None:
    folder = model_home.lmstudio / "acme" / "big-GGUF"
    for part in (1, 2):
        write_gguf_model(folder / f"big-Q8_0-0000{part}-of-00002.gguf", tensor_type="Q8_0", **TINY)
    found = discover_models()
    assert not [m for m in found.models if "big" in m.name]
    assert [line for line in found.skipped if "a GGUF split in 2 files" in line]


def test_a_fifo_in_place_of_a_manifest_does_not_hang(model_home: SimpleNamespace) -> None:
    fifo = model_home.manifest.parent.parent / "stuck" / "latest"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    found = discover_models()
    assert "ollama:tinyllama:latest" in by_reference(found)
    assert any("not a regular file" in line and "stuck" in line for line in found.skipped)


def test_a_broken_manifest_is_skipped_with_its_reason(model_home: SimpleNamespace) -> None:
    document = json.loads(model_home.manifest.read_text())
    document["layers"] = document["layers"][1:]  # the license only
    model_home.manifest.write_text(json.dumps(document))
    found = discover_models()
    assert "ollama:tinyllama:latest" not in by_reference(found)
    assert any(
        line.startswith("ollama:tinyllama:latest: manifest") and "0 layers of type" in line
        for line in found.skipped
    )


def test_llamacpp_cache_is_listed(model_home: SimpleNamespace, monkeypatch) -> None:
    cache = model_home.home / "llama-cache"
    gguf = write_gguf_model(cache / "acme_tiny_tiny-Q8_0.gguf", tensor_type="Q8_0", **TINY)
    (cache / "acme_tiny_tiny-Q8_0.gguf.json").write_text("{}")  # llama.cpp's etag record
    monkeypatch.setenv("LLAMA_CACHE", str(cache))
    listed = [m for m in discover_models().models if m.source == "llamacpp"]
    assert [(m.name, m.reference, m.bytes) for m in listed] == [
        (gguf.name, str(gguf), gguf.stat().st_size)
    ]


# --- where the stores are, and reading their bookkeeping ---------------------------------------


def test_store_locations_follow_the_tools_environment_variables(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert hub_cache_dir(home) == tmp_path / ".cache" / "huggingface" / "hub"
    assert hub_cache_dir({**home, "XDG_CACHE_HOME": "/x"}) == Path("/x/huggingface/hub")
    assert hub_cache_dir({**home, "HF_HOME": "~/hf"}) == tmp_path / "hf" / "hub"
    assert hub_cache_dir({**home, "HF_HOME": "/a", "HF_HUB_CACHE": "/b"}) == Path("/b")
    assert ollama_model_dirs({**home, "OLLAMA_MODELS": "/o"}) == (Path("/o"),)
    assert ollama_model_dirs(home)[0] == tmp_path / ".ollama" / "models"
    assert Path("/usr/share/ollama/.ollama/models") in ollama_model_dirs(home)
    assert llamacpp_cache_dirs(home) == (tmp_path / ".cache" / "llama.cpp",)
    assert user_model_dirs({**home, "MODELMON_MODEL_DIRS": f"/m{os.pathsep}{os.pathsep}~/n"}) == (
        Path("/m"),
        tmp_path / "n",
    )


def test_a_blob_shorter_than_its_manifest_says_is_refused(model_home: SimpleNamespace) -> None:
    blob = next((model_home.ollama / "blobs").iterdir())
    with open(blob, "r+b") as handle:
        handle.truncate(blob.stat().st_size - 1)
    with pytest.raises(ModelReferenceError, match=r"bytes, the manifest says \d+ \(an interrupted"):
        open_model("ollama:tinyllama")
