"""Model factories shared by the core tests: small, real files made by the synth module."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core.synth import write_gguf_model, write_safetensors_model


@pytest.fixture(scope="session")
def sharded_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-shard Llama-shaped F16 checkpoint (~6 MB) with its index."""
    folder = tmp_path_factory.mktemp("sharded")
    return write_safetensors_model(folder, layers=4, hidden=128, vocab=512, dtype="F16",
                                   shards=3, seed=1)


@pytest.fixture(scope="session")
def bf16_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bf16")
    return write_safetensors_model(folder, layers=2, hidden=64, vocab=256, dtype="BF16", seed=2)


@pytest.fixture(scope="session")
def gguf_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """GGUF files with F32, F16, Q8_0 and Q4_K weights (norms are F32 in each)."""
    folder = tmp_path_factory.mktemp("gguf")
    return {
        kind: write_gguf_model(folder / f"model-{kind}.gguf", layers=2, hidden=256, vocab=512,
                               tensor_type=kind, seed=3)
        for kind in ("F32", "F16", "Q8_0", "Q4_K")
    }
