"""What a checkpoint is, as the loaders that serve it see it: a ``transformers`` model (a
folder with a ``config.json`` naming its architecture: what vLLM and SGLang serve), a
``diffusers`` pipeline or model (``model_index.json``, or a ``config.json`` naming a diffusers
class), a ``gguf`` file (llama.cpp's), or ``weights`` alone (tensors, with nothing beside them
that says what reads them). A line for a loader is pasted only where that loader reads such a
checkpoint (``output.snippets``): no ``DiffusionPipeline`` line for a Llama, no ``vllm serve``
line for a folder vLLM cannot serve.

One rule (``kind_of``) for a folder and a bucket prefix alike: the folder's files are looked
at when asked; a prefix's objects when it is opened (``formats.remote``: its listing names
them, its ``config.json`` is read through the same bounded ``read_config``), and the model
keeps what was found (``Model.kind``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from modelmon.core.errors import ModelFormatError
from modelmon.core.model.records import Kind, Model
from modelmon.core.storage.source import ByteSource, FileSource

CONFIG_BYTES = 1 << 20  # a config.json is a few KiB: a larger one is not read
CONFIG_NAME = "config.json"
PIPELINE_NAME = "model_index.json"  # a diffusers pipeline's


def model_folder_of(model: Model) -> str:
    """The folder a model's files are in (of a folder given as the model, that folder)."""
    path = os.path.abspath(os.fspath(model.path))
    return path if os.path.isdir(path) else os.path.dirname(os.path.abspath(model.files[0].path))


def read_config(source: ByteSource) -> dict[str, object]:
    """The JSON object a config file holds (a file's or an object's), read up to
    ``CONFIG_BYTES``; {} where it is larger, not JSON or not an object."""
    raw = source.read_at(0, CONFIG_BYTES + 1)
    if len(raw) > CONFIG_BYTES:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def kind_of(config: Mapping[str, object], pipeline: bool = False) -> Kind:
    """The kind of the weights whose ``config.json`` holds ``config`` ({} where there is
    none), beside (or one below) a diffusers pipeline's ``model_index.json`` where
    ``pipeline``."""
    if pipeline or "_class_name" in config or "_diffusers_version" in config:
        return "diffusers"
    if "architectures" in config or "model_type" in config:
        return "transformers"
    return "weights"


def _folder_config(path: str) -> dict[str, object]:
    try:
        with FileSource(path) as source:  # a FIFO or a device there: refused, no hang
            return read_config(source)
    except (OSError, ModelFormatError):
        return {}


def checkpoint_kind(model: Model) -> Kind:
    """What ``model`` is for (the module's docstring). A model in object storage is what its
    opening found under its prefix; one named by its object alone is its weights."""
    if model.format == "gguf":
        return "gguf"
    if model.kind is not None:
        return model.kind
    if not model.files or model.files[0].remote is not None:
        return "weights"
    folder = model_folder_of(model)
    # A pipeline's component (its unet/ folder) lies one below the pipeline's model_index.json.
    pipeline = any(
        os.path.isfile(os.path.join(place, PIPELINE_NAME))
        for place in (folder, os.path.dirname(folder))
    )
    if pipeline:
        return "diffusers"
    return kind_of(_folder_config(os.path.join(folder, CONFIG_NAME)))
