"""A configuration to load with, as a typed value: one of modelmon's strategies with its
options (``StrategyConfig``), or another program (``ProgramConfig``): the user's command or a
loader that is not modelmon's, with its knobs. ``Configuration`` is either; it is parsed once
from text at the edge (the CLI's ``--a/--b``, the app's sides and settings, ``recommend
--loader``) by ``parse_configuration``, and from there on code asks its type, never its text.

In words (what ``spec`` gives and ``parse_configuration`` reads back):

- ``STRATEGY [NAME=VALUE ...]``: ``sequential workers=4 chunk=16MiB`` (``options.parse_spec``).
- ``cmd: [readahead=KIB] [page_cache=cold|warm] [compile_cache=fresh|kept] [NAME=VALUE ...]
  COMMAND ARGS...``: a command (``Command``).
- ``engine: NAME [KNOB=VALUE ...] [readahead=KIB]``: one of ``loaders.registry.ENGINES``, run
  by the one child harness (``loaders/child.py``) as its users run it, with knobs they know
  (``disable_mmap=true``, ``load_mode=none``, ``RUNAI_STREAMER_CONCURRENCY=16``).

A command's words are split as a shell splits them (quotes, backslashes), never run through a
shell: ``Command`` is the one grammar for ``cmd:``, ``modelmon watch -- ...`` and the app's
command field. ``{path}`` in any word, an environment word's value included, stands for the
model's path. Leading ``NAME=VALUE`` words set the command's environment, as in a shell;
``readahead=KIB`` is modelmon's: the device's readahead for the run (set and put back as for
modelmon's own runs). So are ``page_cache`` (the model's page cache as the run starts, verified:
a server's, timed to ready, may start warm, as on a pre-warmed node) and ``compile_cache``
(the engine's compile caches, ``runs.compile_cache``: a new empty folder each run, or one kept
from run to run of the experiment, as a persisted volume keeps it).
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from modelmon.core.errors import OptionsError
from modelmon.core.loaders.registry import CHILD, get_engine
from modelmon.core.options import LoadOptions, format_spec, parse_readahead, parse_spec

CMD, ENGINE = "cmd:", "engine:"
PAGE_CACHES = ("cold", "warm")
COMPILE_CACHES = ("fresh", "kept")
PATH_FIELD = "{path}"
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*", re.DOTALL)
_PLAIN = re.compile(r"[\w@%+=:,./{}-]+")  # a word shown as it is (else quoted as a shell would)


def _shown(word: str) -> str:
    return word if _PLAIN.fullmatch(word) else shlex.quote(word)


@dataclass(frozen=True, slots=True)
class StrategyConfig:
    """One of modelmon's strategies and its options (an A/B's side, what a config file
    applies). ``spec`` is it in words: ``parse_configuration`` reads it back."""

    strategy: str
    options: LoadOptions = field(default_factory=LoadOptions)

    @property
    def spec(self) -> str:
        return format_spec(self.strategy, self.options)

    def with_options(self, **changes: object) -> StrategyConfig:
        return replace(self, options=self.options.with_(**changes))


@dataclass(frozen=True, slots=True)
class Command:
    """A command as words: its environment words and its argv, ``{path}`` not yet replaced."""

    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str, what: str = "the command") -> Command:
        """A command line as typed: split as a shell splits words, never run by one."""
        try:
            words = shlex.split(text)
        except ValueError as exc:  # an unclosed quote, a trailing backslash
            raise OptionsError(
                f"{what} does not split into words: {exc} (quote as in a shell)"
            ) from None
        return cls.from_words(words, what)

    @classmethod
    def from_words(
        cls,
        words: Sequence[str],
        what: str = "the command",
        example: str = f"python load.py {PATH_FIELD}",
    ) -> Command:
        """Words already split (``watch -- ...``): leading ``NAME=VALUE`` words are its
        environment, as in a shell."""
        rest = list(words)
        env = []
        while rest and _ASSIGNMENT.fullmatch(rest[0]):
            name, _, value = rest.pop(0).partition("=")
            env.append((name, value))
        if not rest:
            raise OptionsError(f"{what} needs a command, e.g. {example}")
        for word in [*rest, *(value for _, value in env)]:
            if "\x00" in word:
                raise OptionsError(f"{what}: a word holds a NUL byte, which no program can take")
        return cls(tuple(rest), tuple(env))

    @property
    def names_path(self) -> bool:
        return any(PATH_FIELD in word for word in (*self.argv, *(v for _, v in self.env)))

    def argv_for(self, path: str | None) -> list[str]:
        """The argv with ``{path}`` replaced (``path`` None: no model to stand for)."""
        return [self._filled(word, path) for word in self.argv]

    def env_for(self, path: str | None) -> dict[str, str]:
        return {name: self._filled(value, path) for name, value in self.env}

    @staticmethod
    def _filled(word: str, path: str | None) -> str:
        if PATH_FIELD not in word:
            return word
        if path is None:
            raise OptionsError(f"{PATH_FIELD} stands for the model's path: name a model first")
        return word.replace(PATH_FIELD, path)

    @property
    def text(self) -> str:
        """The command as a shell would read it back (``Command.parse`` does)."""
        env = [f"{name}={_shown(value)}" for name, value in self.env]
        return " ".join([*env, *(_shown(word) for word in self.argv)])


@dataclass(frozen=True, slots=True)
class ProgramConfig:
    """Another program as a configuration: a command (``kind`` "cmd") or a loader of the
    registry run by the child harness (``kind`` "engine"), each run watched and counted by
    the bytes that arrive."""

    kind: Literal["cmd", "engine"]
    command_words: Command | None = None  # a command's words
    engine: str | None = None  # a loader's registry name
    knobs: tuple[tuple[str, str], ...] = ()  # a loader's knobs as given, in the order given
    readahead: int | None = None  # KiB of device readahead for the run; None: as it is
    # The page cache the run starts from ("cold", "warm"); None: the experiment's.
    page_cache: Literal["cold", "warm"] | None = None
    # The engine's compile caches: "fresh" (empty each run), "kept" (from run to run of the
    # experiment); None: wherever its environment puts them.
    compile_cache: Literal["fresh", "kept"] | None = None

    @property
    def spec(self) -> str:
        """The configuration in words; ``parse_configuration`` reads it back."""
        ahead = [] if self.readahead is None else [f"readahead={self.readahead}"]
        if self.page_cache is not None:
            ahead.append(f"page_cache={self.page_cache}")
        if self.compile_cache is not None:
            ahead.append(f"compile_cache={self.compile_cache}")
        if self.kind == "engine":
            knobs = [f"{name}={_shown(value)}" for name, value in self.knobs]
            return " ".join([ENGINE, str(self.engine), *knobs, *ahead])
        assert self.command_words is not None
        return " ".join([CMD, *ahead, self.command_words.text])

    @property
    def body(self) -> str:
        """The configuration's words after its head (``runai ranks=4`` of ``engine: runai
        ranks=4``): how a table that says the kind elsewhere names it."""
        return self.spec.partition(":")[2].strip()

    @property
    def settings(self) -> dict[str, str]:
        """A loader's every knob: those given, the rest its defaults ({} for a command)."""
        if self.engine is None:
            return {}
        return get_engine(self.engine).settings(dict(self.knobs))

    @property
    def code(self) -> str:
        """What runs, its settings left out: the configurations of one loader, or one
        command's, run the same code (``runs.warm.warm_each`` reads it in once for all)."""
        if self.kind == "engine":
            return f"{ENGINE} {self.engine}"
        assert self.command_words is not None
        # A kept compile cache is filled by its own uncounted run, as a first start fills it.
        kept = ["compile_cache=kept"] if self.compile_cache == "kept" else []
        return " ".join([CMD, *kept, *(_shown(word) for word in self.command_words.argv)])

    def with_readahead(self, kib: int | None) -> ProgramConfig:
        return replace(self, readahead=kib)

    def with_knobs(self, knobs: Mapping[str, str]) -> ProgramConfig:
        """A loader's configuration with these knob values (the defaults left out)."""
        loader = get_engine(str(self.engine))
        chosen = loader.settings(knobs)
        defaults = loader.defaults()
        kept = tuple((k, v) for k, v in chosen.items() if v != defaults[k])
        return replace(self, knobs=kept)

    def command(self, path: str) -> list[str]:
        """The command line for the model at ``path``."""
        if self.kind == "engine":
            loader = get_engine(str(self.engine))
            arguments = loader.arguments(self.settings)
            given = dict(self.knobs)
            words = [f"{name}={value}" for name, value in arguments.items() if name in given]
            return [sys.executable, str(CHILD), loader.name, path, *words]
        assert self.command_words is not None
        return self.command_words.argv_for(path)

    def environment(self, path: str | None = None) -> dict[str, str]:
        """The variables the run sets on top of modelmon's environment."""
        if self.kind == "engine":
            return get_engine(str(self.engine)).environment(self.settings)
        assert self.command_words is not None
        return self.command_words.env_for(path)


