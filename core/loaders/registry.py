"""The engines modelmon can run as a user runs them, one small entry each: what it loads, what
must be installed, the knobs that change how it reads the weights, and the line a user
pastes to apply a setting.

An entry that runs here is run by ``child.py`` (a fresh process that never imports
modelmon): the engine loads the model its own way with the knobs given, then every byte it
loaded is touched, so a lazy mapping cannot look fast by reading nothing. An entry that
cannot run here (vLLM and SGLang load onto a GPU) names the engine whose runs stand for it
and translates what those runs measured into its own flags, marked not measured.

Knob values are text, as a user writes them in a spec (``engine: llamacpp load_mode=none``);
the first value of each knob is the engine's own default, and an environment knob's first
value, ``default``, leaves the variable unset.
"""

from __future__ import annotations

from pathlib import Path

from modelmon.core.errors import OptionsError
from modelmon.core.loaders import engine_lines as lines
from modelmon.core.loaders.engine import UNSET, Engine, Knob

# The one child harness that runs any engine of the registry, by path (it never imports
# modelmon): ``python child.py ENGINE PATH [KNOB=VALUE ...]``.
CHILD = Path(__file__).with_name("child.py")


def _runai_searched(parallel: int) -> tuple[dict[str, str], ...]:
    """Run:ai's reader threads at the search's parallelism and at 16, 8 MiB each request."""
    chunk = str(8 << 20)
    return tuple(
        {"RUNAI_STREAMER_CONCURRENCY": str(n), "RUNAI_STREAMER_CHUNK_BYTESIZE": chunk}
        for n in dict.fromkeys((parallel, 16))
    )


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
            lines.safetensors,
            detected_as=("safetensors",),
            description="safetensors load_file(numpy), plain, one process",
            searched=lambda parallel: ({},),
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
            lines.transformers,
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
            lines.diffusers,
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
            lines.llama_cpp_python,
            detected_as=("llama-cpp-python", "llama.cpp"),
            also=(("llama.cpp", lines.llama_server),),
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
                    up_to=1024,
                ),
                Knob(
                    "RUNAI_STREAMER_CHUNK_BYTESIZE",
                    (UNSET, str(8 << 20)),
                    "bytes each reader asks for at once",
                    environment=True,
                    up_to=1 << 30,
                ),
                Knob(
                    "ranks",
                    ("1", "2"),
                    "processes of one job that each load the whole model (tensor-parallel "
                    "ranks), joined by torch.distributed over gloo on this machine",
                    tried=False,
                    up_to=64,
                ),
                Knob(
                    "RUNAI_STREAMER_DIST",
                    (UNSET, "1", "0"),
                    "with ranks: 1 shares the reads (each rank reads a part and broadcasts "
                    "it); unset (auto: over NCCL only) or 0 has every rank read it all",
                    environment=True,
                ),
            ),
            lines.runai,
            detected_as=("runai-model-streamer",),
            also=(("vllm-runai", lines.runai_in_vllm),),
            description="Run:ai Model Streamer SafetensorsStreamer (CPU)",
            bucket_modules=("runai_model_streamer_s3",),
            searched=_runai_searched,
        ),
        Engine(
            "fastsafetensors",
            "fastsafetensors",
            ("safetensors",),
            ("fastsafetensors", "torch"),
            "",
            (),
            lines.fastsafetensors,
            also=(("vllm-fastsafetensors", lines.fastsafetensors_in_vllm),),
            description="fastsafetensors fastsafe_open(nogds=True): the CPU path",
            searched=lambda parallel: ({},),
        ),
        Engine(
            "cattensors",
            "cattensors",
            ("safetensors",),
            ("cattensors", "safetensors", "torch"),
            "",
            (),
            lambda settings: (
                "import cattensors, safetensors; cattensors.patch(); tensors = {name: "
                "handle.get_tensor(name).clone() for path in PATHS for handle in "
                "[safetensors.safe_open(path, framework='pt')] for name in handle.keys()}"
            ),
            description="cattensors.patch(): parallel warm-up reads, then safe_open(pt)",
        ),
        Engine(
            "gguf-reader",
            "gguf GGUFReader",
            ("gguf",),
            ("gguf", "numpy"),
            "",
            (),
            lambda settings: (
                "import gguf, numpy; tensors = {tensor.name: numpy.array(tensor.data) for "
                "tensor in gguf.GGUFReader(PATH).tensors}  (every tensor copied out of its "
                "memmap)"
            ),
            description="gguf GGUFReader, every tensor copied out, plain, one process",
        ),
        Engine(
            "vllm",
            "vLLM",
            ("safetensors",),
            ("vllm",),
            "vllm",
            (BACKEND,),
            lines.vllm,
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
            lines.sglang,
            detected_as=("sglang",),
            not_here="SGLang loads onto a GPU: modelmon does not run it here; the safetensors "
            "library's runs stand for its reads",
            stand_in="safetensors",
        ),
        Engine(
            "instanttensor",
            "InstantTensor",
            ("safetensors",),
            ("instanttensor", "torch"),
            "",
            (),
            lines.instanttensor,
            also=(("vllm-instanttensor", lines.instanttensor_in_vllm),),
            # Seen with instanttensor 0.2.2 on this CPU-only machine: device='cpu' raises
            # ValueError, device=0 asks torch for an accelerator there is not.
            not_here="InstantTensor loads onto CUDA devices only (its safe_open(device='cpu') "
            "raises 'InstantTensor only supports CUDA devices for now'): modelmon does not run "
            "it on a CPU",
        ),
        Engine(
            "flashpack",
            "flashpack",
            ("flashpack",),
            ("flashpack", "torch"),
            "",
            (),
            lines.flashpack,
            # Seen with flashpack 0.4.5 here: it loads onto a CPU (mapped by default,
            # FLASHPACK_CPU_PARALLEL_READ=1 read eagerly), but only its own file format.
            not_here="flashpack loads its own .flashpack files (made by flashpack convert), "
            "a format modelmon does not open yet: modelmon does not run it",
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
