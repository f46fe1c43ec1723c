"""What a checkpoint is, as the loaders that serve it see it: a ``transformers`` model (a
folder with a ``config.json`` naming its architecture: what vLLM and SGLang serve), a
``diffusers`` pipeline or model (``model_index.json``, or a ``config.json`` naming a diffusers
class), a ``gguf`` file (llama.cpp's), or ``weights`` alone (tensors, with nothing beside them
that says what reads them). A line for a loader is pasted only where that loader reads such a
checkpoint (``output.snippets``): no ``DiffusionPipeline`` line for a Llama, no ``vllm serve``
line for a folder vLLM cannot serve.
"""

from __future__ import annotations

import json
import os
from typing import Literal

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.formats.opening import open_model_file
from modelmon.core.model.records import Model

Kind = Literal["transformers", "diffusers", "gguf", "weights"]
CONFIG_BYTES = 1 << 20  # a config.json is a few KiB: a larger one is not read


def model_folder_of(model: Model) -> str:
    """The folder a model's files are in (of a folder given as the model, that folder)."""
    path = os.path.abspath(os.fspath(model.path))
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(model.files[0].path))


def _config(path: str) -> dict[str, object]:
    """The JSON object of the config file at ``path``; {} where there is none readable."""
    try:
        with open_model_file(path) as file:  # a FIFO or a device there: refused, no hang
            raw = file.read(CONFIG_BYTES + 1)
        found = json.loads(raw) if len(raw) <= CONFIG_BYTES else {}
    except (OSError, ValueError, ModelFormatError):
        return {}
    return found if isinstance(found, dict) else {}


def checkpoint_kind(model: Model) -> Kind:
    """What ``model`` is for (the module's docstring); of a model in object storage, by its
    format alone (what lies beside its objects is not listed)."""
    if model.format == "gguf":
        return "gguf"
    if not model.files or model.files[0].remote is not None:
        return "weights"
    folder = model_folder_of(model)
    # A pipeline's component (its unet/ folder) lies one below the pipeline's model_index.json.
    for place in (folder, os.path.dirname(folder)):
        if os.path.isfile(os.path.join(place, "model_index.json")):
            return "diffusers"
    config = _config(os.path.join(folder, "config.json"))
    if "_class_name" in config or "_diffusers_version" in config:
        return "diffusers"
    if "architectures" in config or "model_type" in config:
        return "transformers"
    return "weights"