Configuration = StrategyConfig | ProgramConfig


def program_kind(text: str) -> Literal["cmd", "engine"] | None:
    """Which kind of program a configuration's text names by its head (``cmd:``,
    ``engine:``), None for a strategy: what an editor asks of a line that may not parse yet."""
    head, colon, _ = text.strip().partition(":")
    kind = head.strip().lower()
    if colon and kind == "cmd":
        return "cmd"
    if colon and kind == "engine":
        return "engine"
    return None


def program_words(text: str) -> str:
    """A program's words after its head (``cmd:``, ``engine:``), as typed, whether or not
    they parse yet; any other text as it is."""
    if program_kind(text) is None:
        return text
    return text.strip().partition(":")[2].lstrip()


def command_spec(text: str) -> str:
    """The configuration of a command typed as ``COMMAND ARGS...`` (``cmd:`` optional; the
    spaces around it are the typing's, not the command's)."""
    text = text.strip()
    return text if program_kind(text) == "cmd" else f"{CMD} {text}"


def parse_configuration(text: str) -> Configuration:
    """A configuration in words (``spec``), of either kind; one-line OptionsError otherwise."""
    stripped = text.strip()
    kind = program_kind(stripped)
    rest = stripped.partition(":")[2]
    if kind == "cmd":
        return _parse_command(rest)
    if kind == "engine":
        return parse_engine(rest)
    strategy, options = parse_spec(stripped)
    return StrategyConfig(strategy, options)


