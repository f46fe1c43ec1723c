"""The loaders the child harness (``child.py``) runs, each as its users call it, and what the
installed version of each supports. Plain Python that never imports modelmon; each load
returns the bytes it touched (``child_touch``) and the tensors it made.

Every load keeps what it loaded until the harness has reported, and touches every byte: the
libraries here copy into memory of their own (safetensors' numpy path, Run:ai's buffers,
fastsafetensors' bounce buffers), and results that are lazy views of a mapping (the gguf
reader's memmaps, cattensors' torch path) are copied out first.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import importlib.util
import inspect
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING or __package__:  # run by path, the harness's siblings are plain modules
    from modelmon.core.loaders.child_ranks import Ranks
    from modelmon.core.loaders.child_touch import touch_array, touch_mappings, touch_tensors
else:
    from child_ranks import Ranks
    from child_touch import touch_array, touch_mappings, touch_tensors


class Unsupported(Exception):
    """The load cannot be made as asked (a knob this version lacks, a model it cannot load)."""


def _source_has(module: str, word: str) -> bool:
    """Whether a module's source file names ``word``: found under its top package's folder
    and read, never imported (finding a submodule's spec imports its packages, and all of
    diffusers takes seconds)."""
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if not rest:
        places = [spec.origin] if spec.origin else []
    else:
        inner = os.path.join(*rest.split("."))
        places = [
            os.path.join(folder, name)
            for folder in spec.submodule_search_locations or []
            for name in (inner + ".py", os.path.join(inner, "__init__.py"))
        ]
    for place in places:
        if place.endswith(".py") and os.path.isfile(place):
            with open(place, encoding="utf-8", errors="replace") as source:
                return word in source.read()
    return False


def safetensors_files(path: str) -> list[str]:
    """The safetensors files a path names: the file, an index's shards, or a folder's files."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
        return [os.path.join(path, n) for n in names]
    if path.endswith(".json"):
        with open(path) as index:
            shards = dict.fromkeys(json.load(index)["weight_map"].values())
        return [os.path.join(os.path.dirname(path), name) for name in shards]
    return [path]


def safetensors_features(knobs: dict[str, str]) -> dict[str, list[str]]:
    import safetensors.numpy

    pread = "backend" in inspect.signature(safetensors.numpy.load_file).parameters
    frameworks = ["numpy"] + (["torch"] if importlib.util.find_spec("torch") else [])
    return {"framework": frameworks, "backend": ["mmap", *(["pread"] if pread else []), "read"]}


