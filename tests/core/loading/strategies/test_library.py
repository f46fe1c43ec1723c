"""The library strategy on the dtypes safetensors' numpy path has no numpy name for: float8
loads through the library's own code (numpy lends ml_dtypes' types the names it asks for);
F4 and the 6-bit types are refused in one line before anything starts."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

import modelmon.core as core
from modelmon.core.errors import LoadError

FLOAT8 = ("F8_E4M3", "F8_E5M2", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ")


def write(path: Path, tensors: dict[str, tuple[str, list[int], bytes]]) -> Path:
    header: dict[str, object] = {}
    data = b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [len(data), len(data) + len(payload)],
        }
        data += payload
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    return path


def test_float8_tensors_load_with_the_library(tmp_path: Path) -> None:
    tensors = {
        f"w.{dtype}": (dtype, [2, 8], bytes(range(16 * n, 16 * n + 16)))
        for n, dtype in enumerate(FLOAT8)
    }
    tensors["w.BF16"] = ("BF16", [4], bytes(range(8)))
    tensors["w.F32"] = ("F32", [2], np.arange(2, dtype="<f4").tobytes())
    path = write(tmp_path / "f8.safetensors", tensors)
    loaded = core.load(path, "library")
    assert {name: array.tobytes() for name, array in loaded.items()} == {
        name: payload for name, (_, _, payload) in tensors.items()
    }
    assert all(loaded[name].shape == tuple(shape) for name, (_, shape, _) in tensors.items())
    assert not hasattr(np, "float8_e4m3fn")  # lent for the load only
    result = core.measure(path, "library", verify=True, cache="keep")  # in worker processes
    assert result.status == "ok", result.error
    assert result.checksum == core.measure(path, "pread", verify=True, cache="keep").checksum


@pytest.mark.parametrize("dtype", ["F4", "F6_E2M3", "F6_E3M2"])
def test_types_without_a_numpy_type_are_refused_before_the_load(tmp_path: Path, dtype: str):
    shape, size = ([8], 4) if dtype == "F4" else ([4], 3)
    path = write(tmp_path / "packed.safetensors", {"w": (dtype, shape, bytes(size))})
    for attempt in (lambda: core.load(path, "library"), lambda: core.measure(path, "library")):
        with pytest.raises(LoadError) as caught:
            attempt()
        message = str(caught.value)
        assert f"safetensors cannot hand {dtype} tensors" in message and "\n" not in message
    assert core.load(path, "pread")["w"].tobytes() == bytes(size)  # other strategies load it
