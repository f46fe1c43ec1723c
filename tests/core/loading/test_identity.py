"""A config records what it was measured on; applied elsewhere it warns and still applies.
A peer that won is the recorded overall pick, while [recommended] keeps modelmon's best."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

import modelmon.core
from modelmon.core.configuration import parse_engine
from modelmon.core.errors import ConfigError, ConfigMismatchWarning, ModelmonWarning
from modelmon.core.loading.config_file import read_config
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.output.config import build_document
from modelmon.core.output.config_text import write_config

from ..measuring.records import candidate, run


def _document(model_path: Path, pick: Candidate | None = None) -> dict:
    model = open_model(model_path)
    winner = candidate("pread", 900.0, 950.0, 1000.0, workers=2)
    other = candidate("mmap", 400.0, workers=2)
    return build_document(
        model,
        winner,
        [winner, other],
        None,
        ["Best: pread."],
        config_name="m.toml",
        cache="cold",
        usable_ram=1 << 30,
        pick=pick,
    )


@pytest.fixture
def two_models(tmp_path: Path) -> tuple[Path, Path]:
    one = write_safetensors_model(tmp_path / "a", layers=2, hidden=64, vocab=256, seed=3)
    two = write_safetensors_model(tmp_path / "b", layers=3, hidden=64, vocab=256, seed=4)
    return one, two


def test_identity_is_recorded_and_reads_back(two_models: tuple[Path, Path], tmp_path: Path) -> None:
    path, _ = two_models
    document = _document(path)
    identity = document["identity"]
    model = open_model(path)
    assert identity["tensors"] == len(model.extents)
    assert identity["tensor_bytes"] == model.total_bytes
    assert identity["storage"] in ("local", "fuse", "network")
    assert [f["name"] for f in identity["files"]] == [Path(f.path).name for f in model.files]
    assert [f["size"] for f in identity["files"]] == [f.size for f in model.files]
    config = read_config(write_config(tmp_path / "m.toml", document))
    assert config.document["identity"] == identity


def test_same_model_applies_without_a_warning(
    two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    path, _ = two_models
    config = write_config(tmp_path / "m.toml", _document(path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensors = modelmon.core.load(path, config=config)
    assert len(tensors) == len(open_model(path).extents)


def test_config_applied_to_the_wrong_model_warns_one_line_and_loads(
    two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    measured_on, other = two_models
    config = write_config(tmp_path / "m.toml", _document(measured_on))
    with pytest.warns(ConfigMismatchWarning) as caught:
        tensors = modelmon.core.load(other, config=config)
    assert len(tensors) == len(open_model(other).extents)  # applied anyway
    message = str(caught[0].message)
    assert caught[0].filename == __file__  # the caller's line, however deep it arose
    assert "\n" not in message and str(config) in message
    assert "tensors" in message and "→" in message
    assert issubclass(ConfigMismatchWarning, ModelmonWarning)


def test_measure_warns_when_the_model_changed_since(
    two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    path, _ = two_models
    config = write_config(tmp_path / "m.toml", _document(path))
    file = open_model(path).files[0].path
    stat = os.stat(file)
    os.utime(file, (stat.st_atime, stat.st_mtime + 3600))
    with pytest.warns(ConfigMismatchWarning, match="modified since"):
        result = modelmon.core.measure(path, config=config, workers=1)
    assert result.status == "ok"


def test_other_storage_is_named(two_models: tuple[Path, Path], tmp_path: Path) -> None:
    path, _ = two_models
    document = _document(path)
    here = document["identity"]["storage"]
    document["identity"]["storage"] = "fuse" if here != "fuse" else "local"
    config = write_config(tmp_path / "m.toml", document)
    with pytest.warns(ConfigMismatchWarning, match=f"storage {document['identity']['storage']}"):
        modelmon.core.load(path, config=config)


def test_bad_identity_is_one_line_naming_the_key(
    two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    document = _document(two_models[0])
    document["identity"]["files"][0].pop("mtime")
    with pytest.raises(ConfigError, match=r"identity\.files\[1\]"):
        read_config(write_config(tmp_path / "m.toml", document))


def test_a_peer_pick_is_recorded_and_the_config_stays_applicable(
    two_models: tuple[Path, Path], tmp_path: Path
) -> None:
    settings = parse_engine("runai RUNAI_STREAMER_CONCURRENCY=16")
    peer = Candidate(settings, role="peer", results=[run(1500.0)])
    path, _ = two_models
    document = _document(path, pick=peer)
    assert document["recommendation"] == {
        "pick": settings.spec,
        "loader": settings.spec,
        "median_mbps": 1500.0,
        "runs": 1,
        "in_config": False,
    }
    assert document["recommended"]["strategy"] == "pread"  # modelmon's best, applicable
    # modelmon's line is pasted as it is; its evidence names the overall pick beside it.
    assert document["apply"]["modelmon"].startswith(
        "import modelmon.core; tensors = modelmon.core.load("
    )
    assert settings.spec in document["apply_evidence"]["modelmon"]
    config = write_config(tmp_path / "m.toml", document)
    assert read_config(config).strategy == "pread"
    assert len(modelmon.core.load(path, config=config)) == len(open_model(path).extents)


def test_modelmon_pick_is_in_the_config(two_models: tuple[Path, Path]) -> None:
    recommendation = _document(two_models[0])["recommendation"]
    assert recommendation["loader"] == "modelmon" and recommendation["in_config"] is True
    assert recommendation["pick"] == "pread workers=2 threads=1"
