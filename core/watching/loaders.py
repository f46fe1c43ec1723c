"""Which loader the watched program is, from its command lines and the libraries it maps, and
what to change in that loader's own terms.

Python packages without native code (transformers, diffusers) show only in a command line;
native ones show as the libraries they map (safetensors' Rust extension, libtorch, libllama).
The most specific loader seen wins: vLLM maps torch and safetensors too.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Loader:
    key: str  # "vllm", "llama.cpp", "safetensors", ... "program" when none is recognised
    label: str  # as its users write it: "vLLM", "llama.cpp"
    evidence: tuple[str, ...]  # what told it: "command line: vllm serve ...", "maps libtorch"
    # Of safetensors: the framework its arrays are for ("torch" where libtorch is mapped,
    # else "numpy"), so that a fix names the module the program uses; "" for other loaders.
    framework: str = ""


# (key, label, words in a command line, library names mapped), most specific first.
_KNOWN: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("vllm", "vLLM", ("vllm",), ("vllm/_C",)),
    ("sglang", "SGLang", ("sglang",), ("sgl_kernel",)),
    ("ollama", "Ollama", ("ollama",), ()),
    ("llama-cpp-python", "llama-cpp-python", ("llama_cpp",), ("llama_cpp/lib/",)),
    ("llama.cpp", "llama.cpp", ("llama-server", "llama-cli", "llama-bench"), ("libllama",)),
    ("runai-model-streamer", "Run:ai Model Streamer", (), ("runai_model_streamer",)),
    ("fastsafetensors", "fastsafetensors", ("fastsafetensors",), ("fastsafetensors/cpp",)),
    ("diffusers", "diffusers", ("diffusers",), ()),
    ("transformers", "transformers", ("transformers",), ("tokenizers.",)),
    ("safetensors", "safetensors", (), ("_safetensors_rust",)),
    ("torch", "PyTorch (torch.load)", (), ("libtorch_cpu", "libtorch.so")),
)


def detect(commands: Iterable[Sequence[str]], libraries: Iterable[str]) -> Loader:
    """The loader of a process tree from its members' argv and the libraries they map."""
    commands = [tuple(argv) for argv in commands if argv]
    libraries = sorted(set(libraries))
    for key, label, words, library_names in _KNOWN:
        evidence: list[str] = []
        for argv in commands:
            program = os.path.basename(argv[0])
            text = " ".join(argv)
            if any(word == program or word in text for word in words):
                evidence.append(f"command line: {text[:120]}")
                break
        for path in libraries:
            if any(name in path for name in library_names):
                evidence.append(f"maps {path}")
                break
        if evidence:
            framework = ""
            if key == "safetensors":
                torch = any("libtorch" in path for path in libraries)
                framework = "torch" if torch else "numpy"
            return Loader(key, label, tuple(evidence), framework)
    program = os.path.basename(commands[0][0]) if commands else "the program"
    return Loader("program", program, ())


