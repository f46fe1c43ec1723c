"""Another program as configuration A or B, and as the loader a recommendation measures: the
user's command (``cmd: COMMAND ARGS...``, ``{path}`` the model's path) or an engine with its
knobs (``engine: NAME knob=value``), as the command line's ``bench --a/--b`` and ``recommend
--loader/--engine`` take them. Qt-free.

A side's text is then the program's spec, which may not parse while it is being typed: it is
parsed into a configuration (``configuration``) only when a run needs it. A program's run is
timed by the bytes that arrive, so it always starts from a verified cold cache, and the
device's readahead travels in the spec.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from modelmon.core import ENGINES, Command, Configuration, Model, ProgramConfig, StrategyConfig
from modelmon.core.configuration import (
    ENGINE,
    command_spec,
    parse_engine,
    parse_program,
    program_kind,
    program_words,
)
from modelmon.core.errors import ModelmonError, one_line
from modelmon.core.options import LoadOptions
from modelmon.core.output import loader_config

COMMAND_CHOICE = "Your command…"
PROGRAM_OPTIONS = LoadOptions(cache="cold")  # what a program side's run starts from
COMMAND_HINT = "python load.py {path}"
TIPS = {
    "command": "Your loader as you run it: COMMAND ARGS..., {path} stands for the model's path. "
    "Words split as a shell splits them (quotes, backslashes), never run through a shell. "
    "Each run starts from a verified cold cache and is watched: its MB/s is the model's bytes "
    "that arrived.",
    "engine": "The engine as its users run it, with the knob that changes how it reads the "
    "weights; each run starts from a verified cold cache and is watched.",
}


@dataclass(frozen=True, slots=True)
class EngineChoice:
    name: str  # as a spec names it
    label: str  # as its users say it
    why_not: str | None  # why it cannot run here (greyed out), or None
    knobs: tuple[tuple[str, tuple[str, ...], str], ...]  # (name, values default first, what)

    @property
    def title(self) -> str:
        """How a list of configurations names it: as a spec starts."""
        return f"{ENGINE} {self.name}"


@dataclass(frozen=True, slots=True)
class SideChoice:
    """What a row of a list of configurations chooses: a strategy (by name), the user's
    command, an engine (by name), or nothing (a separator)."""

    kind: Literal["strategy", "command", "engine", "separator"]
    name: str | None = None


def engine_choices(model_format: str | None = None) -> list[EngineChoice]:
    """Every engine modelmon knows, with why it cannot load here when it cannot: not
    installed (naming the extra), a GPU engine, or a format it does not load."""
    choices = []
    for engine in ENGINES.values():
        why = engine.unavailable()
        if why is None and model_format is not None and model_format not in engine.formats:
            why = f"{engine.label} loads {' and '.join(engine.formats)} models, not {model_format}"
        knobs = tuple((k.name, k.values, k.what) for k in engine.knobs)
        choices.append(EngineChoice(engine.name, engine.label, why, knobs))
    return choices


def is_program(strategy: str) -> bool:
    return program_kind(strategy) is not None


def command_text(spec: str) -> str:
    """The command as the panel's line shows it: the spec without ``cmd:``."""
    return program_words(spec) if program_kind(spec) == "cmd" else spec


def command_line_spec(text: str) -> str:
    """The spec of the command the panel's line holds (``cmd: ...``)."""
    return command_spec(text)


def engine_spec(name: str, knobs: dict[str, str]) -> str:
    """``engine: NAME knob=value …``, the knobs at the engine's defaults left out."""
    return parse_engine(name).with_knobs(knobs).spec


def engine_settings(spec: str) -> tuple[str, dict[str, str]] | None:
    """(engine, every knob's value) of an engine spec; None for anything else."""
    program = program_check(spec)[0]
    if program is None or program.engine is None:
        return None
    return program.engine, program.settings


def program_check(spec: str) -> tuple[ProgramConfig | None, str | None]:
    """(the program, None) when ``spec`` reads as one, else (None, why not in one line)."""
    try:
        return parse_program(spec), None
    except ModelmonError as exc:
        return None, one_line(exc)


def spec_error(strategy: str) -> str | None:
    """Why a configuration cannot run as given (a command that does not parse), or None."""
    if not is_program(strategy):
        return None
    return program_check(strategy)[1]


def side_config(strategy: str, options: LoadOptions) -> Configuration:
    """A side's configuration, parsed from the panel's text where it is a program (a
    one-line OptionsError where it does not parse: ``spec_error`` says it first)."""
    if is_program(strategy):
        return parse_program(strategy)
    return StrategyConfig(strategy, options)


def command_words(text: str) -> Command:
    """A command line as typed into the app (``Command``: the one grammar of ``cmd:``,
    ``watch -- ...`` and the app's command field)."""
    return Command.parse(text)


def model_path(model: Model) -> str:
    """What ``{path}`` stands for: the path the model was opened by when it is one (a file,
    an index, a folder), else the folder of its files (a hub reference)."""
    if os.path.exists(model.path):
        return model.path
    if len(model.files) == 1:
        return model.files[0].path
    return os.path.commonpath([f.path for f in model.files])


def loader_error(loader: str, model: Model) -> str | None:
    """Why ``loader`` cannot be measured on ``model`` (it does not parse, its engine is not
    installed or loads another format), or None: checked before any measuring."""
    try:
        loader_config(loader, None, model, model_path(model))
    except ModelmonError as exc:
        return one_line(exc)
    return None
