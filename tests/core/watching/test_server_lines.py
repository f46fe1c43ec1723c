"""A server's own phase lines: recognised as its engines print them (the vLLM lines are as
vLLM 0.32's CPU build printed them here, copied from its log), placed on the timeline as
spans and marks, and the time before ready that none accounts for."""

from __future__ import annotations

import pytest

from modelmon.core.watching.server_lines import recognise
from modelmon.core.watching.server_phases import Window, gaps, place, weights_line

VLLM_LOG = [
    "(Worker pid=5351) INFO 11-29 00:31:08 [cpu_model_runner.py:68] Starting to load model "
    "/tmp/vm/tiny...",
    "(Worker pid=5351) INFO 11-29 00:31:09 [base_loader.py:82] Initializing model took "
    "0.235355 seconds",
    "Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 42.56it/s]",
    "(Worker pid=5351) INFO 11-29 00:31:09 [default_loader.py:501] Loading weights took 0.03 "
    "seconds",
    "(EngineCore pid=5331) INFO 11-29 00:31:12 [core.py:402] init engine (profile, create kv "
    "cache, warmup model) took 2.52 s",
    "(APIServer pid=5287) INFO 11-29 00:31:13 [entry.py:140] Starting vLLM server on "
    "http://0.0.0.0:8123",
    "INFO:     Application startup complete.",
    "(APIServer pid=5287) INFO 11-29 00:31:13 [launcher.py:195] Route: /v1/models, Methods: GET",
]


def test_vllms_own_lines_are_recognised_as_it_prints_them() -> None:
    found = [recognise(i * 10**9, line) for i, line in enumerate(VLLM_LOG)]
    said = [(f.engine, f.name, f.took_s, f.weights) for f in found if f is not None]
    assert said == [
        ("vllm", "Starting to load model", None, False),
        ("vllm", "Initializing model", pytest.approx(0.235355), False),
        ("vllm", "Loading weights", pytest.approx(0.03), True),
        ("vllm", "init engine", pytest.approx(2.52), False),
        ("vllm", "Starting vLLM server", None, False),
        ("uvicorn", "startup complete", None, False),
    ]
    weights = found[3]
    assert weights is not None and weights.text == "Loading weights took 0.03 seconds"


OTHER_ENGINES = [
    (
        "[2026-11-28 10:00:01 TP0] Load weight begin. avail mem=70.1 GB",
        "sglang",
        "Load weight begin",
        None,
    ),
    (
        "[2026-11-28 10:00:09 TP0] Load weight end. elapsed=7.95 s, type=LlamaForCausalLM, "
        "dtype=torch.bfloat16",
        "sglang",
        "Load weight",
        7.95,
    ),
    (
        "[2026-11-28 10:00:30 TP0] Capture cuda graph end. Time elapsed: 12.31 s. mem usage=1.2 GB",
        "sglang",
        "Capture cuda graph",
        12.31,
    ),
    ("The server is fired up and ready to roll!", "sglang", "fired up", None),
    ("srv    load_model: loading model '/models/m.gguf'", "llama.cpp", "loading model", None),
    (
        "common_init_from_params: warming up the model with an empty run - please wait ...",
        "llama.cpp",
        "warming up",
        None,
    ),
    (
        "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
        "llama.cpp",
        "listening",
        None,
    ),
    (
        "2026-11-28T10:00:00Z  INFO shard-manager: Shard ready in 22.4s rank=0",
        "tgi",
        "Shard ready",
        22.4,
    ),
    (
        "(EngineCore pid=1) INFO [monitor.py:40] torch.compile took 70.12 s in total",
        "vllm",
        "torch.compile",
        70.12,
    ),
    (
        "(EngineCore pid=1) INFO [gpu_model_runner.py:5150] Model loading took 2.2 GiB memory "
        "and 22.850000 seconds",
        "vllm",
        "Model loading",
        22.85,
    ),
    ("[transformers] Loading /models/tiny", "transformers", "Loading model", None),
    (
        "Loading weights:   0%|  | 0/21 [00:00<?]\rLoading weights: 100%|##| 21/21 [00:00<00:00]",
        "transformers",
        "Loading weights",
        None,
    ),
]


@pytest.mark.parametrize(("line", "engine", "name", "took"), OTHER_ENGINES)
def test_other_engines_lines(line: str, engine: str, name: str, took: float | None) -> None:
    found = recognise(0, line)
    assert found is not None and (found.engine, found.name) == (engine, name)
    assert found.took_s == (pytest.approx(took) if took is not None else None)


@pytest.mark.parametrize(
    "line",
    ["", "took", "x" * 100_000, "Loading weights took many seconds", "\x00\xff binary took"],
)
def test_other_lines_are_none(line: str) -> None:
    assert recognise(0, line) is None


def _measure(start: int, end: int) -> Window:
    return Window((end - start) / 1e9, 0, 0, 0, 0.1)


def _lines(*pairs: tuple[float, str]):
    found = [recognise(round(at * 1e9), text) for at, text in pairs]
    assert all(found)
    return [f for f in found if f is not None]


def test_spans_end_where_read_and_marks_are_moments() -> None:
    lines = _lines(
        (10.0, "Starting to load model /m"),
        (14.0, "Loading weights took 3.50 seconds"),
        (20.0, "init engine (profile, create kv cache, warmup model) took 5.00 s"),
    )
    spans = place(lines, 0, _measure)
    assert [(s.name, s.start_s, s.end_s, s.mark) for s in spans] == [
        ("Starting to load model", 10.0, 10.0, True),
        ("Loading weights", 10.5, 14.0, False),
        ("init engine", 15.0, 20.0, False),
    ]
    assert spans[1].measured is not None and spans[1].measured.cpu_s == pytest.approx(3.5)
    line = weights_line(spans)
    assert line is not None and line.name == "Loading weights"


def test_a_closing_line_with_no_duration_spans_from_its_opening_mark() -> None:
    lines = _lines(
        (2.0, "Load weight begin. avail mem=1 GB"),
        (9.0, "Load weight end. type=X, dtype=bf16"),
    )
    spans = place(lines, 0, _measure)
    assert (spans[1].start_s, spans[1].end_s, spans[1].weights) == (2.0, 9.0, True)


def test_gaps_are_the_long_stretches_in_no_line_named_by_their_neighbours() -> None:
    lines = _lines(
        (30.0, "Loading weights took 10.00 seconds"),
        (40.0, "init engine (profile, create kv cache, warmup model) took 9.50 s"),
    )
    spans = place(lines, 0, _measure)
    found = gaps(spans, 71.0, 0, _measure)
    assert [(g.start_s, g.end_s, g.after, g.before) for g in found] == [
        (0.0, 20.0, "the start", "'Loading weights'"),
        (40.0, 71.0, "'init engine'", "ready"),
    ]
    # Under a second, or a tenth of the time to ready, is no gap worth a word.
    assert gaps(spans, 40.5, 0, _measure)[0].end_s == 20.0
    assert len(gaps(spans, 40.5, 0, _measure)) == 1
    assert gaps((), 71.0, 0, _measure) == ()
