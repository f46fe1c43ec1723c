"""Snippets for the loaders people really use (vLLM, diffusers, llama.cpp, Run:ai, plain
safetensors, the device's readahead), each marked measured, with the MB/s of the candidate
that does what it does, or not measured here: the config file's ``[apply]`` table."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from modelmon.core.measuring.candidate import Candidate
from modelmon.core.model.kind import checkpoint_kind, model_folder_of
from modelmon.core.model.records import Model
from modelmon.core.output.paste import model_folder, pasteable
from modelmon.core.output.readahead_words import permanent_readahead
from modelmon.core.units import rate_text


@dataclass(frozen=True, slots=True)
class Snippet:
    tool: str
    text: str  # pasted as it is: the model's path in, no remarks (``output.paste``)
    measured_as: str | None  # the spec of the measured candidate that stands for it
    mbps: float | None
    runs: int | None = None  # the runs its MB/s is the median of, where said
    note: str = ""  # how it relates to what was measured ("the same loader", "translated...")
    aside: str = ""  # what the line leaves unsaid ("mmap, the default")

    def evidence(self) -> str:
        """What stands behind the line: measured here (as what, at what rate), or not."""
        about = f"{self.aside}; " if self.aside else ""
        note = f"; {self.note}" if self.note else ""
        if self.measured_as is None:
            return f"{about}not measured here{': ' + self.note if self.note else ''}"
        runs = f", {self.runs} run{'s' if self.runs != 1 else ''}" if self.runs else ""
        rate = rate_text(self.mbps) if self.mbps is not None else "its rate not kept"
        return f"{about}measured here as {self.measured_as}: {rate}{runs}{note}"

    def line(self) -> str:
        """The line and its evidence, as a shell or Python comment beside it."""
        return f"{self.text}   # {self.evidence()}"

    @classmethod
    def of(
        cls,
        tool: str,
        template: str,
        model: Model,
        stand_in: Candidate | None,
        *,
        runs: bool = False,
        note: str = "",
    ) -> Snippet:
        """A snippet from a loader's line (``PATH`` where the model goes), measured as
        ``stand_in`` (None: not measured here); ``runs``: say how many runs."""
        ready = pasteable(template, model)
        if stand_in is None:
            return cls(tool, ready.code, None, None, None, note, ready.aside)
        count = len(stand_in.results) if runs else None
        return cls(tool, ready.code, stand_in.spec, stand_in.median_mbps, count, note, ready.aside)


def _stand_in(pool: tuple[Candidate, ...], test: Callable[[Candidate], bool]) -> Candidate | None:
    found = [c for c in pool if c.results and test(c)]
    return max(found, key=lambda c: c.median_mbps) if found else None


def snippets(
    model: Model,
    winner: Candidate,
    ranked: tuple[Candidate, ...],
    config_name: str = "modelmon.toml",
    peers: tuple[Candidate, ...] = (),
) -> list[Snippet]:
    """A snippet for each loader people use, marked measured (by the candidate that does what
    it does, with its MB/s) or not measured here."""
    pool = (*ranked, *peers)

    def snip(tool: str, text: str, stand_in: Candidate | None) -> Snippet:
        return Snippet.of(tool, text, model, stand_in)

    def whole_reads(c: Candidate) -> bool:  # one reader, each file read front to back
        return c.strategy == "sequential" and c.readers == 1

    def mapped(c: Candidate) -> bool:
        return c.strategy in ("library", "mmap") and c.readers == 1

    def engine(name: str) -> Callable[[Candidate], bool]:
        return lambda c: c.program is not None and c.program.engine == name

    remote = bool(model.files) and model.files[0].remote is not None
    where = model.path if remote else os.path.abspath(model.path)
    own = f"modelmon.core.load({where!r}, config={config_name!r})"
    if winner.options.discard:  # the config streams the model, as it was measured
        out = [snip("modelmon", f"{own}  ({STREAMED})", winner)]
    else:
        out = [snip("modelmon", own, winner)]
        out.append(snip("torch", f"{torch_line(model, own)}  ({TORCH_ASIDE})", winner))
    kind = checkpoint_kind(model)
    if remote:  # the servers that stream a bucket, for a prefix they serve (its config.json)
        served = kind == "transformers"
        lines = _object_snippets(model, winner, pool, peers, snip) if served else []
        return [*out, *lines]
    if model.format == "safetensors":
        whole = _stand_in(pool, whole_reads)
        out.append(
            snip(
                "safetensors",
                "safetensors.safe_open(PATH, framework='pt')  (mmap)",
                _stand_in(pool, lambda c: engine("safetensors")(c) or c.strategy == "library"),
            )
        )
        out.append(
            snip(
                "safetensors-read",
                "safetensors.torch.load(open(PATH, 'rb').read())  (read whole, no mmap)",
                whole,
            )
        )
        if kind == "diffusers":  # a pipeline's or a diffusers model's folder
            out.append(
                snip(
                    "diffusers",
                    "DiffusionPipeline.from_pretrained(PATH, disable_mmap=True)  (its "
                    "model_index.json or config.json is beside the weights)",
                    whole,
                )
            )
        if kind == "transformers":  # what vLLM serves: a folder with its config.json
            out += _vllm_snippets(model, winner, pool, peers)
    else:
        out.append(
            snip(
                "llama.cpp",
                "llama-server -m PATH  (mmap, the default)",
                _stand_in(pool, mapped),
            )
        )
        out.append(
            snip(
                "llama.cpp-no-mmap",
                "llama-server -m PATH --no-mmap",
                _stand_in(pool, whole_reads),
            )
        )
        out.append(
            snip(
                "llama.cpp-direct-io",
                "llama-server -m PATH --direct-io",
                _stand_in(pool, lambda c: c.strategy == "direct"),
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
                "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)  (on each file's "
                "descriptor: doubles its readahead window)",
                winner,
            )
        )
    return out


# Why each of vLLM's lines is there: the loader it names, for this folder vLLM serves.
VLLM_WHY = "vLLM serves this folder (a transformers model: config.json)"
VLLM_LINES = {
    "vllm-eager": ("--safetensors-load-strategy eager", "reads each file whole into memory"),
    "vllm-lazy": ("--safetensors-load-strategy lazy", "maps each file (vLLM's default)"),
    "vllm-prefetch": (
        "--safetensors-load-strategy prefetch",
        "reads the files into the page cache ahead, then maps them",
    ),
    "fastsafetensors": ("--load-format fastsafetensors", "fastsafetensors' parallel reads"),
}
# Array types torch.from_numpy takes as they are; any other (bfloat16, float8) is wrapped
# through the unsigned integers of its width, still without a copy.
TORCH_NUMPY_TYPES = {
    "float64",
    "float32",
    "float16",
    "complex64",
    "complex128",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint64",
    "uint32",
    "uint16",
    "uint8",
    "bool",
}
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
    """``load``'s arrays as torch tensors, each wrapping its array's memory."""
    if all(e.array_dtype in TORCH_NUMPY_TYPES for e in model.extents):
        return f"{{name: torch.from_numpy(array) for name, array in {load}.items()}}"
    return (
        "{name: torch.from_numpy(array.view(f'u{array.itemsize}')).view(getattr(torch, "
        f"array.dtype.name)) for name, array in {load}.items()}}"
    )


def _vllm_snippets(
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
        "vllm-eager": _stand_in(pool, read_whole),
        "vllm-lazy": _stand_in(pool, maps),
        "vllm-prefetch": _stand_in(pool, lambda c: c.strategy == "warmup"),
        "fastsafetensors": _stand_in(pool, engine("fastsafetensors")),
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
            "runai_streamer",
            f"vllm serve PATH --load-format runai_streamer --model-loader-extra-config "
            f"'{extra}'  (or RUNAI_STREAMER_CONCURRENCY={concurrency})",
            model,
            best_runai,
            note=f"Run:ai Model Streamer's concurrent reads; listed as {VLLM_WHY}",
        ),
    )
    return out


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


def _object_snippets(
    model: Model,
    winner: Candidate,
    pool: tuple[Candidate, ...],
    peers: tuple[Candidate, ...],
    snip: Callable[[str, str, Candidate | None], Snippet],
) -> list[Snippet]:
    """Servers that stream a bucket with Run:ai Model Streamer, told the pick's connections
    and part size (its concurrency and chunk size); vLLM's for safetensors only. A streamer
    reads concurrently: where the pick is one connection (a plain download), it is told the
    fastest concurrent setting measured instead, and the line says so."""
    runai = [
        c for c in peers if c.program is not None and c.program.engine == "runai" and c.results
    ]
    best = max(runai, key=lambda c: c.median_mbps) if runai else None
    setting, whose = winner, "the pick's"
    if winner.readers <= 1:
        concurrent = [c for c in pool if c.own is not None and c.readers > 1 and c.results]
        if concurrent:
            setting = max(concurrent, key=lambda c: c.median_mbps)
            whose = f"the fastest concurrent setting measured ({setting.spec})'s"
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
            "runai_streamer",
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


# The lines of the servers that read a transformers model's folder or prefix (vLLM, SGLang).
SERVER_TOOLS = ("vllm", "runai_streamer", "fastsafetensors", "sglang")
SERVED_BY = (
    "No vLLM or SGLang line: they serve a folder or bucket prefix by its config.json, which "
    "names the model's architecture"
)


def servers_left_out(model: Model, tools: Iterable[str] = ()) -> str:
    """Why no line of vLLM or SGLang is among ``model``'s (``tools``: the lines given), in
    one sentence; "" where one is, or where the model is a GGUF (llama.cpp's lines serve it)."""
    kind = checkpoint_kind(model)
    if kind in ("transformers", "gguf") or any(t.startswith(SERVER_TOOLS) for t in tools):
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
