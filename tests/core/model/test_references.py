"""Model references: their grammar, and what they resolve to in a fake home's stores."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.core import load
from modelmon.core.errors import ModelFormatError, ModelReferenceError, ReferenceSyntaxError
from modelmon.core.model.formats import open_model
from modelmon.core.model.references import (
    HubReference,
    OllamaReference,
    parse_reference,
    resolve_reference,
)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("hf:org/name", HubReference("org/name")),
        ("hf:org/name@main", HubReference("org/name", "main")),
        (
            "hf:Org_1/Na.me-2@1a2b3c/sub/m.gguf",
            HubReference("Org_1/Na.me-2", "1a2b3c", "sub/m.gguf"),
        ),
        (
            "hf:org/name/model.safetensors.index.json",
            HubReference("org/name", None, "model.safetensors.index.json"),
        ),
        ("ollama:llama3", OllamaReference("llama3")),
        ("ollama:llama3.2:1b", OllamaReference("llama3.2", "1b")),
        ("ollama:me/mine:v2", OllamaReference("mine", "v2", "me")),
        ("ollama:hf.co/org/repo:Q4_K_M", OllamaReference("repo", "Q4_K_M", "org", "hf.co")),
    ],
)
def test_references_parse_and_print_back(text: str, parsed: object) -> None:
    assert parse_reference(text) == parsed
    shown = str(parsed)
    assert parse_reference(shown) == parsed
    assert shown == text or (text == "ollama:llama3" and shown == "ollama:llama3:latest")


@pytest.mark.parametrize(
    "text",
    [
        "hf:",
        "hf:name",
        "hf:org/",
        "hf:/name",
        "hf:org/na--me",
        "hf:org/na..me",
        "hf:-org/name",
        "hf:org/name@",
        "hf:org/name@a b",
        "hf:org/name/../../etc/passwd",
        "hf:org/name//file",
        "ollama:",
        "ollama:a/b/c/d",
        "ollama:name:",
        "ollama:na me",
        "ollama:a:b:c",
        "ollama:../x",
    ],
)
def test_malformed_references_are_one_line_syntax_errors(text: str) -> None:
    with pytest.raises(ReferenceSyntaxError) as caught:
        parse_reference(text)
    message = str(caught.value)
    assert message.startswith(f"{text}: not a model reference; write ")
    assert "\n" not in message


def test_plain_paths_and_path_objects_are_not_references(tmp_path: Path) -> None:
    assert parse_reference("model.gguf") is None
    assert parse_reference("/models/hf/x.gguf") is None
    assert resolve_reference("./hf:org/name") is None
    with pytest.raises(ModelFormatError, match="no such file"):
        open_model(Path("hf:org/name"))  # a Path is always a path


def test_hub_references_resolve_to_the_snapshot(model_home: SimpleNamespace) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama"]
    commit = model_home.commits["acme/tiny-llama"]
    assert resolve_reference("hf:acme/tiny-llama") == snapshot
    assert resolve_reference("hf:acme/tiny-llama@main") == snapshot
    assert resolve_reference(f"hf:acme/tiny-llama@{commit}") == snapshot
    assert resolve_reference(f"hf:acme/tiny-llama@{commit[:7]}") == snapshot
    quant = resolve_reference("hf:acme/tiny-llama-GGUF/tiny-F16.gguf")
    assert quant == model_home.snapshots["acme/tiny-llama-GGUF"] / "tiny-F16.gguf"
    model = open_model("hf:acme/tiny-llama")
    assert model.format == "safetensors" and len(model.files) == 2
    assert model.path == str(snapshot / "model.safetensors.index.json")


def test_ollama_references_resolve_to_the_model_blob(model_home: SimpleNamespace) -> None:
    blob = resolve_reference("ollama:tinyllama")
    assert blob is not None and blob.parent == model_home.ollama / "blobs"
    assert resolve_reference("ollama:tinyllama:latest") == blob
    assert resolve_reference("ollama:registry.ollama.ai/library/tinyllama:latest") == blob
    assert open_model("ollama:tinyllama").format == "gguf"


def test_load_takes_a_reference(model_home: SimpleNamespace) -> None:
    tensors = load("ollama:tinyllama", "sequential")
    assert tensors and set(tensors) == {e.name for e in open_model("ollama:tinyllama").extents}


def _problem(text: str) -> str:
    with pytest.raises(ModelReferenceError) as caught:
        open_model(text)
    message = str(caught.value)
    assert message.startswith(f"{text}: ") and "\n" not in message
    assert isinstance(caught.value, ModelFormatError)  # reported like any bad model
    return message


def test_missing_and_broken_hub_references_say_what_and_where(model_home: SimpleNamespace) -> None:
    hub = model_home.hub
    assert f"no models--acme--nothing in {hub}" in _problem("hf:acme/nothing")
    assert f"no revision v2 in {hub}/models--acme--tiny-llama" in _problem("hf:acme/tiny-llama@v2")
    assert "no absent.gguf in snapshot" in _problem("hf:acme/tiny-llama-GGUF/absent.gguf")
    snapshot = model_home.snapshots["acme/tiny-llama-GGUF"]
    blob = os.path.realpath(snapshot / "tiny-F16.gguf")
    os.unlink(blob)
    for text in ("hf:acme/tiny-llama-GGUF/tiny-F16.gguf", "hf:acme/tiny-llama-GGUF"):
        assert f"tiny-F16.gguf in snapshot 222222222222 points to a missing blob ({blob};" in (
            _problem(text)
        )
    assert open_model("hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf").format == "gguf"
    repo_dir = hub / "models--acme--tiny-llama"
    (repo_dir / "refs" / "main").write_text("f" * 40)
    assert f"refs/main names {'f' * 40}, but {repo_dir}/snapshots has no such" in _problem(
        "hf:acme/tiny-llama"
    )
    (repo_dir / "refs" / "main").unlink()
    os.mkfifo(repo_dir / "refs" / "main")  # must not hang
    assert "refs/main: not a regular file" in _problem("hf:acme/tiny-llama")
    (repo_dir / "refs" / "main").unlink()
    (repo_dir / "snapshots" / ("1" * 40)).rename(repo_dir / "snapshots" / ("4" * 40))
    assert open_model("hf:acme/tiny-llama").format == "safetensors"  # the only snapshot
    (repo_dir / "snapshots" / ("4" * 40)).rename(repo_dir / "old")
    assert _problem("hf:acme/tiny-llama") == (
        f"hf:acme/tiny-llama: no snapshot in {repo_dir} (looked for refs/main)"
    )


def test_missing_and_broken_ollama_references_say_what_and_where(
    model_home: SimpleNamespace,
) -> None:
    manifests = model_home.ollama / "manifests"
    assert _problem("ollama:nothing") == (
        f"ollama:nothing: no manifest registry.ollama.ai/library/nothing/latest in {manifests}"
    )
    assert "no tag 8b in" in _problem("ollama:tinyllama:8b")
    assert "(tags: latest)" in _problem("ollama:tinyllama:8b")
    document = json.loads(model_home.manifest.read_text())
    blob = model_home.ollama / "blobs" / document["layers"][0]["digest"].replace(":", "-")
    blob.unlink()
    assert f"blob {blob} named by {model_home.manifest} is missing" in _problem("ollama:tinyllama")
    model_home.manifest.write_text(json.dumps({**document, "layers": document["layers"][1:]}))
    assert "has 0 layers of type application/vnd.ollama.image.model" in _problem("ollama:tinyllama")
    model_home.manifest.write_text("{not json")
    assert "not valid JSON" in _problem("ollama:tinyllama")
    model_home.manifest.unlink()
    os.mkfifo(model_home.manifest)
    assert "not a regular file" in _problem("ollama:tinyllama")


def test_a_repo_of_quantizations_asks_for_one_by_name(model_home: SimpleNamespace) -> None:
    assert _problem("hf:acme/tiny-llama-GGUF") == (
        "hf:acme/tiny-llama-GGUF: 2 GGUF files in snapshot 222222222222; name one: "
        "hf:acme/tiny-llama-GGUF/tiny-F16.gguf, hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf"
    )


def test_a_snapshot_without_weights_is_reported_against_the_reference(
    model_home: SimpleNamespace,
) -> None:
    snapshot = model_home.snapshots["acme/tiny-llama"]
    for file in snapshot.iterdir():
        if file.name != "config.json":
            file.unlink()
    assert _problem("hf:acme/tiny-llama") == (
        f"hf:acme/tiny-llama: directory holds no .safetensors, index or .gguf file (in {snapshot})"
    )


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("s3:/models/lab/", "s3://models/lab/"),
        ("https:/host/m.safetensors", "https://host/m.safetensors"),
    ],
)
def test_a_url_that_lost_a_slash_is_named_as_meant(given: str, meant: str) -> None:
    """ "s3:/bucket/prefix/" is a path that does not exist: the error says so, and names the
    URL the user most likely meant."""
    with pytest.raises(ModelFormatError) as caught:
        open_model(given)
    assert str(caught.value).endswith(
        f"no such file or directory; for a model in object storage, name it {meant}"
    )
