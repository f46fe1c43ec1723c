"""Another program as configuration A or B, and as the loader a recommendation measures: the
user's command (``cmd: COMMAND ARGS...``, ``{path}`` the model's path) or an engine with its
knobs (``engine: NAME knob=value``), as the command line's ``bench --a/--b`` and ``recommend
--loader/--engine`` take them. Qt-free.

A configuration's strategy is then the program's spec, and its options are no strategy's:
a program's run is timed by the bytes that arrive, so it always starts from a verified cold
cache, and the device's readahead travels in the spec.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from modelmon.core import (
    ENGINES,
    Config,
    LoadOptions,
    Model,
    ModelmonError,
    ProgramConfig,
    as_config,
    is_program_spec,
    loader_config,
    one_line,
    parse_program,
    program_of,
)

COMMAND_CHOICE = "Your command…"
COMMAND_PREFIX = "cmd: "
ENGINE_PREFIX = "engine: "
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
    return is_program_spec(strategy)


def command_spec(text: str) -> str:
    """The configuration of a command typed as ``COMMAND ARGS...`` (``cmd:`` optional)."""
    return text if text.lstrip().lower().startswith("cmd:") else COMMAND_PREFIX + text


def command_text(spec: str) -> str:
    """The command as the panel's line shows it: the spec without ``cmd:``."""
    if spec.startswith(COMMAND_PREFIX):
        return spec[len(COMMAND_PREFIX) :]
    head, _, rest = spec.partition(":")
    return rest.lstrip() if head.strip().lower() == "cmd" else spec


def engine_spec(name: str, knobs: dict[str, str]) -> str:
    """``engine: NAME knob=value …``, the knobs at the engine's defaults left out."""
    program = parse_program(ENGINE_PREFIX + name).with_knobs(knobs)
    return program.spec


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
    if not is_program_spec(strategy):
        return None
    return program_check(strategy)[1]


def side_config(strategy: str, options: LoadOptions) -> Config:
    """An A/B side: a strategy with its options, or a program with none of them (the CLI's
    ``--a 'cmd: ...'`` side, ``as_config``)."""
    program = program_of(strategy)
    return as_config(program) if program is not None else Config(strategy, options)


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
