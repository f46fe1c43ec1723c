"""The generated models the benchmark loads: shaped like real LLM checkpoints.

Generated once into the scratch folder and reused while their parameters stay the same (a
``.spec.json`` beside each records them); ``python -m benchmarks.run`` removes the scratch
folder at the end unless told to keep it.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Literal

from benchmarks.records import ModelInfo
from modelmon.core import open_model, write_gguf_model, write_safetensors_model


@dataclass(frozen=True)
class ModelSpec:
    key: str  # short name used in tables and file names
    description: str
    format: Literal["safetensors", "gguf"]
    layers: int
    hidden: int
    vocab: int
    intermediate: int | None = None  # None: the writer's default for ``hidden``
    shards: int = 1  # safetensors files
    tensor_type: str = "Q8_0"  # GGUF tensors
    transformers_config: bool = False  # safetensors: also the config.json transformers loads

    def folder(self, scratch: Path) -> Path:
        return scratch / self.key


# The full run's models. TinyLlama 1.1B's exact shapes in fp16, two shards (2.5 GB): local
# and fuse (FUSE on a multi-GB model, where start-up latency no longer hides the reading); a
# Llama-shaped Q4_K GGUF of 6 layers (0.36 GB: buffered reads of it run at ~70 MB/s in the
# throttle, IOPS-bound, so it costs twice its size in time) and a small 322 MB fp16 model with
# TinyLlama's vocabulary for the throttled disk (hdd), where every load runs at 150 MiB/s and
# the 2.5 GB one would take 17 s or more a load.
TINYLLAMA = ModelSpec(
    "tinyllama-f16",
    "TinyLlama-1.1B shapes, fp16, 2 safetensors shards",
    "safetensors",
    layers=22,
    hidden=2048,
    intermediate=5632,
    vocab=32000,
    shards=2,
)
GGUF_Q4K = ModelSpec(
    "llama-q4k",
    "Llama-shaped (6 layers, hidden 2560), Q4_K GGUF",
    "gguf",
    layers=6,
    hidden=2560,
    vocab=32000,
    tensor_type="Q4_K",
)
SMALL = ModelSpec(
    "small-f16",
    "8 layers, hidden 1024, TinyLlama vocabulary, fp16, 1 file, with the config.json that "
    "transformers loads",
    "safetensors",
    layers=8,
    hidden=1024,
    intermediate=2816,
    vocab=32000,
    transformers_config=True,
)
# The engines' models, on the FUSE mount and the throttled disk: 1 GB or more, so that a load
# lasts two seconds and more at the mount's 500-600 MB/s (twenty of the watch's samples; a
# 340 MB model's lasted six, and its rate was known to a sample) and six at the disk's 160:
# SMALL's and GGUF_Q4K's shapes with more layers.
MEDIUM = replace(
    SMALL,
    key="medium-f16",
    description=SMALL.description.replace("8 layers", "36 layers"),
    layers=36,
)
GGUF_Q4K_LARGE = replace(
    GGUF_Q4K,
    key="llama-q4k-22",
    description=GGUF_Q4K.description.replace("6 layers", "22 layers"),
    layers=22,
)
# The smoke test's model: a few MB.
TINY = ModelSpec(
    "tiny-f16", "4 layers, hidden 256, fp16, 2 shards", "safetensors", 4, 256, 1024, shards=2
)


def _entry_point(spec: ModelSpec, folder: Path) -> Path:
    if spec.format == "gguf":
        return folder / f"{spec.key}.gguf"
    return folder / ("model.safetensors.index.json" if spec.shards > 1 else "model.safetensors")


def ensure_model(spec: ModelSpec, scratch: Path) -> tuple[Path, float]:
    """The model's path (generating it unless already there); seconds spent generating."""
    folder = spec.folder(scratch)
    marker = folder / ".spec.json"
    wanted = json.dumps(asdict(spec), sort_keys=True)
    target = _entry_point(spec, folder)
    if marker.exists() and marker.read_text() == wanted and target.exists():
        return target, 0.0
    if folder.exists():
        shutil.rmtree(folder)
    started = time.monotonic()
    if spec.format == "gguf":
        folder.mkdir(parents=True, exist_ok=True)
        write_gguf_model(
            target,
            layers=spec.layers,
            hidden=spec.hidden,
            intermediate=spec.intermediate,
            vocab=spec.vocab,
            tensor_type=spec.tensor_type,
        )
    else:
        write_safetensors_model(
            folder,
            layers=spec.layers,
            hidden=spec.hidden,
            intermediate=spec.intermediate,
            vocab=spec.vocab,
            shards=spec.shards,
            transformers_config=spec.transformers_config,
        )
    marker.write_text(wanted)
    return target, time.monotonic() - started


def describe(spec: ModelSpec, path: Path) -> ModelInfo:
    model = open_model(path)
    return ModelInfo(
        spec.key,
        spec.description,
        model.format,
        model.total_bytes,
        len(model.files),
        len(model.extents),
        str(path),
    )
