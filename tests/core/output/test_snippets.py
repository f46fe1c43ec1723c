"""The paste-ready lines for each loader people use: their exact text, and which measured
candidate each stands for."""

from __future__ import annotations

from types import SimpleNamespace

from modelmon.core import parse_engine
from modelmon.core.measuring.candidate import Candidate
from modelmon.core.output.snippets import apply_snippets, snippets

from ..measuring.records import candidate, run

SAFETENSORS = SimpleNamespace(format="safetensors", files=())
GGUF = SimpleNamespace(format="gguf", files=())


def _runai(concurrency: int, *rates: float) -> Candidate:
    config = parse_engine(f"runai RUNAI_STREAMER_CONCURRENCY={concurrency}")
    return Candidate(config, "peer", [run(rate) for rate in rates])


def test_every_safetensors_line_is_exact_and_names_what_measured_it():
    winner = candidate("sequential", 900, 910, 905, workers=4, chunk=16 << 20)
    library = candidate("library", 400, 410, 405, role="baseline")
    whole = candidate("sequential", 500, 505, 510, workers=1, chunk=16 << 20)
    peers = (_runai(8, 700, 720, 710), _runai(16, 650, 660, 640))
    lines = apply_snippets(SAFETENSORS, winner, (winner, whole, library), "m.toml", peers)  # type: ignore[arg-type]
    assert lines == {
        "modelmon": 'modelmon.core.load(path, config="m.toml")   [measured here as '
        "sequential workers=4 threads=1 chunk=16MiB: 905 MB/s]",
        "safetensors": "safetensors.safe_open(path, framework='pt') (mmap)   [measured here as "
        "library threads=1: 405 MB/s]",
        "safetensors-read": "safetensors.torch.load(open(path, 'rb').read())  (read whole, no "
        "mmap)   [measured here as sequential threads=1 chunk=16MiB: 505 MB/s]",
        "diffusers": "DiffusionPipeline.from_pretrained(path, disable_mmap=True)   [measured "
        "here as sequential threads=1 chunk=16MiB: 505 MB/s]",
        "vllm-eager": "vllm serve PATH --safetensors-load-strategy eager   [measured here as "
        "sequential threads=1 chunk=16MiB: 505 MB/s]",
        "vllm-lazy": "vllm serve PATH --safetensors-load-strategy lazy   [measured here as "
        "library threads=1: 405 MB/s]",
        "vllm-prefetch": "vllm serve PATH --safetensors-load-strategy prefetch   [not measured "
        "here]",
        # Run:ai's line takes the concurrency of its best measured run.
        "runai_streamer": "vllm serve PATH --load-format runai_streamer "
        "--model-loader-extra-config '{\"concurrency\": 8}'  (or "
        "RUNAI_STREAMER_CONCURRENCY=8)   [measured here as engine: runai "
        "RUNAI_STREAMER_CONCURRENCY=8: 710 MB/s]",
        "fastsafetensors": "vllm serve PATH --load-format fastsafetensors   [not measured here]",
    }


def test_every_gguf_line_is_exact():
    winner = candidate("mmap", 300, 310, 305)
    lines = {s.tool: s.text for s in snippets(GGUF, winner, (winner,))}  # type: ignore[arg-type]
    assert lines == {
        "modelmon": 'modelmon.core.load(path, config="modelmon.toml")',
        "llama.cpp": "llama-server -m PATH  (mmap, the default)",
        "llama.cpp-no-mmap": "llama-server -m PATH --no-mmap",
        "llama.cpp-direct-io": "llama-server -m PATH --direct-io",
        "llama.cpp-mlock": "llama-server -m PATH --mlock",
    }
    measured = {s.tool: s.measured_as for s in snippets(GGUF, winner, (winner,))}  # type: ignore[arg-type]
    assert measured["llama.cpp"] == "mmap threads=1" and measured["llama.cpp-mlock"] is None
