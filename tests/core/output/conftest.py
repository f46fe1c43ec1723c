"""Checkpoints of each kind the loaders' lines are for (``model.kind``): a transformers
model's folder (config.json: what vLLM serves) and a diffusers pipeline's (model_index.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelmon.core.model.synth import write_safetensors_model


@pytest.fixture(scope="session")
def transformers_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("served model")  # a space: every line must quote it
    return write_safetensors_model(folder, layers=2, hidden=64, vocab=256, transformers_config=True)


@pytest.fixture(scope="session")
def diffusers_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pipeline")
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "StableDiffusionPipeline"}))
    return write_safetensors_model(folder / "unet", layers=1, hidden=64, vocab=256)
