"""What may make a server ready sooner, as variants of the user's own command: their own
changes (``--variant``), the loading settings of the engine it runs (vLLM, SGLang, llama.cpp's
server; those that apply to its command, each with why), and its caches (a kept compile
cache, a pre-warmed page cache). Each variant is the user's command with one change, so the
line to paste is that command.

A change is words as a shell splits them: leading ``NAME=VALUE`` words set the environment;
then flags, ``--flag VALUE``, ``--flag=VALUE`` or ``--flag`` alone, each replacing the same
flag where the command has it, else added at its end.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from dataclasses import dataclass, replace
from typing import Literal

from modelmon.core.configuration import Command, ProgramConfig
from modelmon.core.errors import OptionsError

Kind = Literal["yours", "engine", "cache"]
THREADS = 8  # a multithreaded load's threads: what SGLang's and vLLM's examples use
RUNAI_CONCURRENCY = 32  # Run:ai's streamer's reads at once, twice its default
PROBE_S = 20.0  # the most a check of the server's interpreter may take


@dataclass(frozen=True, slots=True)
class Variant:
    """The user's server with one change."""

    config: ProgramConfig
    change: str  # the change in words: "--load-format runai_streamer", "a kept compile cache"
    kind: Kind
    why: str = ""  # what it changes, in one sentence


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A change of the engine's that is not measured here, and why."""

    change: str
    why: str


def server_engine(program: ProgramConfig) -> str | None:
    """The serving engine a command runs: "vllm", "sglang", "llama.cpp", "tgi",
    "transformers", or None."""
    words = program.command_words.argv if program.command_words else ()
    names = [os.path.basename(word) for word in words[:4]]
    text = " ".join(words)
    if "vllm" in names or "vllm.entrypoints" in text:
        return "vllm"
    if "sglang.launch_server" in text or ("sglang" in names and "serve" in words):
        return "sglang"
    if "llama-server" in names or "llama_cpp.server" in text:
        return "llama.cpp"
    if "text-generation-launcher" in names:
        return "tgi"
    if "transformers" in names and "serve" in words:
        return "transformers"
    return None


def with_change(program: ProgramConfig, change: str) -> ProgramConfig:
    """``program`` with ``change`` applied (see the module's docstring)."""
    assert program.command_words is not None
    try:
        words = shlex.split(change)
    except ValueError as exc:
        raise OptionsError(f"--variant {change!r} does not split into words: {exc}") from None
    if not words:
        raise OptionsError("--variant is empty: give flags or NAME=VALUE words")
    env = dict(program.command_words.env)
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, assigned = words.pop(0).partition("=")
        if not name.isidentifier():
            raise OptionsError(f"--variant {change!r}: {name!r} is not a variable's name")
        env[name] = assigned
    argv = list(program.command_words.argv)
    while words:
        flag = words.pop(0)
        if not flag.startswith("-"):
            raise OptionsError(
                f"--variant {change!r}: {flag!r} is not a flag (--flag VALUE, --flag=VALUE, "
                "or NAME=VALUE first)"
            )
        value: str | None = None
        if "=" in flag:
            flag, _, value = flag.partition("=")
        elif words and not words[0].startswith("-"):
            value = words.pop(0)
        argv = _set_flag(argv, flag, value)
    command = Command(tuple(argv), tuple(env.items()))
    return replace(program, command_words=command)


def _set_flag(argv: list[str], flag: str, value: str | None) -> list[str]:
    for index, word in enumerate(argv):
        if word == flag:
            has_value = index + 1 < len(argv) and not argv[index + 1].startswith("-")
            rest = argv[index + 2 :] if has_value else argv[index + 1 :]
            return [*argv[:index], flag, *([] if value is None else [value]), *rest]
        if word.startswith(flag + "="):
            return [
                *argv[:index],
                f"{flag}={value}" if value is not None else flag,
                *argv[index + 1 :],
            ]
    return [*argv, flag, *([] if value is None else [value])]


def flag_value(program: ProgramConfig, flag: str) -> str | None:
    """The value ``program``'s command gives ``flag`` ("" for a flag alone), None without."""
    argv = program.command_words.argv if program.command_words else ()
    for index, word in enumerate(argv):
        if word == flag:
            following = argv[index + 1] if index + 1 < len(argv) else ""
            return "" if following.startswith("-") else following
        if word.startswith(flag + "="):
            return word.partition("=")[2]
    return None


def interpreter(program: ProgramConfig) -> str | None:
    """The Python that runs the server: its first word when that is a Python, else the
    interpreter its script names on its first line."""
    argv = program.command_words.argv if program.command_words else ()
    if not argv:
        return None
    first = shutil.which(argv[0]) or argv[0]
    if os.path.basename(first).startswith("python"):
        return first
    try:
        with open(first, "rb") as script:
            line = script.readline(512)
    except OSError:
        return None
    if line.startswith(b"#!"):
        words = line[2:].decode(errors="replace").split()
        if words and "python" in os.path.basename(words[-1] if "env" in words[0] else words[0]):
            return shutil.which(words[-1]) if "env" in words[0] else words[0]
    return None


