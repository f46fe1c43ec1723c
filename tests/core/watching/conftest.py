"""Models for the watched programs: small real files made by synth."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelmon.core.model.synth import write_safetensors_model


@pytest.fixture(scope="session")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 36 MB single-file safetensors model."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("watched"), layers=4, hidden=512, vocab=4096, seed=7
    )


@pytest.fixture(scope="session")
def large_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 270 MB model: several times this machine's readahead, so that a program that
    touches a few pages brings in a small part of it."""
    return write_safetensors_model(
        tmp_path_factory.mktemp("watched-large"), layers=8, hidden=1024, vocab=16384, seed=8
    )
