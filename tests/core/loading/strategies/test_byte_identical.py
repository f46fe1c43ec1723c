"""THE test: every strategy, in-process and in worker processes, with 1 and 4 workers, yields
tensors byte-identical to what the safetensors / gguf libraries read."""

from __future__ import annotations

import zlib
from pathlib import Path

import ml_dtypes  # noqa: F401  (safetensors' numpy path needs it for bf16)
import numpy as np
import pytest
import safetensors.numpy

from modelmon.core.api import load
from modelmon.core.loading.result import model_checksum
from modelmon.core.loading.runner import run_load
from modelmon.core.loading.strategies import FILE_STRATEGIES
from modelmon.core.loading.strategies.gguf_reader import read_gguf_tensors
from modelmon.core.model.formats import open_model
from modelmon.core.options import LoadOptions

ALL = list(FILE_STRATEGIES)


def reference(path: Path) -> dict[str, np.ndarray]:
    model = open_model(path)
    if model.format == "gguf":
        return read_gguf_tensors(path)
    tensors: dict[str, np.ndarray] = {}
    for file in model.files:
        tensors.update(safetensors.numpy.load_file(file.path))
    return tensors


def assert_identical(
    got: dict[str, np.ndarray], expected: dict[str, np.ndarray], label: str = ""
) -> None:
    """Every tensor of ``expected`` in ``got``, byte for byte; a failure names ``label`` (the
    model) and the tensor."""
    assert list(got) != [] and set(got) == set(expected), label
    for name, array in expected.items():
        assert got[name].dtype == array.dtype, f"{label}: {name}"
        assert got[name].shape == array.shape, f"{label}: {name}"
        assert got[name].tobytes() == array.tobytes(), f"{label}: {name}"


def model_paths(
    sharded_model: Path, bf16_model: Path, gguf_models: dict[str, Path]
) -> dict[str, Path]:
    return {
        "sharded-f16": sharded_model,
        "bf16": bf16_model,
        **{f"gguf-{k}": p for k, p in gguf_models.items()},
    }


@pytest.mark.parametrize("strategy", ALL)
@pytest.mark.parametrize("workers", [1, 4])
def test_in_process_load_is_byte_identical(
    strategy: str,
    workers: int,
    sharded_model: Path,
    bf16_model: Path,
    gguf_models: dict[str, Path],
) -> None:
    for label, path in model_paths(sharded_model, bf16_model, gguf_models).items():
        got = load(path, strategy, workers=workers, threads=2, chunk=64 << 10)
        assert_identical(got, reference(path), label)


@pytest.mark.parametrize("strategy", ALL)
@pytest.mark.parametrize("workers", [1, 4])
def test_worker_processes_checksum_equals_reference(
    strategy: str, workers: int, sharded_model: Path, gguf_models: dict[str, Path]
) -> None:
    """Worker processes keep their tensors; their crc32s must equal the reference bytes'."""
    for path in (sharded_model, gguf_models["Q4_K"], gguf_models["F16"]):
        expected = {n: zlib.crc32(a.tobytes()) for n, a in reference(path).items()}
        options = LoadOptions(
            workers=workers, threads=2, chunk=256 << 10, verify=True, cache="cold"
        )
        result = run_load(path, strategy, options)
        assert result.status == "ok", result.error
        assert result.tensor_checksums == expected
        assert result.checksum == model_checksum(expected, open_model(path))
        assert result.bytes == open_model(path).total_bytes
        assert len(result.workers) == workers


@pytest.mark.parametrize("strategy", ALL)
def test_discard_mode_verifies_without_keeping(strategy: str, sharded_model: Path) -> None:
    expected = {n: zlib.crc32(a.tobytes()) for n, a in reference(sharded_model).items()}
    keep = run_load(sharded_model, strategy, LoadOptions(workers=2, verify=True))
    stream = run_load(
        sharded_model, strategy, LoadOptions(workers=2, verify=True, discard=True, chunk=64 << 10)
    )
    assert keep.tensor_checksums == stream.tensor_checksums == expected
    assert load(sharded_model, strategy, discard=True, chunk=64 << 10) == {}
