"""The lines of the servers that load a transformers model's folder or bucket prefix (vLLM,
SGLang), each named by the server it runs with its load format beside (``vllm-lazy``,
``vllm-runai_streamer``), marked measured by the candidate that reads as it does, or not
measured here; and why no such line is given where they are left out."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import Duel
from modelmon.core.model.kind import checkpoint_kind, model_folder_of
from modelmon.core.model.records import Model
from modelmon.core.output.paste import model_folder
from modelmon.core.output.snippet import Snippet, stand_in

# Why each of vLLM's lines is there: the loader it names, for this folder vLLM serves.
VLLM_WHY = "vLLM serves this folder (a transformers model: config.json)"
VLLM_LINES = {
    "vllm-eager": ("--safetensors-load-strategy eager", "reads each file whole into memory"),
    "vllm-lazy": ("--safetensors-load-strategy lazy", "maps each file (vLLM's default)"),
    "vllm-prefetch": (
        "--safetensors-load-strategy prefetch",
        "reads the files into the page cache ahead, then maps them",
    ),
    "vllm-fastsafetensors": (
        "--load-format fastsafetensors",
        "fastsafetensors' parallel reads",
    ),
}


def vllm_snippets(
    model: Model, winner: Candidate, pool: tuple[Candidate, ...], peers: tuple[Candidate, ...]
) -> list[Snippet]:
    """vLLM's lines for a folder it serves, each said what it does and why it is listed;
    measured by the candidate that reads as it does, or not measured here."""

    def read_whole(c: Candidate) -> bool:
        return c.strategy == "sequential" and c.readers == 1

    def maps(c: Candidate) -> bool:
        return c.strategy in ("library", "mmap") and c.readers == 1

    def engine(name: str) -> Callable[[Candidate], bool]:
        return lambda c: c.program is not None and c.program.engine == name

    stand_ins = {
        "vllm-eager": stand_in(pool, read_whole),
        "vllm-lazy": stand_in(pool, maps),
        "vllm-prefetch": stand_in(pool, lambda c: c.strategy == "warmup"),
        "vllm-fastsafetensors": stand_in(pool, engine("fastsafetensors")),
    }
    out = []
    for tool, (flags, does) in VLLM_LINES.items():
        note = f"{does}; listed as {VLLM_WHY}"
        out.append(Snippet.of(tool, f"vllm serve PATH {flags}", model, stand_ins[tool], note=note))
    runai = [c for c in peers if engine("runai")(c) and c.results]
    best_runai = max(runai, key=lambda c: c.median_mbps) if runai else None
    concurrency = best_runai.readers if best_runai else max(winner.readers, 1)
    extra = json.dumps({"concurrency": concurrency})
    out.insert(
        3,
        Snippet.of(
            "vllm-runai_streamer",
            f"vllm serve PATH --load-format runai_streamer --model-loader-extra-config "
            f"'{extra}'  (or RUNAI_STREAMER_CONCURRENCY={concurrency})",
            model,
            best_runai,
            note=f"Run:ai Model Streamer's concurrent reads; listed as {VLLM_WHY}",
        ),
    )
    return out


def object_snippets(
    model: Model,
    winner: Candidate,
    pool: tuple[Candidate, ...],
    peers: tuple[Candidate, ...],
    snip: Callable[[str, str, Candidate | None], Snippet],
    duel: Duel | None = None,
) -> list[Snippet]:
    """Servers that stream a bucket with Run:ai Model Streamer, told the pick's connections
    and part size (its concurrency and chunk size); vLLM's for safetensors only. A streamer
    reads concurrently: where the pick is one connection (a plain download), it is told the
    concurrent setting the answer weighed it against (``concurrent_setting``), and the
    line says whose."""
    runai = [
        c for c in peers if c.program is not None and c.program.engine == "runai" and c.results
    ]
    best = max(runai, key=lambda c: c.median_mbps) if runai else None
    setting, whose = winner, "the pick's"
    if winner.readers <= 1:
        setting, whose = concurrent_setting(pool, duel) or (setting, whose)
    concurrency = best.readers if best else max(setting.readers, 1)
    chunk = setting.options.chunk
    if model.format != "safetensors":
        return []
    extra = json.dumps({"concurrency": concurrency})
    size = f"RUNAI_STREAMER_CHUNK_BYTESIZE={chunk}"
    remote = model.files[0].remote
    if remote is not None and remote.host_kind != "aws":  # the streamer's own S3 client
        size = (
            f"AWS_ENDPOINT_URL={remote.endpoint} RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING=0 " + size
        )
    return [
        snip(
            "vllm-runai_streamer",
            f"{size} vllm serve PATH --load-format runai_streamer --model-loader-extra-config "
            f"'{extra}'  ({whose} connections as its concurrency, its part size as chunk)",
            best,
        ),
        snip(
            "sglang",
            f"RUNAI_STREAMER_CONCURRENCY={concurrency} {size} python -m sglang.launch_server "
            "--model-path PATH --load-format runai_streamer  (SGLang's default for s3://; "
            f"{whose} connections and part size)",
            best,
        ),
    ]


def concurrent_setting(
    pool: tuple[Candidate, ...], duel: Duel | None
) -> tuple[Candidate, str] | None:
    """The concurrent setting a streamer is told where the pick is one connection, and whose
    it is in words: the pick's other finalist (``duel.other``), which the answer names (the
    setting it was raced against, or the search's pick it keeps the plain download over);
    else, where that is none of modelmon's concurrent settings, the fastest measured. One
    lucky entry run, never raced, is no setting the answer relies on (8 connections of 256
    MiB at 1,401.5 MB/s on 1 run, beside an answer that raced 8 connections of 64 MiB at
    1,288 MB/s against the plain download). None where none was measured."""

    def concurrent(c: Candidate) -> bool:
        return c.own is not None and c.readers > 1 and bool(c.results)

    other = duel.other if duel is not None else None
    if duel is not None and other is not None and concurrent(other):
        if duel.kept:
            return other, f"the search's pick ({other.spec})'s"
        return other, f"the concurrent setting the pick was raced against ({other.spec})'s"
    measured = [c for c in pool if concurrent(c)]
    if not measured:
        return None
    fastest = max(measured, key=lambda c: c.median_mbps)
    return fastest, f"the fastest concurrent setting measured ({fastest.spec})'s"


# The lines of the servers that read a transformers model's folder or prefix (vLLM, SGLang).
SERVER_TOOLS = ("vllm", "sglang")
SERVED_BY = (
    "No vLLM or SGLang line: they serve a folder or bucket prefix by its config.json, which "
    "names the model's architecture"
)


def weights_beside(model: Model) -> int:
    """How many other weight files (``*.safetensors``) lie in the folder of a local model named
    by one of its files: a shard named alone. A server given the folder reads those too."""
    if len(model.files) != 1 or model.files[0].remote is not None:
        return 0
    folder = model_folder_of(model)
    if os.path.abspath(os.fspath(model.path)) == folder:
        return 0
    own = os.path.realpath(model.files[0].path)
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    return sum(
        1
        for name in names
        if name.endswith(".safetensors") and os.path.realpath(os.path.join(folder, name)) != own
    )


def servers_left_out(model: Model, tools: Iterable[str] = ()) -> str:
    """Why no line of vLLM or SGLang is among ``model``'s (``tools``: the lines given), in
    one sentence; "" where one is, or where the model is a GGUF (llama.cpp's lines serve it)."""
    kind = checkpoint_kind(model)
    if any(t.startswith(SERVER_TOOLS) for t in tools):
        return ""
    others = weights_beside(model) if kind == "transformers" else 0
    if others:
        return (
            f"No vLLM or SGLang line: they serve the whole folder, {model_folder_of(model)}, "
            f"whose {others} other weight file{'s' if others != 1 else ''} this run did not "
            "read; name the folder or its index to measure what they load."
        )
    if kind in ("transformers", "gguf"):
        return ""
    if kind == "diffusers":
        return (
            "No vLLM or SGLang line: a diffusers model (model_index.json, or a config.json "
            "naming a diffusers class), which they do not serve."
        )
    remote = model.files[0].remote if model.files else None
    if remote is None:
        return f"{SERVED_BY}, and {model_folder_of(model)} has no config.json that names one."
    if model.kind is not None:  # a prefix, whose listing was looked at
        return f"{SERVED_BY}, and {model_folder(model)} has no config.json that names one."
    if remote.storage != "s3":  # no listing: nothing beside an object can be found
        return f"{SERVED_BY}, and an {remote.storage}:// object has nothing listed beside it."
    return (
        f"{SERVED_BY}, and an object named alone has nothing listed beside it: name its "
        f"prefix, {model_folder(model)}, to have its config.json looked for."
    )
