"""Snippets for the loaders people really use (vLLM, diffusers, llama.cpp, Run:ai, plain
safetensors, the device's readahead), each marked measured, with the MB/s of the candidate
that does what it does, or not measured here: the config file's ``[apply]`` table."""

from __future__ import annotations

import os
from dataclasses import replace

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.measuring.judging import Duel
from modelmon.core.model.kind import checkpoint_kind
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions
from modelmon.core.output import safetensors_lines
from modelmon.core.output.readahead_words import permanent_readahead
from modelmon.core.output.safetensors_lines import NUMPY_TYPES, safetensors_snippets
from modelmon.core.output.server_lines import (
    SERVER_TOOLS,
    object_snippets,
    servers_left_out,
    vllm_snippets,
    weights_beside,
)
from modelmon.core.output.snippet import Snippet, stand_in

__all__ = ["SERVER_TOOLS", "Snippet", "apply_snippets", "matching", "servers_left_out", "snippets"]


def snippets(
    model: Model,
    winner: Candidate,
    ranked: tuple[Candidate, ...],
    config_name: str = "modelmon.toml",
    peers: tuple[Candidate, ...] = (),
    duel: Duel | None = None,
) -> list[Snippet]:
    """A snippet for each loader people use, marked measured (by the candidate that does what
    it does, with its MB/s) or not measured here. ``duel``: how the pick was settled (a
    streamer told a concurrent setting for a one-connection pick is told its finalist's)."""
    pool = (*ranked, *peers)

    def snip(tool: str, text: str, measured: Candidate | None) -> Snippet:
        return Snippet.of(tool, text, model, measured)

    def named(tool: str, text: str) -> Snippet:  # modelmon's lines: the model's path is in
        return Snippet.of(tool, text, model, winner, filled=True)

    def whole_reads(c: Candidate) -> bool:  # one reader, each file read front to back
        return c.strategy == "sequential" and c.readers == 1

    def mapped(c: Candidate) -> bool:
        return c.strategy in ("library", "mmap") and c.readers == 1

    remote = bool(model.files) and model.files[0].remote is not None
    where = model.path if remote else os.path.abspath(model.path)
    own = f"modelmon.core.load({where!r}, config={config_name!r})"
    if winner.options.discard:  # the config streams the model, as it was measured
        out = [named("modelmon", f"import modelmon.core; {own}  ({STREAMED})")]
    else:
        out = [named("modelmon", f"import modelmon.core; tensors = {own}")]
        # Offered where torch is not installed too (a user's own environment may have it),
        # said as the safetensors line says it.
        missing = "" if safetensors_lines.torch_installed() else "; torch is not installed here"
        out.append(named("torch", f"{torch_line(model, own)}  ({TORCH_ASIDE}{missing})"))
    kind = checkpoint_kind(model)
    if remote:  # the servers that stream a bucket, for a prefix they serve (its config.json)
        served = kind == "transformers"
        lines = object_snippets(model, winner, pool, peers, snip, duel) if served else []
        plain = [c for c in pool if c.role == "baseline" and c.own is not None]
        return [*out, *[plain_download(model, c) for c in plain[:1]], *lines]
    if model.format == "safetensors":
        out += safetensors_snippets(model, pool)
        if kind == "diffusers":  # a pipeline's or a diffusers model's folder
            out.append(
                snip(
                    "diffusers",
                    "from diffusers import DiffusionPipeline; pipeline = "
                    "DiffusionPipeline.from_pretrained(PATH, disable_mmap=True)  (its "
                    "model_index.json or config.json is beside the weights)",
                    stand_in(pool, whole_reads),
                )
            )
        # What vLLM serves: a folder with its config.json; not for a shard named alone, of
        # which the folder's lines would load more than was measured.
        if kind == "transformers" and not weights_beside(model):
            out += vllm_snippets(model, winner, pool, peers)
    else:
        out.append(
            snip(
                "llama.cpp",
                "llama-server -m PATH  (mmap, the default)",
                stand_in(pool, mapped),
            )
        )
        out.append(
            snip(
                "llama.cpp-no-mmap",
                "llama-server -m PATH --no-mmap",
                stand_in(pool, whole_reads),
            )
        )
        out.append(
            snip(
                "llama.cpp-direct-io",
                "llama-server -m PATH --direct-io",
                stand_in(pool, lambda c: c.strategy == "direct"),
            )
        )
        out.append(snip("llama.cpp-mlock", "llama-server -m PATH --mlock", None))
    out = _fastest_of_each_server(out)
    if winner.options.readahead is not None:
        commands = permanent_readahead(model, winner.options.readahead)
        if commands:
            others = f"  (or: {'; '.join(commands[1:])})" if commands[1:] else ""
            out.append(snip("readahead-device", commands[0] + others, winner))
    if winner.options.fadvise == "sequential":
        out.append(
            snip(
                "readahead",
                "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  (not a load: put in "
                "your own reader, on each file's descriptor fd, it doubles the readahead window)",
                winner,
            )
        )
    return out


