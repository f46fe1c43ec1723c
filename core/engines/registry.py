"""The engines modelmon can run as a user runs them, one small entry each: what it loads, what
must be installed, the knobs that change how it reads the weights, and the line a user
pastes to apply a setting.

An entry that runs here is run by ``engine_child.py`` (a fresh process that never imports
modelmon): the engine loads the model its own way with the knobs given, then every byte it
loaded is touched, so a lazy mapping cannot look fast by reading nothing. An entry that
cannot run here (vLLM and SGLang load onto a GPU) names the engine whose runs stand for it
and translates what those runs measured into its own flags, marked not measured.

Knob values are text, as a user writes them in a spec (``engine: llamacpp load_mode=none``);
the first value of each knob is the engine's own default, and an environment knob's first
value, ``default``, leaves the variable unset.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from modelmon.core.errors import OptionsError

Settings = Mapping[str, str]  # knob name -> value, every knob of the engine present
UNSET = "default"  # an environment knob's value that leaves the variable unset


@dataclass(frozen=True, slots=True)
class Knob:
    name: str  # as the engine's users write it: "disable_mmap", "HF_DEACTIVATE_ASYNC_LOAD"
    values: tuple[str, ...]  # what it takes, the engine's default first
    what: str  # what a value other than the default changes, in a few words
    environment: bool = False  # a variable of the engine's environment, not an argument
    # False: a setting that says how the user runs the engine (safetensors' framework),
    # kept as given; True: recommend tries its other values.
    tried: bool = True
    # Values with which the engine reads with O_DIRECT: its bytes never enter the page
    # cache, so its run is timed by its reads from storage (``engines.run.direct_reads``).
    direct: tuple[str, ...] = ()

    def check(self, value: str) -> str:
        if value not in self.values:
            raise OptionsError(
                f"{self.name} must be one of {', '.join(self.values)}, not {value!r}"
            )
        return value


@dataclass(frozen=True)
class Engine:
    name: str  # as a spec names it: "engine: transformers"
    label: str  # as its users say it
    formats: tuple[str, ...]  # the model formats it loads ("safetensors", "gguf")
    modules: tuple[str, ...]  # what must be importable for it to run here
    extra: str  # pip install 'modelmon[EXTRA]' installs it ("": modelmon's own dependencies)
    knobs: tuple[Knob, ...]
    snippet: Callable[[Settings], str]  # the line that applies these settings
    # The watch's loader keys (``watching.loaders``) that mean a program uses this engine.
    detected_as: tuple[str, ...] = ()
    # Other tools that load through the same code, each with its line for these settings
    # (llama-server runs the same libllama loader as llama-cpp-python).
    also: tuple[tuple[str, Callable[[Settings], str]], ...] = ()
    # Why it cannot run on this machine (None: it runs wherever its modules are installed),
    # the engine whose runs stand for it, and its line for the stand-in's settings.
    not_here: str | None = None
    stand_in: str | None = None
    # The files it needs beside the weights (transformers: config.json), looked for in the
    # model's folder and the one above it (a pipeline's component).
    needs_beside: tuple[str, ...] = ()

    def refuses(self, path: str) -> str | None:
        """Why it cannot load the model at ``path`` (a file it needs is missing), or None."""
        if not self.needs_beside:
            return None
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        for place in (folder, os.path.dirname(folder)):
            if any(os.path.exists(os.path.join(place, name)) for name in self.needs_beside):
                return None
        return (
            f"{self.label} loads a folder holding {' or '.join(self.needs_beside)}; "
            f"{folder} has none"
        )

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        known = ", ".join(k.name for k in self.knobs) or "none"
        raise OptionsError(f"engine {self.name} has no knob {name!r} (its knobs: {known})")

    def defaults(self) -> dict[str, str]:
        return {knob.name: knob.values[0] for knob in self.knobs}

    def settings(self, given: Mapping[str, str]) -> dict[str, str]:
        """Every knob's value: the given ones checked, the rest the engine's defaults."""
        chosen = self.defaults()
        for name, value in given.items():
            chosen[name] = self.knob(name).check(value)
        return chosen

    def variants(self, given: Mapping[str, str]) -> list[dict[str, str]]:
        """One change at a time from ``given``: each other value of each tried knob."""
        base = self.settings(given)
        return [
            {**base, knob.name: value}
            for knob in self.knobs
            if knob.tried
            for value in knob.values
            if value != base[knob.name]
        ]

    def environment(self, settings: Settings) -> dict[str, str]:
        """The environment variables these settings set (an unset default sets none)."""
        return {
            knob.name: settings[knob.name]
            for knob in self.knobs
            if knob.environment and settings.get(knob.name, UNSET) != UNSET
        }

    def arguments(self, settings: Settings) -> dict[str, str]:
        return {k.name: settings[k.name] for k in self.knobs if not k.environment}

    def reads_direct(self, settings: Settings) -> bool:
        """Whether these settings make the engine read with O_DIRECT."""
        return any(settings.get(k.name) in k.direct for k in self.knobs)

    def unavailable(self) -> str | None:
        """None when it can run here; otherwise why not, in one line naming the extra."""
        if self.not_here is not None:
            return self.not_here
        missing = [m for m in self.modules if _missing(m)]
        if not missing:
            return None
        how = f"'modelmon[{self.extra}]'" if self.extra else " ".join(missing)
        found = ", ".join(missing)
        return f"{self.label} is not installed here ({found} not found): pip install {how}"


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _env_prefix(engine: str, settings: Settings) -> str:
    env = ENGINES[engine].environment(settings)
    return "".join(f"{name}={value} " for name, value in env.items())


def _python_kwargs(pairs: list[tuple[str, str]]) -> str:
    return "".join(f", {name}={value}" for name, value in pairs)


def _safetensors(settings: Settings) -> str:
    module = "safetensors.torch" if settings["framework"] == "torch" else "safetensors.numpy"
    if settings["backend"] == "read":
        return f"{module}.load(open(PATH, 'rb').read())  (one sequential read, no mmap)"
    backend = "" if settings["backend"] == "mmap" else f", backend={settings['backend']!r}"
    return f"{module}.load_file(PATH{backend})"


def _transformers(settings: Settings) -> str:
    kwargs = [("disable_mmap", "True")] if settings["disable_mmap"] == "true" else []
    return (
        _env_prefix("transformers", settings)
        + f"AutoModelForCausalLM.from_pretrained(PATH{_python_kwargs(kwargs)})"
    )


def _diffusers(settings: Settings) -> str:
    kwargs = [("disable_mmap", "True")] if settings["disable_mmap"] == "true" else []
    if settings["method"] == "from_single_file":
        call = f"ModelClass.from_single_file(PATH, config=CONFIG_FOLDER{_python_kwargs(kwargs)})"
        return _env_prefix("diffusers", settings) + call + "  (the class config.json names)"
    return (
        _env_prefix("diffusers", settings)
        + f"DiffusionPipeline.from_pretrained(PATH{_python_kwargs(kwargs)})  (or the model "
        "class's from_pretrained, which takes the same argument)"
    )


def _llama_cpp_python(settings: Settings) -> str:
    mode = settings["load_mode"]
    if mode == "mmap":
        return "Llama(model_path=PATH)  (use_mmap=True, the default)"
    if mode == "none":
        return "Llama(model_path=PATH, use_mmap=False)"
    return (
        "params = llama_cpp.llama_model_default_params(); params.load_mode = "
        f"llama_cpp.llama_load_mode_from_str(b{mode!r}); "
        "llama_cpp.llama_model_load_from_file(PATH.encode(), params)"
    )


def _llama_server(settings: Settings) -> str:
    mode = settings["load_mode"]
    return "llama-server -m PATH" + ("" if mode == "mmap" else f" --load-mode {mode}")


def _runai(settings: Settings) -> str:
    return (
        _env_prefix("runai", settings)
        + "SafetensorsStreamer().stream_files(files)  (runai_model_streamer)"
    )


def _runai_in_vllm(settings: Settings) -> str:
    concurrency = settings["RUNAI_STREAMER_CONCURRENCY"]
    extra = (
        ""
        if concurrency == UNSET
        else f" --model-loader-extra-config '{json.dumps({'concurrency': int(concurrency)})}'"
    )
    return f"vllm serve PATH --load-format runai_streamer{extra}"


# vLLM's safetensors load strategies, by the safetensors setting that does what each does.
_VLLM_STRATEGY = {"mmap": "lazy", "pread": "eager", "read": "eager"}


def _vllm(settings: Settings) -> str:
    strategy = _VLLM_STRATEGY[settings["backend"]]
    return f"vllm serve PATH --safetensors-load-strategy {strategy}"


def _sglang(settings: Settings) -> str:
    line = "python -m sglang.launch_server --model-path PATH"
    if settings["backend"] == "mmap":
        return line
    extra = json.dumps({"enable_multithread_load": True})
    return f"{line} --model-loader-extra-config '{extra}'  (threads read the shards)"


FRAMEWORK = Knob("framework", ("numpy", "torch"), "the tensors' library", tried=False)
BACKEND = Knob(
    "backend",
    ("mmap", "pread", "read"),
    "how the file is read: mapped (mmap), pread(2) calls (safetensors ≥ 0.8), or read whole "
    "into memory and parsed (read)",
)
DISABLE_MMAP = Knob("disable_mmap", ("false", "true"), "each file read whole instead of mapped")


ENGINES: dict[str, Engine] = {
    engine.name: engine
    for engine in (
        Engine(
            "safetensors",
            "safetensors",
            ("safetensors",),
            ("safetensors", "numpy"),
            "",
            (FRAMEWORK, BACKEND),
            _safetensors,
            detected_as=("safetensors",),
        ),
        Engine(
            "transformers",
            "transformers from_pretrained",
            ("safetensors",),
            ("transformers", "torch"),
            "transformers",
            (
                DISABLE_MMAP,
                Knob(
                    "HF_DEACTIVATE_ASYNC_LOAD",
                    (UNSET, "1"),
                    "one loading thread instead of a pool of 4",
                    environment=True,
                ),
            ),
            _transformers,
            detected_as=("transformers",),
            needs_beside=("config.json",),
        ),
        Engine(
            "diffusers",
            "diffusers",
            ("safetensors",),
            ("diffusers", "torch"),
            "diffusers",
            (
                Knob(
                    "method",
                    ("from_pretrained", "from_single_file"),
                    "how the model is loaded: a pipeline's or a model's folder "
                    "(from_pretrained), or one checkpoint file with the model's config.json "
                    "beside it (from_single_file)",
                    tried=False,
                ),
                DISABLE_MMAP,
                Knob(
                    "HF_ENABLE_PARALLEL_LOADING",
                    (UNSET, "yes"),
                    "shards loaded by a pool of threads (from_pretrained)",
                    environment=True,
                ),
            ),
            _diffusers,
            detected_as=("diffusers",),
            needs_beside=("model_index.json", "config.json"),
        ),
        Engine(
            "llamacpp",
            "llama-cpp-python",
            ("gguf",),
            ("llama_cpp",),
            "llamacpp",
            (
                Knob(
                    "load_mode",
                    ("mmap", "none", "dio"),
                    "how libllama reads the file: mapped (mmap), read into its buffers "
                    "(none: --no-mmap), or with direct I/O (dio)",
                    direct=("dio",),
                ),
            ),
            _llama_cpp_python,
            detected_as=("llama-cpp-python", "llama.cpp"),
            also=(("llama.cpp", _llama_server),),
        ),
        Engine(
            "runai",
            "Run:ai Model Streamer",
            ("safetensors",),
            ("runai_model_streamer", "torch"),
            "runai",
            (
                Knob(
                    "RUNAI_STREAMER_CONCURRENCY",
                    (UNSET, "4", "16", "32"),
                    "reader threads",
                    environment=True,
                ),
            ),
            _runai,
            detected_as=("runai-model-streamer",),
            also=(("vllm-runai", _runai_in_vllm),),
        ),
        Engine(
            "vllm",
            "vLLM",
            ("safetensors",),
            ("vllm",),
            "vllm",
            (BACKEND,),
            _vllm,
            detected_as=("vllm",),
            not_here="vLLM loads onto a GPU: modelmon does not run it here; the safetensors "
            "library's runs stand for its load strategies",
            stand_in="safetensors",
        ),
        Engine(
            "sglang",
            "SGLang",
            ("safetensors",),
            ("sglang",),
            "sglang",
            (BACKEND,),
            _sglang,
            detected_as=("sglang",),
            not_here="SGLang loads onto a GPU: modelmon does not run it here; the safetensors "
            "library's runs stand for its reads",
            stand_in="safetensors",
        ),
    )
}


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise OptionsError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})") from None


def engine_for_loader(key: str) -> Engine | None:
    """The engine a watched program was detected to use (``Loader.key``), if one is known."""
    return next((e for e in ENGINES.values() if key in e.detected_as), None)


def engine_unavailable(name: str) -> str | None:
    """None when the engine runs here, else why not in one line (naming the extra)."""
    return get_engine(name).unavailable()
