"""One load by an engine, as its users run it, in a fresh process that never imports modelmon.

    python .../engine_child.py ENGINE PATH [KNOB=VALUE ...]   # argument knobs; environment
                                                             # knobs arrive in the environment
    python .../engine_child.py --features ENGINE [KNOB=VALUE ...]  # what it supports

modelmon runs it as a watched command (``engines.run``): the watch judges the load by the
bytes that arrive from storage; what this program prints is its own account. It imports the
engine, loads the model with the knobs given, then touches every loaded byte: one byte of
every 4 KiB page of every tensor (or, for llama.cpp, of every mapping of the model file), so
a lazy mapping that read nothing cannot pass for a load. Then it prints one JSON line: the
bytes touched, the tensors, its own seconds (load and touch; imports apart), the engine's
version and the knob values this version supports. A knob value the installed version lacks,
or a knob word that is not KNOB=VALUE, ends it with exit code 2 and one line on stderr. It
dies with its parent.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

PAGE = 4096
UNSUPPORTED = 2  # exit code: a knob the installed version lacks, or not KNOB=VALUE
PR_SET_PDEATHSIG = 1
# A folder: once loaded, the program says so there (``loaded``) and waits, holding what it
# loaded, until ``release`` appears there (60 s at most), so that a test can look at it.
HOLD = "MODELMON_ENGINE_HOLD"
HOLD_S = 60.0


class Unsupported(Exception):
    pass


def die_with_parent() -> None:
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


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


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# --- touching what was loaded ------------------------------------------------------------------


def touch_array(array: Any) -> int:
    """Read one byte of every page of a numpy array; its bytes."""
    import numpy as np

    flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
    int(flat[::PAGE].sum(dtype=np.uint64))
    return int(flat.nbytes)


def touch_tensors(tensors: Iterator[Any]) -> tuple[int, int]:
    """Read one byte of every page of each torch tensor or numpy array; (bytes, tensors)."""
    seen: set[tuple[int, int]] = set()
    touched = count = 0
    for tensor in tensors:
        count += 1
        if type(tensor).__module__.startswith("numpy"):
            touched += touch_array(tensor)
            continue
        if tensor.device.type != "cpu":  # meta tensors hold no bytes
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        if key in seen:  # tied weights: one storage, touched once
            continue
        seen.add(key)
        torch = importlib.import_module("torch")
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
        int(data[::PAGE].sum())
        touched += int(data.numel())
    return touched, count


def touch_mappings(path: str) -> int:
    """Read one byte of every page of this process's readable mappings of ``path``."""
    real = os.path.realpath(path)
    touched = 0
    with open("/proc/self/maps") as maps:
        lines = maps.read().splitlines()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[5] != real or "r" not in fields[1]:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        mapped = memoryview((ctypes.c_uint8 * (end - start)).from_address(start)).cast("B")
        touched += touch_array(mapped)
    return touched


# --- the engines --------------------------------------------------------------------------------


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
    return {"RUNAI_STREAMER_CONCURRENCY": ["default", "4", "16", "32"]}


def load_runai(path: str, knobs: dict[str, str]) -> tuple[int, int]:
    streamer_class = importlib.import_module("runai_model_streamer").SafetensorsStreamer
    kept: list[Any] = []
    with streamer_class() as streamer:
        streamer.stream_files(safetensors_files(path))
        kept.extend(tensor for _, tensor in streamer.get_tensors())
    return touch_tensors(iter(kept))


def imports(engine: str, knobs: dict[str, str]) -> list[str]:
    """What the load will import: imported before its clock starts, as a server has."""
    torch = ["torch"] if engine != "safetensors" or knobs.get("framework") == "torch" else []
    own = {
        "safetensors": ["safetensors.torch" if torch else "safetensors.numpy"],
        "transformers": ["transformers"],
        "diffusers": ["diffusers"],
        "llamacpp": ["llama_cpp"],
        "runai": ["runai_model_streamer"],
    }
    return torch + own[engine]


Features = Callable[[dict[str, str]], dict[str, list[str]]]  # knobs given -> values supported
ENGINES: dict[str, tuple[str, Features, Callable[..., Any]]] = {
    # name: (distribution for its version, features, load)
    "safetensors": ("safetensors", safetensors_features, load_safetensors),
    "transformers": ("transformers", transformers_features, load_transformers),
    "diffusers": ("diffusers", diffusers_features, load_diffusers),
    "llamacpp": ("llama_cpp_python", llamacpp_features, load_llamacpp),
    "runai": ("runai-model-streamer", runai_features, load_runai),
}


def check(engine: str, knobs: dict[str, str], features: dict[str, list[str]]) -> None:
    for name, value in knobs.items():
        if value not in features.get(name, [value]):
            raise Unsupported(
                f"{engine} {_version(ENGINES[engine][0])} here has no {name}={value} "
                f"(it takes {', '.join(features[name])})"
            )
    for name, value in os.environ.items():
        if name in features and value not in features[name]:
            raise Unsupported(f"{engine} here does not read {name}={value}")


def hold(folder: str | None) -> None:
    if not folder:
        return
    open(os.path.join(folder, "loaded"), "w").close()
    deadline = time.monotonic() + HOLD_S
    while not os.path.exists(os.path.join(folder, "release")) and time.monotonic() < deadline:
        time.sleep(0.01)


def knobs_of(words: list[str]) -> dict[str, str]:
    if bad := [word for word in words if "=" not in word]:
        raise Unsupported(f"{bad[0]!r} is not KNOB=VALUE")
    return dict(word.split("=", 1) for word in words)


def main(argv: list[str]) -> int:
    probe = argv[:1] == ["--features"]  # what the installed version supports: no load
    args = argv[1:] if probe else argv
    if len(args) < (1 if probe else 2) or args[0] not in ENGINES:
        sys.stderr.write(f"usage: engine_child.py {{{','.join(ENGINES)}}} PATH [KNOB=VALUE ...]\n")
        return 64
    engine = args[0]
    die_with_parent()
    distribution, features_of, load = ENGINES[engine]
    imported = time.perf_counter()
    try:
        knobs = knobs_of(args[1:] if probe else args[2:])
        features = features_of(knobs)
        if probe:
            print(json.dumps(features))
            return 0
        check(engine, knobs, features)
        for module in imports(engine, knobs):
            importlib.import_module(module)
        imported = time.perf_counter() - imported
        start = time.perf_counter()
        touched, tensors = load(args[1], knobs)
    except Unsupported as exc:
        print(f"modelmon engine {engine}: {exc}", file=sys.stderr)
        return UNSUPPORTED
    seconds = time.perf_counter() - start
    hold(os.environ.get(HOLD))
    report = {
        "engine": engine,
        "version": _version(distribution),
        "bytes": touched,
        "tensors": tensors,
        "seconds": seconds,
        "import_seconds": imported,
        "settings": knobs,
        "features": features,
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