# What to change, by problem and loader; "" is what any program can do.
_FIXES: dict[str, dict[str, str]] = {
    "mmap": {
        "vllm": "vllm serve ... --safetensors-load-strategy eager (reads each file whole "
        "instead of faulting it in), or --load-format runai_streamer",
        "sglang": "sglang.launch_server ... --load-format with a reader that does not map "
        "the files (see its --help)",
        "ollama": 'set "use_mmap": false in the request options',
        "llama-cpp-python": "Llama(model_path=..., use_mmap=False)",
        "llama.cpp": "--load-mode none (a buffered read; --no-mmap before --load-mode) or "
        "--load-mode dio (direct I/O)",
        "diffusers": "from_pretrained(..., disable_mmap=True)",
        "transformers": "read the files whole instead of mapping them: "
        "safetensors.torch.load(open(path, 'rb').read()) and pass state_dict=",
        "safetensors": "safetensors.torch.load(open(path, 'rb').read()) (one sequential "
        "read) instead of safe_open / load_file, which map the file",
        "torch": "torch.load(path, mmap=False) (one sequential read of the archive)",
        "": "read the file front to back with large reads instead of mapping it",
    },
    "shared": {
        "vllm": "let each worker open the files itself (spawned workers: "
        "VLLM_WORKER_MULTIPROC_METHOD=spawn)",
        "diffusers": "open the files in each process after it starts (multiprocessing "
        "'spawn', not fork with an open file)",
        "transformers": "open the files in each process after it starts (multiprocessing "
        "'spawn', not fork with an open file)",
        "": "open the file in each reader process (after fork, or start them with spawn): one "
        "descriptor per reader",
    },
    "readahead": {
        "": "raise readahead where the file lives (blockdev --setra for a disk; "
        "/sys/class/bdi/MAJ:MIN/read_ahead_kb for FUSE and NFS), or use MADV_SEQUENTIAL / "
        "MADV_WILLNEED on the mapping",
    },
    "random": {
        "vllm": "vllm serve ... --safetensors-load-strategy prefetch (or eager): the files "
        "are read in order instead of tensor by tensor",
        "llama.cpp": "--load-mode none or dio: one pass in file order instead of faults",
        "llama-cpp-python": "Llama(model_path=..., use_mmap=False)",
        "ollama": 'set "use_mmap": false in the request options',
        "diffusers": "from_pretrained(..., disable_mmap=True)",
        "": "read in file order (sort the tensors by offset), with reads of several MiB",
    },
    "partial": {
        "vllm": "vllm serve ... --safetensors-load-strategy eager to load every byte now",
        "": "to time a load, touch every byte (get_tensor copies it; get_slice of a mapped "
        "file reads only what is sliced); the rest arrives later, a page fault at a time",
    },
    "double": {
        "transformers": "from_pretrained(..., low_cpu_mem_usage=True) (or device_map=...), "
        "with accelerate installed: one copy instead of two",
        "diffusers": "pip install accelerate, then from_pretrained(..., low_cpu_mem_usage=True): "
        "one copy (without accelerate diffusers quietly builds the model and copies into it)",
        "torch": "torch.load(path, mmap=True, weights_only=True) then "
        "model.load_state_dict(state, assign=True): no second copy",
        "": "load into the final buffers once (or map the file and use views of it)",
    },
    "evicted": {
        "llama.cpp": "--load-mode dio (direct I/O: no page-cache copy) or free memory",
        "": "free memory (the page cache could not hold the model next to the program), or "
        "read with O_DIRECT so the bytes are not kept twice",
    },
    "swap": {"": "free memory or use a smaller model: the load pushed memory to swap"},
    # Under a memory limit (a container's, or --memory-limit): the page cache a load fills is
    # charged to it; a mapped load's pages are reclaimable, a copy's arrays are not.
    "cache-charged": {
        "llama.cpp": "--load-mode dio (direct I/O: the weights skip the page cache)",
        "vllm": "vllm serve ... --load-format runai_streamer (bounded buffers, not the whole "
        "file cached beside the copy)",
        "": "read with O_DIRECT, or drop each file's pages behind the reads "
        "(posix_fadvise POSIX_FADV_DONTNEED), so the limit does not hold the model twice",
    },
    "re-read": {
        "llama.cpp": "--load-mode none (one buffered read instead of faults that reclaim undoes)",
        "llama-cpp-python": "Llama(model_path=..., use_mmap=False)",
        "ollama": 'set "use_mmap": false in the request options',
        "diffusers": "from_pretrained(..., disable_mmap=True)",
        "transformers": "read the files whole (safetensors.torch.load(open(path, 'rb').read())) "
        "instead of mapping them",
        "vllm": "vllm serve ... --safetensors-load-strategy eager",
        "": "read the file once into memory instead of mapping it, or stream it in bounded pieces",
    },
    "oom-killed": {
        "transformers": "from_pretrained(..., low_cpu_mem_usage=True) (one copy, not two)",
        "diffusers": "from_pretrained(..., low_cpu_mem_usage=True) with accelerate installed",
        "torch": "torch.load(path, mmap=True, weights_only=True): the weights stay "
        "reclaimable page cache instead of a copy",
        "llama.cpp": "keep mmap (not --load-mode none): mapped weights are reclaimable",
        "safetensors": "safetensors.torch.load_file / safe_open (mapped, reclaimable) instead "
        "of reading the file into a copy",
        "": "map the file instead of copying it (a mapping's pages are reclaimable, a copy is "
        "not), or load in pieces",
    },
    "not-cold": {
        "": "measure from a cold cache (modelmon watch --cache cold, the default for a "
        "command, with --model or the model in the command's arguments)"
    },
}


def fix(problem: str, loader: Loader) -> str:
    """What to change for ``problem`` in the terms of ``loader``."""
    words = _FIXES[problem]
    said = words.get(loader.key, words[""])
    if loader.framework:  # safetensors.numpy for a program whose arrays are numpy's
        said = said.replace("safetensors.torch", f"safetensors.{loader.framework}")
    return said
