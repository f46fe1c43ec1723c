"""The phase lines servers print of their own cold start, recognised as they are read.

Each engine's lines as its own code writes them (vLLM 0.32's loggers, SGLang's scheduler,
llama.cpp's server, text-generation-inference's launcher, uvicorn under any Python server):
a line that says how long something took (``Loading weights took 11.38 seconds``) is a span
ending where the line was read; a line that marks a moment (``Application startup
complete.``) is a mark. ``engine`` names whose line it is; ``weights`` marks the lines that
time the weights, which a check holds against the bytes the watch saw arrive.

A line is first looked at for a few literal words (``KEYS``), so a program that prints
megabytes of other output costs a substring search a line, not every pattern. A progress bar
redrawn with carriage returns arrives as one line when it ends: its last state is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modelmon.core.errors import printable

MAX_TEXT = 160  # of a line kept beside what it says
_SECONDS = r"(?P<took>\d+(?:\.\d+)?)"


@dataclass(frozen=True, slots=True)
class LinePattern:
    engine: str  # the loader key of ``watching.loaders`` whose line it is
    name: str  # the span or mark it names: "Loading weights", "init engine"
    pattern: re.Pattern[str]
    weights: bool = False  # it times the weights


def _p(engine: str, name: str, text: str, weights: bool = False) -> LinePattern:
    return LinePattern(engine, name, re.compile(text), weights)


PATTERNS: tuple[LinePattern, ...] = (
    # vLLM (model_loader/base_loader.py, default_loader.py, v1/engine/core.py, compilation/)
    _p("vllm", "Starting to load model", r"Starting to load model "),
    _p("vllm", "Initializing model", rf"Initializing model took {_SECONDS} seconds"),
    _p("vllm", "Loading weights", rf"Loading weights took {_SECONDS} seconds", weights=True),
    _p(
        "vllm",
        "Model loading",
        rf"Model loading took [\d.]+ GiB(?: memory)? and {_SECONDS} seconds",
        weights=True,
    ),
    _p("vllm", "Dynamo bytecode transform", rf"Dynamo bytecode transform time: {_SECONDS} s"),
    _p("vllm", "torch.compile", rf"torch\.compile took {_SECONDS} s in total"),
    _p("vllm", "profiling/warm-up run", rf"Initial profiling/warmup run took {_SECONDS} s"),
    _p("vllm", "graph capture", rf"Graph capturing finished in {_SECONDS} secs"),
    _p(
        "vllm",
        "init engine",
        rf"init engine \(profile, create kv cache, warmup model\) took {_SECONDS} s",
    ),
    _p("vllm", "Starting vLLM server", r"Starting vLLM (?:API )?server"),
    # SGLang (srt/model_executor/model_runner.py, cuda_graph_runner.py, entrypoints/http_server)
    _p("sglang", "Load weight begin", r"Load weight begin\."),
    _p("sglang", "Load weight", rf"Load weight end\.(?: elapsed={_SECONDS} s)?", weights=True),
    _p("sglang", "Memory pool end", r"Memory pool end\."),
    _p("sglang", "Capture cuda graph", rf"Capture cuda graph end\. Time elapsed: {_SECONDS} s"),
    _p("sglang", "fired up", r"The server is fired up and ready to roll"),
    # llama.cpp's server (tools/server/server.cpp, common/common.cpp)
    _p("llama.cpp", "loading model", r"load_model: loading model"),
    _p("llama.cpp", "warming up", r"warming up the model with an empty run"),
    _p("llama.cpp", "model loaded", r"main: model loaded"),
    _p("llama.cpp", "listening", r"server is listening on"),
    # text-generation-inference's launcher and shards
    _p("tgi", "Starting shard", r"Starting shard"),
    _p("tgi", "Shard ready", rf"Shard ready in {_SECONDS}s"),
    _p("tgi", "Starting Webserver", r"Starting Webserver"),
    # transformers' serve (cli/serving/model_manager.py; its weights' progress bar ends with
    # its last line when it reaches 100 %)
    _p("transformers", "Loading model", r"^\[transformers\] Loading "),
    _p("transformers", "Loading weights", r"Loading weights: 100%", weights=True),
    # uvicorn, under vLLM, SGLang, transformers' serve and any ASGI server
    _p("uvicorn", "startup complete", r"Application startup complete"),
    _p("uvicorn", "Uvicorn running", r"Uvicorn running on"),
)
# Each engine as its users write it.
LABELS = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "llama.cpp": "llama.cpp",
    "tgi": "text-generation-inference",
    "transformers": "transformers serve",
    "uvicorn": "uvicorn",
}
# A line holds one of these words before any pattern is tried.
KEYS = (
    "took",
    "Starting",
    "Load weight",
    "Memory pool",
    "Capture cuda",
    "fired up",
    "load_model",
    "warming up",
    "model loaded",
    "listening on",
    "Shard ready",
    "startup complete",
    "Uvicorn",
    "Dynamo",
    "Graph capturing",
    "[transformers]",
    "Loading weights:",
)


# The same words, found in a program's output bytes as they come (``output_tap``).
KEY_BYTES = tuple(key.encode() for key in KEYS)


@dataclass(frozen=True, slots=True)
class ServerLine:
    """A phase line of the server's own, where it was read."""

    at_ns: int  # when modelmon read it
    engine: str
    name: str
    took_s: float | None  # the duration it states; None for a mark
    weights: bool
    text: str  # the line from what it says on (no logger's prefix), shortened, printable


def recognise(at_ns: int, line: str) -> ServerLine | None:
    """The phase line ``line`` is, read at ``at_ns``; None for any other line."""
    if not any(key in line for key in KEYS):
        return None
    for known in PATTERNS:
        found = known.pattern.search(line)
        if found is None:
            continue
        took = found.groupdict().get("took")
        text = printable(line[found.start() :].strip())  # its words, not its logger's prefix
        return ServerLine(
            at_ns,
            known.engine,
            known.name,
            float(took) if took is not None else None,
            known.weights,
            text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 3] + "...",
        )
    return None
