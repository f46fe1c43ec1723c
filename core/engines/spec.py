"""Another program as a configuration: a command (``cmd: ...``) or an engine with its knobs
(``engine: NAME knob=value ...``), in words and back.

Everywhere a configuration is given (``bench --a/--b``, the app's A and B, ``fleet bench``,
``recommend --loader``), such a spec runs the program as one watched run of the model.

``cmd: [readahead=KIB] [NAME=VALUE ...] COMMAND ARGS...`` — words split as a shell splits
them (quotes, backslashes), never run through a shell. ``{path}`` in any word stands for the
model's path. Leading ``NAME=VALUE`` words set the command's environment, as in a shell;
``readahead=KIB`` is modelmon's: the device's readahead for the run (set and put back as for
modelmon's own runs).

``engine: NAME [KNOB=VALUE ...] [readahead=KIB]`` — one of ``registry.ENGINES``, run as
``engine_child.py`` runs it; knobs the engine's users know (``disable_mmap=true``,
``load_mode=none``, ``RUNAI_STREAMER_CONCURRENCY=16``).

Inside an A/B a program configuration travels as a ``Config`` whose strategy is the spec
(``as_config``): the A/B's runner sees it and runs the program (``engines.ab``).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from modelmon.core.engines.registry import get_engine
from modelmon.core.errors import OptionsError
from modelmon.core.options import Config, LoadOptions, parse_readahead

CMD, ENGINE = "cmd:", "engine:"
PATH_FIELD = "{path}"
CHILD = Path(__file__).with_name("engine_child.py")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_PLAIN = re.compile(r"[\w@%+=:,./{}-]+")  # a word shown as it is (else quoted as a shell would)


@dataclass(frozen=True, slots=True)
class ProgramConfig:
    kind: Literal["cmd", "engine"]
    argv: tuple[str, ...] = ()  # a command's words, ``{path}`` not yet replaced
    engine: str | None = None  # an engine's registry name
    knobs: tuple[tuple[str, str], ...] = ()  # an engine's knobs as given, in the order given
    env: tuple[tuple[str, str], ...] = ()  # a command's NAME=VALUE words
    readahead: int | None = None  # KiB of device readahead for the run; None: as it is

    @property
    def spec(self) -> str:
        """The configuration in words; ``parse_program`` reads it back."""
        ahead = [] if self.readahead is None else [f"readahead={self.readahead}"]
        if self.kind == "engine":
            knobs = [f"{name}={_shown(value)}" for name, value in self.knobs]
            return " ".join([ENGINE, str(self.engine), *knobs, *ahead])
        env = [f"{name}={_shown(value)}" for name, value in self.env]
        return " ".join([CMD, *ahead, *env, *(_shown(word) for word in self.argv)])

    @property
    def settings(self) -> dict[str, str]:
        """An engine's every knob: those given, the rest its defaults ({} for a command)."""
        if self.engine is None:
            return {}
        return get_engine(self.engine).settings(dict(self.knobs))

    @property
    def code(self) -> str:
        """What runs, its settings left out: the configurations of one engine, or one
        command's, run the same code (``run.warm_each`` reads it in once for all)."""
        if self.kind == "engine":
            return f"{ENGINE} {self.engine}"
        return " ".join([CMD, *(_shown(word) for word in self.argv)])

    def with_readahead(self, kib: int | None) -> ProgramConfig:
        return replace(self, readahead=kib)

    def with_knobs(self, knobs: Mapping[str, str]) -> ProgramConfig:
        """An engine's configuration with these knob values (the defaults left out)."""
        engine = get_engine(str(self.engine))
        chosen = engine.settings(knobs)
        defaults = engine.defaults()
        kept = tuple((k, v) for k, v in chosen.items() if v != defaults[k])
        return replace(self, knobs=kept)

    def command(self, path: str) -> list[str]:
        """The command line for the model at ``path``."""
        if self.kind == "engine":
            engine = get_engine(str(self.engine))
            arguments = engine.arguments(self.settings)
            given = dict(self.knobs)
            words = [f"{name}={value}" for name, value in arguments.items() if name in given]
            return [sys.executable, str(CHILD), engine.name, path, *words]
        return [word.replace(PATH_FIELD, path) for word in self.argv]

    def environment(self) -> dict[str, str]:
        """The variables the run sets on top of modelmon's environment."""
        if self.kind == "engine":
            return get_engine(str(self.engine)).environment(self.settings)
        return dict(self.env)


def _shown(word: str) -> str:
    return word if _PLAIN.fullmatch(word) else shlex.quote(word)


def is_program_spec(text: str) -> bool:
    """Whether a configuration in words is a program (``cmd:`` or ``engine:``)."""
    head = text.lstrip().lower()
    return head.startswith(CMD) or head.startswith(ENGINE)


def _split(text: str, what: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:  # an unclosed quote, a trailing backslash
        raise OptionsError(f"{what}: {exc} (quote as in a shell)") from None


def parse_program(text: str) -> ProgramConfig:
    """``cmd: ...`` or ``engine: ...`` → the configuration; one-line OptionsError otherwise."""
    stripped = text.strip()
    head, _, rest = stripped.partition(":")
    kind = head.strip().lower()
    if kind == "cmd":
        return _parse_command(rest)
    if kind == "engine":
        return parse_engine(rest)
    raise OptionsError(f"not a program configuration: {text!r} (cmd: COMMAND, or engine: NAME)")


def _parse_command(rest: str) -> ProgramConfig:
    words = _split(rest, CMD)
    readahead, env = None, []
    while words and _ASSIGNMENT.fullmatch(words[0]):
        name, _, value = words.pop(0).partition("=")
        if name == "readahead":
            readahead = parse_readahead(value)
        else:
            env.append((name, value))
    if not words:
        raise OptionsError(f"{CMD} needs a command, e.g. cmd: python load.py {PATH_FIELD}")
    return ProgramConfig("cmd", argv=tuple(words), env=tuple(env), readahead=readahead)


def parse_engine(text: str) -> ProgramConfig:
    """``NAME [KNOB=VALUE ...] [readahead=KIB]`` (``engine:`` optional): an engine run."""
    body = text.strip()
    if body.lower().startswith(ENGINE):
        body = body[len(ENGINE) :]
    words = _split(body, ENGINE)
    if not words:
        raise OptionsError(f"{ENGINE} needs an engine's name, e.g. engine: transformers")
    engine = get_engine(words[0])
    knobs: dict[str, str] = {}
    readahead = None
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if not sep:
            raise OptionsError(f"{ENGINE} {engine.name}: {word!r} must look like knob=value")
        if name == "readahead":
            readahead = parse_readahead(value)
        else:
            knobs[name] = engine.knob(name).check(value)
    return ProgramConfig(
        "engine", engine=engine.name, knobs=tuple(knobs.items()), readahead=readahead
    )


def named_path(given: str, model_path: str) -> str:
    """What ``{path}`` stands for: the path as the user named it (made absolute) where it is
    one here, so that a folder stays a folder; else the model's (a reference such as
    ``hf:ORG/NAME``, resolved)."""
    return os.path.abspath(given) if os.path.exists(given) else model_path


def as_config(program: ProgramConfig) -> Config:
    """The program as an A/B side: a ``Config`` whose strategy is its spec."""
    return Config(program.spec, LoadOptions())


def program_of(strategy: str) -> ProgramConfig | None:
    """The program a ``Config``'s strategy stands for, or None for a modelmon strategy."""
    return parse_program(strategy) if is_program_spec(strategy) else None