def importable(program: ProgramConfig, module: str) -> bool | None:
    """Whether the server's own Python imports ``module`` (None: not known, no Python
    found): a load format whose library is not installed beside it would fail."""
    python = interpreter(program)
    if python is None:
        return None
    probe = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    try:
        done = subprocess.run(
            [python, "-c", probe],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=PROBE_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.returncode == 0


LOAD_FORMATS = {  # vLLM's and SGLang's --load-format values that read safetensors otherwise
    "runai_streamer": ("runai_model_streamer", "Run:ai's streamer: concurrent reads"),
    "fastsafetensors": ("fastsafetensors", "fastsafetensors: large reads into one buffer"),
}
STRATEGIES = {  # vLLM's --safetensors-load-strategy
    "eager": "reads each file whole into memory first, then copies the tensors out",
    "prefetch": "reads the files through the page cache before the workers load them",
}


def engine_variants(program: ProgramConfig) -> tuple[list[Variant], list[LeftOut]]:
    """The loading settings of the engine ``program`` runs, as variants, and the settings
    left out with why."""
    engine = server_engine(program)
    found: list[Variant] = []
    left: list[LeftOut] = []

    def add(change: str, why: str) -> None:
        found.append(Variant(with_change(program, change), change, "engine", why))

    if engine in ("vllm", "sglang"):
        current = flag_value(program, "--load-format") or "auto"
        for name, (module, why) in LOAD_FORMATS.items():
            if current == name:
                continue
            there = importable(program, module)
            if there is False:
                left.append(
                    LeftOut(
                        f"--load-format {name}",
                        f"{module} is not installed beside the server (its own Python lacks it)",
                    )
                )
                continue
            add(f"--load-format {name}", why)
            if name == "runai_streamer" and engine == "vllm":  # its concurrency, raised
                extra = json.dumps({"concurrency": RUNAI_CONCURRENCY})
                add(
                    f"--load-format {name} --model-loader-extra-config '{extra}'",
                    f"Run:ai's streamer with {RUNAI_CONCURRENCY} concurrent reads (its default "
                    "is 16)",
                )
        if flag_value(program, "--model-loader-extra-config") is None and current == "auto":
            extra = json.dumps({"enable_multithread_load": True, "num_threads": THREADS})
            add(
                f"--model-loader-extra-config '{extra}'",
                f"its default loader reads the files with {THREADS} threads",
            )
    if engine == "vllm":
        strategy = flag_value(program, "--safetensors-load-strategy")
        for name, why in STRATEGIES.items():
            if strategy != name:
                add(f"--safetensors-load-strategy {name}", why)
        if flag_value(program, "--enforce-eager") is not None:
            left.append(
                LeftOut(
                    "a kept compile cache (VLLM_CACHE_ROOT)",
                    "--enforce-eager compiles nothing: there is no compile cache to keep",
                )
            )
    elif engine == "llama.cpp":
        if flag_value(program, "--no-mmap") is None:
            add("--no-mmap", "reads the file into memory instead of mapping it (page faults)")
        if flag_value(program, "--mlock") is None:
            add("--mlock", "maps the file and locks it in memory: read once, up front")
    elif engine in ("tgi", "transformers"):
        left.append(
            LeftOut(
                "its loading settings",
                f"{'text-generation-inference' if engine == 'tgi' else 'transformers serve'} "
                "has no setting of how it reads its weights: its caches are measured",
            )
        )
    else:
        left.append(
            LeftOut(
                "an engine's loading settings",
                "the command runs no serving engine modelmon knows (vLLM, SGLang, llama.cpp's "
                "server, text-generation-inference, transformers serve): your --variant "
                "changes and its caches are measured",
            )
        )
    return found, left


def cache_variants(program: ProgramConfig) -> list[Variant]:
    """A kept compile cache (where the engine may compile) and a pre-warmed page cache."""
    found = []
    engine = server_engine(program)
    eager = engine == "vllm" and flag_value(program, "--enforce-eager") is not None
    if not eager and engine not in ("llama.cpp", "tgi"):
        found.append(
            Variant(
                replace(program, compile_cache="kept"),
                "a kept compile cache",
                "cache",
                "its compile caches persisted between starts (a volume), not made anew",
            )
        )
    found.append(
        Variant(
            replace(program, page_cache="warm"),
            "a pre-warmed page cache",
            "cache",
            "the model in the node's page cache before the server starts",
        )
    )
    return found
