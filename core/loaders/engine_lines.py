"""The line a user pastes to load the model with an engine of the registry as its settings
say: each a whole statement (its imports in, the engine's environment set before it is
imported) with ``PATH`` where the model goes and ``PATHS`` where the list of its files goes
(``output.paste`` puts them in, by their whole paths), or a server's command line."""

from __future__ import annotations

import json

from modelmon.core.loaders.engine import UNSET, Settings


def environment(settings: Settings) -> dict[str, str]:
    """The environment variables ``settings`` set: an environment knob is named as its
    variable (upper case, ``RUNAI_STREAMER_CONCURRENCY``), and its default sets none."""
    return {k: v for k, v in settings.items() if k.isupper() and v != UNSET}


def python_env(settings: Settings) -> str:
    """The statement that sets the engine's environment knobs in a pasted Python line, before
    the engine is imported ("" where none is set)."""
    env = environment(settings)
    return f"import os; os.environ.update({env!r}); " if env else ""


def every_tensor(imports: str, load: str) -> str:
    """A statement that puts every tensor of every file of the model (``PATHS``: their list,
    by their whole paths, ``output.paste``) in ``tensors``; ``load`` reads ``path``."""
    return f"{imports}tensors = {{name: t for path in PATHS for name, t in {load}.items()}}"


def python_kwargs(pairs: list[tuple[str, str]]) -> str:
    return "".join(f", {name}={value}" for name, value in pairs)


def safetensors(settings: Settings) -> str:
    module = "safetensors.torch" if settings["framework"] == "torch" else "safetensors.numpy"
    if settings["backend"] == "read":
        load = f"{module}.load(pathlib.Path(path).read_bytes())"
        return every_tensor(f"import pathlib, {module}; ", load) + "  (each file read whole)"
    backend = "" if settings["backend"] == "mmap" else f", backend={settings['backend']!r}"
    return every_tensor(f"import {module}; ", f"{module}.load_file(path{backend})")


def transformers(settings: Settings) -> str:
    kwargs = [("disable_mmap", "True")] if settings["disable_mmap"] == "true" else []
    return (
        python_env(settings)
        + "from transformers import AutoModelForCausalLM; model = "
        + f"AutoModelForCausalLM.from_pretrained(PATH{python_kwargs(kwargs)})"
    )


def diffusers(settings: Settings) -> str:
    kwargs = [("disable_mmap", "True")] if settings["disable_mmap"] == "true" else []
    env = python_env(settings)
    if settings["method"] == "from_single_file":
        call = f"ModelClass.from_single_file(PATH, config=CONFIG_FOLDER{python_kwargs(kwargs)})"
        return (
            f"{env}import diffusers; model = diffusers.{call}  (ModelClass: the class its "
            "config.json names; CONFIG_FOLDER: the folder of that config.json)"
        )
    return (
        f"{env}from diffusers import DiffusionPipeline; pipeline = "
        f"DiffusionPipeline.from_pretrained(PATH{python_kwargs(kwargs)})  (or the model "
        "class's from_pretrained, which takes the same argument)"
    )


def llama_cpp_python(settings: Settings) -> str:
    mode = settings["load_mode"]
    if mode == "mmap":
        return "from llama_cpp import Llama; llm = Llama(model_path=PATH)  (use_mmap=True, " + (
            "the default)"
        )
    if mode == "none":
        return "from llama_cpp import Llama; llm = Llama(model_path=PATH, use_mmap=False)"
    return (
        "import llama_cpp; params = llama_cpp.llama_model_default_params(); params.load_mode = "
        f"llama_cpp.llama_load_mode_from_str(b{mode!r}); "
        "model = llama_cpp.llama_model_load_from_file(PATH.encode(), params)"
    )


def llama_server(settings: Settings) -> str:
    mode = settings["load_mode"]
    return "llama-server -m PATH" + ("" if mode == "mmap" else f" --load-mode {mode}")


def runai(settings: Settings) -> str:
    ranks = settings["ranks"]
    if ranks == "1":
        return (
            python_env(settings)
            + "from runai_model_streamer import SafetensorsStreamer; streamer = "
            "SafetensorsStreamer().__enter__(); streamer.stream_files(PATHS); tensors = "
            "dict(streamer.get_tensors()); streamer.__exit__(None, None, None)"
        )
    env = "".join(f"{k}={v} " for k, v in environment(settings).items())
    return (
        f"{env}torchrun --nproc-per-node {ranks} (gloo): SafetensorsStreamer().stream_files("
        "files, is_distributed=True) in each rank  (runai_model_streamer; not a line to paste: "
        "what each rank of your torchrun job runs)"
    )


def runai_in_vllm(settings: Settings) -> str:
    concurrency = settings["RUNAI_STREAMER_CONCURRENCY"]
    extra = (
        ""
        if concurrency == UNSET
        else f" --model-loader-extra-config '{json.dumps({'concurrency': int(concurrency)})}'"
    )
    ranks = settings["ranks"]
    parallel = "" if ranks == "1" else f" --tensor-parallel-size {ranks}"
    dist = settings["RUNAI_STREAMER_DIST"]
    env = "" if dist == UNSET else f"RUNAI_STREAMER_DIST={dist} "
    return f"{env}vllm serve PATH --load-format runai_streamer{parallel}{extra}"


def fastsafetensors(settings: Settings) -> str:
    return (
        "from fastsafetensors import fastsafe_open; handle = fastsafe_open(PATHS, "
        "framework='pt', nogds=True); tensors = {name: handle.get_tensor(name) for "
        "name in handle.keys()}; handle.__exit__(None, None, None)"
    )


def fastsafetensors_in_vllm(settings: Settings) -> str:
    return "vllm serve PATH --load-format fastsafetensors"


def instanttensor(settings: Settings) -> str:
    return (
        "from instanttensor import safe_open; handle = safe_open(PATHS, framework='pt', "
        "device=0); tensors = {name: handle.get_tensor(name) for name in handle.keys()}"
    )


def instanttensor_in_vllm(settings: Settings) -> str:
    return "vllm serve PATH --load-format instanttensor"


def flashpack(settings: Settings) -> str:
    return (
        "from flashpack import assign_from_file; assign_from_file(model, PATH)  (model: your "
        "torch module; a .flashpack file, CPU: mapped)"
    )


# vLLM's safetensors load strategies, by the safetensors setting that does what each does.
_VLLM_STRATEGY = {"mmap": "lazy", "pread": "eager", "read": "eager"}


def vllm(settings: Settings) -> str:
    strategy = _VLLM_STRATEGY[settings["backend"]]
    return f"vllm serve PATH --safetensors-load-strategy {strategy}"


def sglang(settings: Settings) -> str:
    line = "python -m sglang.launch_server --model-path PATH"
    if settings["backend"] == "mmap":
        return line
    extra = json.dumps({"enable_multithread_load": True})
    return f"{line} --model-loader-extra-config '{extra}'  (threads read the shards)"
