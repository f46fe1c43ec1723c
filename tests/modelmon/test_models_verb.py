"""`modelmon models`, and references given to the other verbs, on a fake home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelmon.cli import main
from modelmon.core import write_gguf_model

EXIT_USAGE, EXIT_BAD_MODEL = 2, 3


def strict_json(text: str) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_models_json_lists_every_store(
    model_home: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "models", "--json")
    assert code == 0, err
    document = strict_json(out)
    assert document["schema_version"] == 1
    models = {model["reference"]: model for model in document["models"]}
    assert set(models) == {
        "hf:acme/tiny-llama",
        "hf:acme/tiny-llama-GGUF/tiny-F16.gguf",
        "hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf",
        "ollama:tinyllama:latest",
        str(model_home.lmstudio_gguf),
    }
    for model in document["models"]:
        assert model["format"] in ("safetensors", "gguf")
        real = [os.path.realpath(path) for path in model["files"]]
        assert model["bytes"] == sum(os.path.getsize(path) for path in real) > 0
        assert model["storage"]["fs_type"] and model["source"] in ("hf", "ollama", "lmstudio")
    assert len(models["hf:acme/tiny-llama"]["files"]) == 2
    sources = [model["source"] for model in document["models"]]
    assert sources == sorted(sources)
    assert document["skipped"] == [] and document["truncated"] is False


def test_models_text_lists_reference_name_format_files_size_and_where(
    model_home: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(capsys, "models")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["REFERENCE", "NAME", "FORMAT", "FILES", "SIZE", "WHERE"]
    sharded = next(line for line in lines if line.startswith("hf:acme/tiny-llama "))
    assert sharded.split()[1:4] == ["acme/tiny-llama", "safetensors", "2"]
    assert "local" in sharded
    assert len(lines) == 6


def test_models_dir_is_repeatable(
    model_home: SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tiny = {"layers": 1, "hidden": 64, "vocab": 128}
    first = write_gguf_model(tmp_path / "one" / "a.gguf", tensor_type="Q8_0", **tiny)
    second = write_gguf_model(tmp_path / "two" / "b.gguf", tensor_type="Q8_0", **tiny)
    code, out, _ = run_cli(
        capsys, "models", "--json", "--dir", str(first.parent), "--dir", str(second.parent)
    )
    folders = [m["reference"] for m in strict_json(out)["models"] if m["source"] == "folder"]
    assert code == 0 and folders == [str(first), str(second)]


def test_an_empty_home_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.setenv("MODELMON_MODEL_DIRS", str(tmp_path))
    code, out, _ = run_cli(capsys, "models")
    assert code == 0 and out == f"No models found in the 1 place searched: {tmp_path}\n"


def test_a_home_without_any_store_says_so_and_how_to_name_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "LLAMA_CACHE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "ollama"))
    monkeypatch.delenv("MODELMON_MODEL_DIRS", raising=False)
    code, out, _ = run_cli(capsys, "models")
    assert code == 0 and out.startswith("No models found: none of the places they are kept (")
    assert "--dir DIR" in out and "0" not in out


@pytest.mark.parametrize("reference", ["hf:acme/tiny-llama", "ollama:tinyllama"])
def test_inspect_takes_a_reference(
    model_home: SimpleNamespace, capsys: pytest.CaptureFixture[str], reference: str
) -> None:
    code, out, err = run_cli(capsys, "inspect", reference, "--json")
    assert code == 0, err
    info = strict_json(out)
    assert info["format"] == ("safetensors" if reference.startswith("hf:") else "gguf")
    assert info["storage"] and info["storage"][0]["fs_type"]


def _break_dangling_blob(home: SimpleNamespace) -> str:
    os.unlink(os.path.realpath(home.snapshots["acme/tiny-llama-GGUF"] / "tiny-F16.gguf"))
    return "hf:acme/tiny-llama-GGUF/tiny-F16.gguf"


def _break_model_layer(home: SimpleNamespace) -> str:
    document = json.loads(home.manifest.read_text())
    home.manifest.write_text(json.dumps({**document, "layers": document["layers"][1:]}))
    return "ollama:tinyllama"


def _fifo_manifest(home: SimpleNamespace) -> str:
    home.manifest.unlink()
    os.mkfifo(home.manifest)
    return "ollama:tinyllama:latest"


@pytest.mark.timeout(30)  # the FIFO case would hang forever if a manifest were opened blindly
@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (_break_dangling_blob, "points to a missing blob"),
        (_break_model_layer, "has 0 layers of type application/vnd.ollama.image.model"),
        (_fifo_manifest, "not a regular file"),
        (lambda home: "ollama:tinyllama:8b", "no tag 8b in"),
        (lambda home: "hf:acme/absent", "not in the Hugging Face cache"),
        (lambda home: "hf:acme/tiny-llama@v9", "no revision v9 in"),
    ],
)
def test_a_missing_or_broken_reference_is_one_line_and_exit_3(
    model_home: SimpleNamespace, capsys: pytest.CaptureFixture[str], make, problem: str
) -> None:
    reference = make(model_home)
    code, out, err = run_cli(capsys, "inspect", reference)
    assert code == EXIT_BAD_MODEL and out == ""
    assert len(err.splitlines()) == 1 and err.endswith("\n")
    assert err.startswith(f"modelmon: {reference}: ") and problem in err


@pytest.mark.parametrize("reference", ["hf:tiny-llama", "ollama:a:b:c", "hf:acme/x/../y"])
def test_a_malformed_reference_is_one_line_and_exit_2(
    model_home: SimpleNamespace, capsys: pytest.CaptureFixture[str], reference: str
) -> None:
    code, out, err = run_cli(capsys, "inspect", reference)
    assert code == EXIT_USAGE and out == ""
    assert err == f"modelmon: {reference}: not a model reference; write {err.split('write ')[1]}"
    assert len(err.splitlines()) == 1


def test_the_console_script_lists_and_inspects(model_home: SimpleNamespace) -> None:
    """As users run it: a separate process that finds the stores from its environment."""

    def modelmon(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "modelmon", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    listed = modelmon("models", "--json")
    assert listed.returncode == 0, listed.stderr
    references = [model["reference"] for model in strict_json(listed.stdout)["models"]]
    assert "ollama:tinyllama:latest" in references and "hf:acme/tiny-llama" in references
    inspected = modelmon("inspect", "hf:acme/tiny-llama-GGUF/tiny-Q8_0.gguf")
    assert inspected.returncode == 0, inspected.stderr
    assert "gguf" in inspected.stdout.lower()
    missing = modelmon("inspect", "ollama:absent")
    assert missing.returncode == EXIT_BAD_MODEL
    assert missing.stderr.count("\n") == 1 and "ollama:absent: no manifest" in missing.stderr