# Array types torch.from_numpy takes as they are (numpy's own); any other (bfloat16, float8)
# is wrapped through the unsigned integers of its width, still without a copy.
TORCH_NUMPY_TYPES = NUMPY_TYPES
# The options of a plain download that are how it reads (not the cache state a run starts
# from, nor a check): what its own line passes to modelmon.core.load.
READING_OPTIONS = ("workers", "threads", "chunk", "partition")


def plain_download(model: Model, plain: Candidate) -> Snippet:
    """A bucket's plain download (one connection, each object in order, in the largest GETs)
    as a line of its own, measured as the baseline it is: a user who is told to load with
    it pastes it, whatever the config file holds."""
    defaults, options = LoadOptions(), plain.options
    changed = [
        f"{name}={getattr(options, name)!r}"
        for name in READING_OPTIONS
        if getattr(options, name) != getattr(defaults, name)
    ]
    call = ", ".join([repr(model.path), repr(plain.strategy), *changed])
    line = f"import modelmon.core; tensors = modelmon.core.load({call})"
    return Snippet.of("plain-download", line, model, plain, filled=True)


# What load returns, and how a torch user gets tensors of it: the torch line's aside.
TORCH_ASIDE = (
    "modelmon.core.load returns {tensor name: numpy array}; torch.from_numpy shares each "
    "array's memory: torch tensors without a copy"
)
STREAMED = (
    "returns an empty dict: the config streams the model through bounded buffers (discard), "
    "as it was measured"
)


def torch_line(model: Model, load: str) -> str:
    """``load``'s arrays as torch tensors, each wrapping its array's memory: a statement
    with its imports, pasted as it is."""
    imports = "import modelmon.core, torch; tensors = "
    if all(e.array_dtype in TORCH_NUMPY_TYPES for e in model.extents):
        return f"{imports}{{name: torch.from_numpy(array) for name, array in {load}.items()}}"
    return (
        f"{imports}{{name: torch.from_numpy(array.view(f'u{{array.itemsize}}')).view("
        f"getattr(torch, array.dtype.name)) for name, array in {load}.items()}}"
    )


OWN_TOOLS = ("modelmon", "torch")  # modelmon's own line, and the same load as torch tensors
SERVERS = ("llama.cpp", "vllm")  # servers with several lines: one is the one to paste


def _fastest_of_each_server(lines: list[Snippet]) -> list[Snippet]:
    """Of a server's lines measured here (two or more), the fastest is marked as such: the
    line a user of that server pastes, whatever modelmon's own pick is."""
    marked = list(lines)
    for server in SERVERS:
        own = [
            index
            for index, line in enumerate(marked)
            if (line.tool == server or line.tool.startswith(f"{server}-")) and line.mbps
        ]
        if len(own) >= 2:
            best = max(own, key=lambda index: marked[index].mbps or 0.0)
            line = marked[best]
            note = f"the fastest of {server}'s lines measured here"
            marked[best] = replace(line, note=f"{line.note}; {note}" if line.note else note)
    return marked


def apply_snippets(
    model: Model,
    winner: Candidate,
    ranked: tuple[Candidate, ...],
    config_name: str = "modelmon.toml",
    peers: tuple[Candidate, ...] = (),
) -> dict[str, str]:
    """``snippets``, by tool, as they are pasted (the config file's [apply] table)."""
    return {s.tool: s.text for s in snippets(model, winner, ranked, config_name, peers)}


def matching(lines: list[Snippet], pick: Candidate) -> str | None:
    """The tool whose line does what ``pick`` does (measured as it), the user's own first;
    modelmon's line when the pick is modelmon's and no loader's line was measured as it."""
    for snippet in lines:
        if snippet.tool not in OWN_TOOLS and snippet.measured_as == pick.spec:
            return snippet.tool
    own = next((s for s in lines if s.tool == "modelmon"), None)
    return own.tool if own is not None and own.measured_as == pick.spec else None
