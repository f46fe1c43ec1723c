"""A snippet a user pastes as it is: the loaders' lines are written with ``PATH`` where the
model goes and an aside in parentheses ("(mmap, the default)"); pasted, the aside is a
syntax error and ``PATH`` names nothing. ``pasteable`` puts the model's own path in, quoted
for the language of the line, and hands the aside back to be shown beside it. A Python line
that reads every file of a sharded model writes ``PATHS`` where their list goes: the model's
files by their whole paths, so the line loads every shard as it is pasted."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from dataclasses import dataclass

from modelmon.core.model.records import Model

PLACEHOLDER = "PATH"
EVERY_FILE = "PATHS"  # a Python list of every file of the model, by its whole path
# An aside: two spaces, then one parenthesised remark that ends the line.
_ASIDE = re.compile(r"\s{2,}\((?P<aside>[^()]*(?:\([^()]*\)[^()]*)*)\)\s*$")
# Lines that a shell runs (the rest are Python): a server's command line, an environment
# assignment before one, the commands that set a device's readahead.
_SHELL_WORDS = ("vllm", "llama-server", "python", "blockdev", "echo", "sudo", "udevadm")
_ENV = re.compile(r"^[A-Z][A-Z0-9_]*=\S*\s")
# Commands that take the model's folder (a server reads config.json beside the weights).
_FOLDER_COMMANDS = ("vllm", "python -m sglang")


@dataclass(frozen=True, slots=True)
class Pasteable:
    code: str  # the line, as it is pasted
    aside: str  # what the line leaves unsaid ("mmap, the default"), or ""


def _command(line: str) -> str:
    """``line`` without the environment assignments before its command."""
    while _ENV.match(line):
        line = _ENV.sub("", line, count=1)
    return line


def is_shell(line: str) -> bool:
    """Whether ``line`` is a shell command (else it is Python)."""
    words = _command(line).split(" ", 1)
    return words[0] in _SHELL_WORDS


def model_folder(model: Model) -> str:
    """The folder a server is pointed at: the model's own when it is one, else its file's
    (of a model in object storage: its prefix, ``s3://bucket/llama/``)."""
    if model.files and model.files[0].remote is not None:
        return model.files[0].path.rsplit("/", 1)[0] + "/"
    path = os.path.abspath(os.fspath(model.path))
    return path if os.path.isdir(path) else os.path.dirname(path)


def pasteable(template: str, model: Model, *, fill: bool = True) -> Pasteable:
    """``template`` with the model's path for ``PATH`` (a shell command's quoted for the
    shell, Python's as a string literal; a server's is the model's folder, a single-file
    load's the file) and its trailing aside split off; ``fill`` False: a line that names
    the model already, whose paths may hold the word PATH, is left as it is."""
    found = _ASIDE.search(template)
    aside = found.group("aside") if found else ""
    code = template[: found.start()] if found else template
    if not fill or PLACEHOLDER not in code:
        return Pasteable(code, aside)
    files = [
        f.path if f.remote is not None else os.path.abspath(os.fspath(f.path)) for f in model.files
    ]
    if EVERY_FILE in code and not is_shell(code):
        return Pasteable(code.replace(EVERY_FILE, repr(files)), aside)
    if is_shell(code):
        command = _command(code)
        if command.startswith(_FOLDER_COMMANDS) or not files:
            target = model_folder(model)
        else:
            target = files[0]  # llama.cpp takes the first file of a split GGUF
        return Pasteable(code.replace(PLACEHOLDER, shlex.quote(target)), aside)
    if ".from_pretrained(" in code:  # a folder, where config.json is beside the weights
        return Pasteable(code.replace(PLACEHOLDER, repr(model_folder(model))), aside)
    if len(files) == 1:
        return Pasteable(code.replace(PLACEHOLDER, repr(files[0])), aside)
    # Several files, one call each: ``path`` stands for each, and the aside says so.
    where = model_folder(model)
    each = f"path: each of its {len(files)} files in {where}"
    return Pasteable(code.replace(PLACEHOLDER, "path"), f"{aside}; {each}" if aside else each)


def modelmon_command() -> str:
    """How a fresh shell runs this modelmon: the script beside this Python by its whole path
    where it is a virtual environment's (a new shell has not activated it), ``modelmon``
    where ``PATH`` finds this very script, else ``python -m modelmon`` by this Python."""
    script = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "modelmon")
    if os.path.exists(script) and sys.prefix != sys.base_prefix:
        return shlex.quote(script)
    found = shutil.which("modelmon")
    if found and os.path.exists(script) and os.path.samefile(found, script):
        return "modelmon"
    return f"{shlex.quote(sys.executable)} -m modelmon"
