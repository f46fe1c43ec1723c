"""The line each engine's user pastes to apply a setting, for every engine and every tool
that loads through the same code, asserted whole: a user copies it as it is."""

from __future__ import annotations

import pytest

from modelmon.core.loaders.registry import ENGINES

SINGLE_FILE = "from_single_file"
RUNAI_16 = {"RUNAI_STREAMER_CONCURRENCY": "16"}
# (engine, the tool's name for an `also` line or None for the engine's own, settings, line)
LINES = [
    ("safetensors", None, {},
     "import safetensors.numpy; tensors = {name: t for path in PATHS for name, t in "
     "safetensors.numpy.load_file(path).items()}"),
    ("safetensors", None, {"framework": "torch", "backend": "pread"},
     "import safetensors.torch; tensors = {name: t for path in PATHS for name, t in "
     "safetensors.torch.load_file(path, backend='pread').items()}"),
    ("safetensors", None, {"backend": "read"},
     "import pathlib, safetensors.numpy; tensors = {name: t for path in PATHS for "
     "name, t in safetensors.numpy.load(pathlib.Path(path).read_bytes()).items()}  "
     "(each file read whole)"),
    ("transformers", None, {},
     "from transformers import AutoModelForCausalLM; model = "
     "AutoModelForCausalLM.from_pretrained(PATH)"),
    ("transformers", None, {"disable_mmap": "true", "HF_DEACTIVATE_ASYNC_LOAD": "1"},
     "import os; os.environ.update({'HF_DEACTIVATE_ASYNC_LOAD': '1'}); from "
     "transformers import AutoModelForCausalLM; model = "
     "AutoModelForCausalLM.from_pretrained(PATH, disable_mmap=True)"),
    ("diffusers", None, {},
     "from diffusers import DiffusionPipeline; pipeline = "
     "DiffusionPipeline.from_pretrained(PATH)  (or the model class's from_pretrained, "
     "which takes the same argument)"),
    ("diffusers", None, {"HF_ENABLE_PARALLEL_LOADING": "yes"},
     "import os; os.environ.update({'HF_ENABLE_PARALLEL_LOADING': 'yes'}); from "
     "diffusers import DiffusionPipeline; pipeline = "
     "DiffusionPipeline.from_pretrained(PATH)  (or the model class's from_pretrained, "
     "which takes the same argument)"),
    ("diffusers", None, {"method": SINGLE_FILE, "disable_mmap": "true"},
     "import diffusers; model = diffusers.ModelClass.from_single_file(PATH, "
     "config=CONFIG_FOLDER, disable_mmap=True)  (ModelClass: the class its "
     "config.json names; CONFIG_FOLDER: the folder of that config.json)"),
    ("llamacpp", None, {},
     "from llama_cpp import Llama; llm = Llama(model_path=PATH)  (use_mmap=True, the "
     "default)"),
    ("llamacpp", None, {"load_mode": "none"},
     "from llama_cpp import Llama; llm = Llama(model_path=PATH, use_mmap=False)"),
    ("llamacpp", None, {"load_mode": "dio"},
     "import llama_cpp; params = llama_cpp.llama_model_default_params(); "
     "params.load_mode = llama_cpp.llama_load_mode_from_str(b'dio'); model = "
     "llama_cpp.llama_model_load_from_file(PATH.encode(), params)"),
    ("llamacpp", "llama.cpp", {}, "llama-server -m PATH"),
    ("llamacpp", "llama.cpp", {"load_mode": "none"}, "llama-server -m PATH --load-mode none"),
    ("llamacpp", "llama.cpp", {"load_mode": "dio"}, "llama-server -m PATH --load-mode dio"),
    ("runai", None, {},
     "from runai_model_streamer import SafetensorsStreamer; streamer = "
     "SafetensorsStreamer().__enter__(); streamer.stream_files(PATHS); tensors = "
     "dict(streamer.get_tensors()); streamer.__exit__(None, None, None)"),
    ("runai", None, {**RUNAI_16, "RUNAI_STREAMER_CHUNK_BYTESIZE": str(8 << 20)},
     "import os; os.environ.update({'RUNAI_STREAMER_CONCURRENCY': '16', "
     "'RUNAI_STREAMER_CHUNK_BYTESIZE': '8388608'}); from runai_model_streamer import "
     "SafetensorsStreamer; streamer = SafetensorsStreamer().__enter__(); "
     "streamer.stream_files(PATHS); tensors = dict(streamer.get_tensors()); "
     "streamer.__exit__(None, None, None)"),
    ("runai", "vllm-runai", {}, "vllm serve PATH --load-format runai_streamer"),
    ("runai", "vllm-runai", RUNAI_16,
     "vllm serve PATH --load-format runai_streamer "
     """--model-loader-extra-config '{"concurrency": 16}'"""),
    ("runai", None, {"ranks": "2", "RUNAI_STREAMER_DIST": "1"},
     "RUNAI_STREAMER_DIST=1 torchrun --nproc-per-node 2 (gloo): "
     "SafetensorsStreamer().stream_files(files, is_distributed=True) in each rank  "
     "(runai_model_streamer; not a line to paste: what each rank of your torchrun job "
     "runs)"),
    ("runai", "vllm-runai", {"ranks": "4", "RUNAI_STREAMER_DIST": "0"},
     "RUNAI_STREAMER_DIST=0 vllm serve PATH --load-format runai_streamer "
     "--tensor-parallel-size 4"),
    ("instanttensor", None, {},
     "from instanttensor import safe_open; handle = safe_open(PATHS, framework='pt', "
     "device=0); tensors = {name: handle.get_tensor(name) for name in handle.keys()}"),
    ("instanttensor", "vllm-instanttensor", {},
     "vllm serve PATH --load-format instanttensor"),
    ("flashpack", None, {},
     "from flashpack import assign_from_file; assign_from_file(model, PATH)  (model: "
     "your torch module; a .flashpack file, CPU: mapped)"),
    ("fastsafetensors", None, {},
     "from fastsafetensors import fastsafe_open; handle = fastsafe_open(PATHS, "
     "framework='pt', nogds=True); tensors = {name: handle.get_tensor(name) for name "
     "in handle.keys()}; handle.__exit__(None, None, None)"),
    ("fastsafetensors", "vllm-fastsafetensors", {},
     "vllm serve PATH --load-format fastsafetensors"),
    ("cattensors", None, {},
     "import cattensors, safetensors; cattensors.patch(); tensors = {name: "
     "handle.get_tensor(name).clone() for path in PATHS for handle in "
     "[safetensors.safe_open(path, framework='pt')] for name in handle.keys()}"),
    ("gguf-reader", None, {},
     "import gguf, numpy; tensors = {tensor.name: numpy.array(tensor.data) for tensor "
     "in gguf.GGUFReader(PATH).tensors}  (every tensor copied out of its memmap)"),
    ("vllm", None, {}, "vllm serve PATH --safetensors-load-strategy lazy"),
    ("vllm", None, {"backend": "pread"}, "vllm serve PATH --safetensors-load-strategy eager"),
    ("vllm", None, {"backend": "read"}, "vllm serve PATH --safetensors-load-strategy eager"),
    ("sglang", None, {}, "python -m sglang.launch_server --model-path PATH"),
    ("sglang", None, {"backend": "pread"},
     "python -m sglang.launch_server --model-path PATH "
     """--model-loader-extra-config '{"enable_multithread_load": true}'  (threads read the """
     "shards)"),
]  # fmt: skip


@pytest.mark.parametrize(("engine", "tool", "given", "line"), LINES)
def test_the_line_to_paste(engine: str, tool: str | None, given: dict[str, str], line: str):
    entry = ENGINES[engine]
    settings = entry.settings(given)
    snippet = entry.snippet if tool is None else dict(entry.also)[tool]
    assert snippet(settings) == line


def test_every_engine_and_tool_has_its_lines_here() -> None:
    """A new engine, or a new tool of one, is added to the table above with its lines."""
    covered = {(engine, tool) for engine, tool, _, _ in LINES}
    for name, entry in ENGINES.items():
        assert (name, None) in covered, f"{name}'s own line is not asserted"
        for tool, _ in entry.also:
            assert (name, tool) in covered, f"{name}'s {tool} line is not asserted"
