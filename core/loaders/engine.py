"""What a loader of the registry is: an ``Engine`` (what it loads, what must be installed, its
knobs, the line a user pastes to apply a setting) and its ``Knob`` s. The entries themselves
are ``registry.ENGINES``."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from modelmon.core.errors import OptionsError

Settings = Mapping[str, str]  # knob name -> value, every knob of the engine present
UNSET = "default"  # an environment knob's value that leaves the variable unset


@dataclass(frozen=True, slots=True)
class Knob:
    name: str  # as the engine's users write it: "disable_mmap", "HF_DEACTIVATE_ASYNC_LOAD"
    values: tuple[str, ...]  # what it takes, the engine's default first
    what: str  # what a value other than the default changes, in a few words
    environment: bool = False  # a variable of the engine's environment, not an argument
    # False: a setting that says how the user runs the engine (safetensors' framework),
    # kept as given; True: recommend tries its other values.
    tried: bool = True
    # Values with which the engine reads with O_DIRECT: its bytes never enter the page
    # cache, so its run is timed by its reads from storage (``runs.direct``).
    direct: tuple[str, ...] = ()
    # It takes any whole number from 1 to this as well as ``values`` (a count, a byte size):
    # ``values`` are then the ones recommend tries. 0: only ``values``.
    up_to: int = 0

    def check(self, value: str) -> str:
        if value in self.values:
            return value
        if self.up_to and value.isascii() and value.isdigit() and 1 <= int(value) <= self.up_to:
            return str(int(value))
        also = f", or a whole number from 1 to {self.up_to}" if self.up_to else ""
        raise OptionsError(
            f"{self.name} must be one of {', '.join(self.values)}{also}, not {value!r}"
        )


@dataclass(frozen=True)
class Engine:
    name: str  # as a spec names it: "engine: transformers"
    label: str  # as its users say it
    formats: tuple[str, ...]  # the model formats it loads ("safetensors", "gguf")
    modules: tuple[str, ...]  # what must be importable for it to run here
    extra: str  # pip install 'modelmon[EXTRA]' installs it ("": modelmon's own dependencies)
    knobs: tuple[Knob, ...]
    snippet: Callable[[Settings], str]  # the line that applies these settings
    # The watch's loader keys (``watching.loaders``) that mean a program uses this engine.
    detected_as: tuple[str, ...] = ()
    # Other tools that load through the same code, each with its line for these settings
    # (llama-server runs the same libllama loader as llama-cpp-python).
    also: tuple[tuple[str, Callable[[Settings], str]], ...] = ()
    # Why it cannot run on this machine (None: it runs wherever its modules are installed),
    # the engine whose runs stand for it, and its line for the stand-in's settings.
    not_here: str | None = None
    stand_in: str | None = None
    # The files it needs beside the weights (transformers: config.json), looked for in the
    # model's folder and the one above it (a pipeline's component).
    needs_beside: tuple[str, ...] = ()
    # What it is, in a line, where a search names it among other loaders.
    description: str = ""
    # The settings recommend races it with, given the search's parallelism (None: not one of
    # the search's candidates). Each runs where the engine runs here and loads the model.
    searched: Callable[[int], tuple[dict[str, str], ...]] | None = None
    # What it needs to stream a model from a bucket itself (s3://); () : it reads files only.
    bucket_modules: tuple[str, ...] = ()

    def refuses(self, path: str) -> str | None:
        """Why it cannot load the model at ``path`` (a file it needs is missing), or None."""
        if not self.needs_beside:
            return None
        folder = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        for place in (folder, os.path.dirname(folder)):
            if any(os.path.exists(os.path.join(place, name)) for name in self.needs_beside):
                return None
        return (
            f"{self.label} loads a folder holding {' or '.join(self.needs_beside)}; "
            f"{folder} has none"
        )

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        known = ", ".join(k.name for k in self.knobs) or "none"
        raise OptionsError(f"engine {self.name} has no knob {name!r} (its knobs: {known})")

    def defaults(self) -> dict[str, str]:
        return {knob.name: knob.values[0] for knob in self.knobs}

    def settings(self, given: Mapping[str, str]) -> dict[str, str]:
        """Every knob's value: the given ones checked, the rest the engine's defaults."""
        chosen = self.defaults()
        for name, value in given.items():
            chosen[name] = self.knob(name).check(value)
        return chosen

    def variants(self, given: Mapping[str, str]) -> list[dict[str, str]]:
        """One change at a time from ``given``: each other value of each tried knob."""
        base = self.settings(given)
        return [
            {**base, knob.name: value}
            for knob in self.knobs
            if knob.tried
            for value in knob.values
            if value != base[knob.name]
        ]

    def environment(self, settings: Settings) -> dict[str, str]:
        """The environment variables these settings set (an unset default sets none)."""
        return {
            knob.name: settings[knob.name]
            for knob in self.knobs
            if knob.environment and settings.get(knob.name, UNSET) != UNSET
        }

    def arguments(self, settings: Settings) -> dict[str, str]:
        return {k.name: settings[k.name] for k in self.knobs if not k.environment}

    def reads_direct(self, settings: Settings) -> bool:
        """Whether these settings make the engine read with O_DIRECT."""
        return any(settings.get(k.name) in k.direct for k in self.knobs)

    def cannot_load(self, model_format: str, path: str) -> str | None:
        """Why it cannot load the model (of ``model_format``, at ``path``) here, or None:
        asked before anything runs."""
        if model_format not in self.formats:
            loads = " and ".join(self.formats)
            return f"{self.label} loads {loads} models; this one is {model_format}"
        return self.unavailable() or self.refuses(path)

    def unavailable(self) -> str | None:
        """None when it can run here; otherwise why not, in one line naming the extra."""
        if self.not_here is not None:
            return self.not_here
        missing = [m for m in self.modules if _missing(m)]
        if not missing:
            return None
        how = f"'modelmon[{self.extra}]'" if self.extra else " ".join(missing)
        found = ", ".join(missing)
        return f"{self.label} is not installed here ({found} not found): pip install {how}"

    def streams_buckets(self) -> str | None:
        """None when it can stream a model from a bucket here; otherwise why not."""
        if not self.bucket_modules:
            return f"{self.label} reads files, not objects"
        missing = [m for m in self.bucket_modules if _missing(m)]
        if missing:
            return (
                f"{self.label} cannot stream a bucket here ({', '.join(missing)} not found): "
                f"pip install {' '.join(m.replace('_', '-') for m in missing)}"
            )
        return self.unavailable()


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True
