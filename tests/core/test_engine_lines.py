"""The line each engine's user pastes to apply a setting, for every engine and every tool
that loads through the same code, asserted whole: a user copies it as it is."""

from __future__ import annotations

import pytest

from modelmon.core.loaders.registry import ENGINES

SINGLE_FILE = "from_single_file"
RUNAI_16 = {"RUNAI_STREAMER_CONCURRENCY": "16"}
# (engine, the tool's name for an `also` line or None for the engine's own, settings, line)
LINES = [
    ("safetensors", None, {}, "safetensors.numpy.load_file(PATH)"),
    ("safetensors", None, {"framework": "torch", "backend": "pread"},
     "safetensors.torch.load_file(PATH, backend='pread')"),
    ("safetensors", None, {"backend": "read"},
     "safetensors.numpy.load(open(PATH, 'rb').read())  (one sequential read, no mmap)"),
    ("transformers", None, {}, "AutoModelForCausalLM.from_pretrained(PATH)"),
    ("transformers", None, {"disable_mmap": "true", "HF_DEACTIVATE_ASYNC_LOAD": "1"},
     "HF_DEACTIVATE_ASYNC_LOAD=1 AutoModelForCausalLM.from_pretrained(PATH, disable_mmap=True)"),
    ("diffusers", None, {},
     "DiffusionPipeline.from_pretrained(PATH)  (or the model class's from_pretrained, which "
     "takes the same argument)"),
    ("diffusers", None, {"HF_ENABLE_PARALLEL_LOADING": "yes"},
     "HF_ENABLE_PARALLEL_LOADING=yes DiffusionPipeline.from_pretrained(PATH)  (or the model "
     "class's from_pretrained, which takes the same argument)"),
    ("diffusers", None, {"method": SINGLE_FILE, "disable_mmap": "true"},
     "ModelClass.from_single_file(PATH, config=CONFIG_FOLDER, disable_mmap=True)  (the class "
     "config.json names)"),
    ("llamacpp", None, {}, "Llama(model_path=PATH)  (use_mmap=True, the default)"),
    ("llamacpp", None, {"load_mode": "none"}, "Llama(model_path=PATH, use_mmap=False)"),
    ("llamacpp", None, {"load_mode": "dio"},
     "params = llama_cpp.llama_model_default_params(); params.load_mode = "
     "llama_cpp.llama_load_mode_from_str(b'dio'); "
     "llama_cpp.llama_model_load_from_file(PATH.encode(), params)"),
    ("llamacpp", "llama.cpp", {}, "llama-server -m PATH"),
    ("llamacpp", "llama.cpp", {"load_mode": "none"}, "llama-server -m PATH --load-mode none"),
    ("llamacpp", "llama.cpp", {"load_mode": "dio"}, "llama-server -m PATH --load-mode dio"),
    ("runai", None, {}, "SafetensorsStreamer().stream_files(files)  (runai_model_streamer)"),
    ("runai", None, {**RUNAI_16, "RUNAI_STREAMER_CHUNK_BYTESIZE": str(8 << 20)},
     "RUNAI_STREAMER_CONCURRENCY=16 RUNAI_STREAMER_CHUNK_BYTESIZE=8388608 "
     "SafetensorsStreamer().stream_files(files)  (runai_model_streamer)"),
    ("runai", "vllm-runai", {}, "vllm serve PATH --load-format runai_streamer"),
    ("runai", "vllm-runai", RUNAI_16,
     "vllm serve PATH --load-format runai_streamer "
     """--model-loader-extra-config '{"concurrency": 16}'"""),
    ("runai", None, {"ranks": "2", "RUNAI_STREAMER_DIST": "1"},
     "RUNAI_STREAMER_DIST=1 torchrun --nproc-per-node 2 (gloo): SafetensorsStreamer()"
     ".stream_files(files, is_distributed=True) in each rank  (runai_model_streamer)"),
    ("runai", "vllm-runai", {"ranks": "4", "RUNAI_STREAMER_DIST": "0"},
     "RUNAI_STREAMER_DIST=0 vllm serve PATH --load-format runai_streamer "
     "--tensor-parallel-size 4"),
    ("instanttensor", None, {}, "safe_open(files, framework='pt', device=0)  (instanttensor)"),
    ("instanttensor", "vllm-instanttensor", {},
     "vllm serve PATH --load-format instanttensor"),
    ("flashpack", None, {},
     "assign_from_file(model, PATH)  (flashpack; a .flashpack file, CPU: mapped)"),
    ("fastsafetensors", None, {},
     "fastsafe_open(files, framework='pt', nogds=True)  (fastsafetensors)"),
    ("fastsafetensors", "vllm-fastsafetensors", {},
     "vllm serve PATH --load-format fastsafetensors"),
    ("cattensors", None, {}, "cattensors.patch(); safetensors.safe_open(path, framework='pt')"),
    ("gguf-reader", None, {}, "gguf.GGUFReader(path)  (every tensor copied out of its memmap)"),
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