def parse_program(text: str) -> ProgramConfig:
    """``cmd: ...`` or ``engine: ...`` → the program; one-line OptionsError otherwise (a
    strategy's spec included: where a program is asked for)."""
    config = parse_configuration(text) if text.strip() else None
    if not isinstance(config, ProgramConfig):
        raise OptionsError(f"not a program configuration: {text!r} (cmd: COMMAND, or engine: NAME)")
    return config


def _parse_command(rest: str) -> ProgramConfig:
    words = Command.parse(rest, CMD)
    readahead = None
    page: Literal["cold", "warm"] | None = None
    compiled: Literal["fresh", "kept"] | None = None
    env = []
    for name, value in words.env:
        if name == "readahead":
            readahead = parse_readahead(value)
        elif name == "page_cache":
            page = _one_of(name, value, PAGE_CACHES)  # type: ignore[assignment]
        elif name == "compile_cache":
            compiled = _one_of(name, value, COMPILE_CACHES)  # type: ignore[assignment]
        else:
            env.append((name, value))
    return ProgramConfig(
        "cmd",
        Command(words.argv, tuple(env)),
        readahead=readahead,
        page_cache=page,
        compile_cache=compiled,
    )


def _one_of(name: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise OptionsError(f"{CMD} {name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def parse_engine(text: str) -> ProgramConfig:
    """``NAME [KNOB=VALUE ...] [readahead=KIB]`` (``engine:`` optional): a loader's run."""
    body = text.strip()
    if body.lower().startswith(ENGINE):
        body = body[len(ENGINE) :]
    try:
        words = shlex.split(body)
    except ValueError as exc:
        raise OptionsError(f"{ENGINE} {exc} (quote as in a shell)") from None
    if not words:
        raise OptionsError(f"{ENGINE} needs a loader's name, e.g. engine: transformers")
    loader = get_engine(words[0])
    knobs: dict[str, str] = {}
    readahead = None
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if not sep:
            raise OptionsError(f"{ENGINE} {loader.name}: {word!r} must look like knob=value")
        if name == "readahead":
            readahead = parse_readahead(value)
        else:
            knobs[name] = loader.knob(name).check(value)
    return ProgramConfig(
        "engine", engine=loader.name, knobs=tuple(knobs.items()), readahead=readahead
    )


def named_path(given: str, model_path: str) -> str:
    """What ``{path}`` stands for: the path as the user named it (made absolute) where it is
    one here, so that a folder stays a folder; else the model's (a reference such as
    ``hf:ORG/NAME``, resolved)."""
    return os.path.abspath(given) if os.path.exists(given) else model_path