def load_safetensors(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    framework, backend = knobs.get("framework", "numpy"), knobs.get("backend", "mmap")
    module = importlib.import_module(f"safetensors.{framework}")  # check() allows numpy, torch
    loaded: list[dict[str, Any]] = []
    for file in safetensors_files(path):
        if backend == "read":
            with open(file, "rb") as handle:
                loaded.append(module.load(handle.read()))
        elif backend == "mmap":
            loaded.append(module.load_file(file))
        else:
            loaded.append(module.load_file(file, backend=backend))
    return touch_tensors(t for part in loaded for t in part.values())


def transformers_features(knobs: dict[str, str]) -> dict[str, list[str]]:
    from transformers import PreTrainedModel

    parameters = inspect.signature(PreTrainedModel.from_pretrained).parameters
    async_load = _source_has("transformers.core_model_loading", "HF_DEACTIVATE_ASYNC_LOAD")
    return {
        "disable_mmap": ["false", "true"] if "disable_mmap" in parameters else ["false"],
        "HF_DEACTIVATE_ASYNC_LOAD": ["default", "1"] if async_load else ["default"],
    }


def folder_of(path: str, marks: tuple[str, ...] = ("config.json",)) -> str:
    """The folder a from_pretrained loads for ``path``: the path itself when a folder, else
    the file's folder, or the folder above it when that holds the marks (a pipeline's
    component file names the pipeline)."""
    if os.path.isdir(path):
        return path
    folder = os.path.dirname(os.path.abspath(path))
    above = os.path.dirname(folder)
    here = any(os.path.exists(os.path.join(folder, mark)) for mark in marks)
    if not here and any(os.path.exists(os.path.join(above, mark)) for mark in marks):
        return above
    return folder


def load_transformers(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    import transformers

    folder = folder_of(path)
    config = transformers.AutoConfig.from_pretrained(folder)
    causal = any(a.endswith("ForCausalLM") for a in getattr(config, "architectures", None) or ())
    loader = transformers.AutoModelForCausalLM if causal else transformers.AutoModel
    kwargs = {"disable_mmap": True} if knobs.get("disable_mmap") == "true" else {}
    model = loader.from_pretrained(folder, **kwargs)
    return touch_tensors(iter(model.state_dict().values()))


SINGLE_FILE = "diffusers.loaders.single_file_model"


def diffusers_features(knobs: dict[str, str]) -> dict[str, list[str]]:
    """What the installed diffusers supports for the method given: from_single_file reads
    no HF_ENABLE_PARALLEL_LOADING (one file, no shards to spread over threads)."""
    single = _source_has(SINGLE_FILE, "def from_single_file")
    if knobs.get("method") == "from_single_file":
        disable, parallel = _source_has(SINGLE_FILE, "disable_mmap"), False
    else:
        disable = _source_has("diffusers.models.modeling_utils", "disable_mmap")
        parallel = _source_has("diffusers.utils.constants", "HF_ENABLE_PARALLEL_LOADING")
    return {
        "method": ["from_pretrained", *(["from_single_file"] if single else [])],
        "disable_mmap": ["false", "true"] if disable else ["false"],
        "HF_ENABLE_PARALLEL_LOADING": ["default", "yes"] if parallel else ["default"],
    }


def single_file_class(path: str, diffusers: Any) -> tuple[str, Any]:
    """The folder of the config.json beside or above a checkpoint file, and the model class
    it names, which must have from_single_file."""
    folder = folder_of(path)
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise Unsupported(f"from_single_file loads one checkpoint file; {path} is not one")
    if not os.path.exists(config):
        raise Unsupported(
            f"from_single_file needs the model's diffusers config.json beside {path} "
            "(modelmon never asks the hub for one)"
        )
    with open(config) as file:
        class_name = json.load(file).get("_class_name", "")
    if not hasattr(getattr(diffusers, class_name, None), "from_single_file"):
        raise Unsupported(f"{config} names {class_name!r}: no diffusers from_single_file")
    return folder, getattr(diffusers, class_name)


def load_diffusers(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    diffusers: Any = importlib.import_module("diffusers")
    kwargs = {"disable_mmap": True} if knobs.get("disable_mmap") == "true" else {}
    if knobs.get("method") == "from_single_file":
        folder, model_class = single_file_class(path, diffusers)
        model = model_class.from_single_file(path, config=folder, **kwargs)
        return touch_tensors(iter(model.state_dict().values()))
    path = folder_of(path, ("model_index.json", "config.json"))
    if not any(os.path.exists(os.path.join(path, m)) for m in ("model_index.json", "config.json")):
        raise Unsupported(
            "the diffusers engine loads a folder with from_pretrained: a pipeline's (with "
            "model_index.json) or a model's (with config.json); neither is beside the model"
        )
    if os.path.exists(os.path.join(path, "model_index.json")):
        pipeline = diffusers.DiffusionPipeline.from_pretrained(path, **kwargs)
        modules = [m for m in pipeline.components.values() if hasattr(m, "state_dict")]
    else:
        with open(os.path.join(path, "config.json")) as file:
            class_name = json.load(file)["_class_name"]
        modules = [getattr(diffusers, class_name).from_pretrained(path, **kwargs)]
    return touch_tensors(t for m in modules for t in m.state_dict().values())


# llama.cpp's load modes by name, where the installed libllama has them.
LLAMA_MODES = ("mmap", "none", "dio")


def llamacpp_features(knobs: dict[str, str]) -> dict[str, list[str]]:
    modes = hasattr(importlib.import_module("llama_cpp"), "llama_load_mode_from_str")
    return {"load_mode": list(LLAMA_MODES) if modes else ["mmap", "none"]}  # else use_mmap only


def load_llamacpp(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    llama_cpp = importlib.import_module("llama_cpp")
    mode = knobs.get("load_mode", "mmap")
    if mode in ("mmap", "none"):  # as users call it
        model = llama_cpp.Llama(model_path=path, use_mmap=mode == "mmap", verbose=False)
        size = int(llama_cpp.llama_model_size(model.model))
    else:
        silence = llama_cpp.llama_log_callback(lambda level, text, data: None)
        llama_cpp.llama_log_set(silence, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.load_mode = llama_cpp.llama_load_mode_from_str(mode.encode())
        model = llama_cpp.llama_model_load_from_file(path.encode(), params)
        if not model:
            raise RuntimeError(f"libllama could not load {path} with load_mode={mode}")
        size = int(llama_cpp.llama_model_size(model))
    touch_mappings(path)  # a mapped model's pages arrive here, as they would on first use
    _keep.append(model)
    return size, 1


_keep: list[Any] = []  # what a load returned, alive until the report is printed


def runai_features(knobs: dict[str, str]) -> dict[str, list[str]]:
    """Its environment knobs take any value; modelmon lists the ones it tries."""
    return {}


_ranks: list[Ranks] = []  # the other ranks of a load by several (``child_ranks``), once up
# What the harness adds to its report beside its own figures (each other rank's).
REPORTED: dict[str, Any] = {}


def setup_runai(path: str, knobs: dict[str, str]) -> None:
    """With ``ranks`` above 1, the other ranks up and joined before the clock starts."""
    ranks = knobs.get("ranks", "1")
    if not (ranks.isascii() and ranks.isdigit() and int(ranks) >= 1):
        raise Unsupported(f"ranks must be a whole number from 1, not {ranks!r}")
    world = int(ranks)
    if world == 1:
        return
    if path.startswith("s3://"):
        raise Unsupported("ranks above 1 load files here, not a bucket")
    group = Ranks(safetensors_files(path), world)
    group.start()
    _ranks.append(group)
    atexit.register(group.end)  # once the harness has reported


def load_runai(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    if _ranks:
        touched, tensors, REPORTED["ranks"] = _ranks[0].load()
        return touched, tensors
    streamer = importlib.import_module("runai_model_streamer")
    if not path.startswith("s3://"):
        files = safetensors_files(path)
    else:  # its own listing of a prefix, as vLLM calls it
        if os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL_S3"):
            # Path-style addressing on an endpoint of one's own (MinIO, a local server), as
            # modelmon's own client and vLLM's docs for S3-compatible stores do.
            os.environ.setdefault("RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING", "0")
        prefix = path.rsplit("/", 1)[0] + "/" if path.endswith(".json") else path
        files = [path] if path.endswith(".safetensors") else streamer.list_safetensors(prefix)
    kept: list[Any] = []
    with streamer.SafetensorsStreamer() as streaming:
        streaming.stream_files(files)
        kept.extend(tensor for _, tensor in streaming.get_tensors())  # owned: ours to keep
    _keep.append(kept)
    return touch_tensors(iter(kept))


def load_fastsafetensors(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    fastsafe_open = importlib.import_module("fastsafetensors").fastsafe_open
    with fastsafe_open(safetensors_files(path), framework="pt", nogds=True) as handle:
        kept = [handle.get_tensor(name) for name in handle.keys()]  # noqa: SIM118 (not a dict)
        touched = touch_tensors(iter(kept))
    _keep.append(kept)
    return touched


def load_cattensors(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    import safetensors

    cattensors = importlib.import_module("cattensors")
    cattensors.patch()  # safetensors.safe_open now warms the file (parallel reads) first
    kept: list[Any] = []
    try:
        for file in safetensors_files(path):
            with safetensors.safe_open(file, framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (patched: offset order)
                    kept.append(handle.get_tensor(name).clone())  # a mmap view: copy it out
    finally:
        cattensors.unpatch()
    _keep.append(kept)
    return touch_tensors(iter(kept))


def load_gguf_reader(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    import numpy as np
    from gguf import GGUFReader

    reader = GGUFReader(path)
    kept = [np.array(tensor.data) for tensor in reader.tensors]  # copies: .data is a memmap view
    del reader
    _keep.append(kept)
    return sum(touch_array(array) for array in kept), len(kept)


def no_knobs(knobs: dict[str, str]) -> dict[str, list[str]]:
    return {}


def imports(engine: str, knobs: dict[str, str]) -> list[str]:
    """What the load will import: imported before its clock starts, as a server has."""
    torch_free = {"gguf-reader", "llamacpp"}
    numpy_only = engine == "safetensors" and knobs.get("framework", "numpy") == "numpy"
    torch = [] if engine in torch_free or numpy_only else ["torch"]
    if engine == "runai" and knobs.get("ranks", "1") != "1":
        torch.append("torch.distributed")
    own = {
        "safetensors": ["safetensors.torch" if torch else "safetensors.numpy"],
        "transformers": ["transformers"],
        "diffusers": ["diffusers"],
        "llamacpp": ["llama_cpp"],
        "runai": ["runai_model_streamer"],
        "fastsafetensors": ["fastsafetensors"],
        "cattensors": ["safetensors", "cattensors"],
        "gguf-reader": ["gguf", "numpy"],
    }
    return torch + own[engine]


# What a load sets up before its clock starts, as a server has it up before it loads.
SETUP: dict[str, Callable[[str, dict[str, str]], None]] = {"runai": setup_runai}
Features = Callable[[dict[str, str]], dict[str, list[str]]]  # knobs given -> values supported
Load = Callable[[str, dict[str, str]], tuple[int, int]]
ENGINES: dict[str, tuple[str, Features, Load]] = {
    # name: (distribution for its version, features, load)
    "safetensors": ("safetensors", safetensors_features, load_safetensors),
    "transformers": ("transformers", transformers_features, load_transformers),
    "diffusers": ("diffusers", diffusers_features, load_diffusers),
    "llamacpp": ("llama_cpp_python", llamacpp_features, load_llamacpp),
    "runai": ("runai-model-streamer", runai_features, load_runai),
    "fastsafetensors": ("fastsafetensors", no_knobs, load_fastsafetensors),
    "cattensors": ("cattensors", no_knobs, load_cattensors),
    "gguf-reader": ("gguf", no_knobs, load_gguf_reader),
}
