"""Configurations A and B: the strategy and options each side loads with. Qt-free.

The panels edit them (each edit is an intent: ``set``), the settings restore them, jobs read
them. What a run really gets is ``effective``: options the strategy does not use keep their
defaults, and a model larger than RAM runs in discard mode whatever the panel says.

A model in object storage is read by other strategies than a file (ranged GETs), so there are
two pairs: one for files, one for objects, and the open model's kind says which is in use
(``set_limits``); each keeps what the user made of it while a model of the other kind is open.
"""

from __future__ import annotations

from modelmon.core.options import LoadOptions, format_spec
from modelmon.gui.state.events import Event
from modelmon.gui.state.load_config import effective_options, reads_objects, strategy_names
from modelmon.gui.state.programs import PROGRAM_OPTIONS, engine_choices, engine_settings, is_program

# The first comparison worth making, four readers each, from a verified cold cache: modelmon's
# default (planned sequential reads, four threads, each its own descriptor) against the
# anti-pattern of the seed story (four processes mapping one shared descriptor).
DEFAULT_CONFIGS = {
    "A": ("sequential", LoadOptions(cache="cold")),
    "B": ("mmap-shared-fd", LoadOptions(workers=4, threads=1, cache="cold")),
}
# For a bucket: modelmon's default (ranged GETs over four connections, as default_strategy
# picks) against one connection, as a plain client reads an object. No cache state is asked
# for: nothing of a bucket is cached on this machine, whatever is asked.
DEFAULT_OBJECT_CONFIGS = {
    "A": ("ranged", LoadOptions()),
    "B": ("ranged", LoadOptions(threads=1)),
}
LABELS = tuple(DEFAULT_CONFIGS)


class Configs:
    def __init__(self) -> None:
        self.pairs: dict[bool, dict[str, tuple[str, LoadOptions]]] = {
            False: dict(DEFAULT_CONFIGS),
            True: dict(DEFAULT_OBJECT_CONFIGS),
        }
        self.objects = False  # the open model is in object storage
        self.discard_forced = False  # the open model does not fit in RAM
        self.readahead_unavailable: str | None = None  # why the model's device refuses it
        self.model_format: str | None = None  # the open model's ("safetensors", "gguf")
        # Why a side's engine was put back to the default when a model it cannot load opened.
        self.replaced: dict[str, str] = {}
        self.changed = Event()  # label
        self.limits_changed = Event()  # (): discard_forced, readahead_unavailable or objects

    @property
    def configs(self) -> dict[str, tuple[str, LoadOptions]]:
        """A's and B's for the open model's kind (files or objects)."""
        return self.pairs[self.objects]

    def strategies(self) -> tuple[str, ...]:
        """The strategies that can load the open model (files' or objects')."""
        return strategy_names(self.objects)

    def fits(self, strategy: str, objects: bool) -> bool:
        return is_program(strategy) or reads_objects(strategy) == objects

    def set(
        self, label: str, strategy: str, options: LoadOptions, objects: bool | None = None
    ) -> None:
        """Configuration ``label`` of the open model's kind (or of ``objects``' kind); a
        strategy of the other kind is ignored (it could not load such a model)."""
        kind = self.objects if objects is None else objects
        if not self.fits(strategy, kind):
            return
        if self.pairs[kind].get(label) != (strategy, options):
            self.pairs[kind][label] = (strategy, options)
            if kind == self.objects:
                self.changed.emit(label)

    def strategy(self, label: str) -> str:
        return self.configs[label][0]

    def effective(self, label: str) -> LoadOptions:
        strategy, options = self.configs[label]
        if is_program(strategy):  # a program's run: from a verified cold cache, no knobs
            return PROGRAM_OPTIONS
        if self.discard_forced:
            options = options.with_(discard=True)
        return effective_options(strategy, options, self.discard_forced)

    def spec(self, label: str) -> str:
        if is_program(self.strategy(label)):
            return self.strategy(label)
        return format_spec(self.strategy(label), self.effective(label))

    def set_limits(
        self,
        discard_forced: bool,
        readahead_unavailable: str | None,
        objects: bool = False,
        model_format: str | None = None,
    ) -> None:
        """The open model's limits, its kind and format: a change of kind shows the other pair
        (``changed``) before the panels learn the strategies they offer; an engine that cannot
        load the model's format is put back to the side's default (``replaced`` says why)."""
        kind_changed = objects != self.objects
        self.objects = objects
        self.discard_forced = discard_forced
        self.readahead_unavailable = readahead_unavailable
        self.model_format = model_format
        self.replaced = {}
        for label in LABELS:
            why = self.why_not(self.strategy(label))
            if why is not None:
                defaults = DEFAULT_OBJECT_CONFIGS if objects else DEFAULT_CONFIGS
                self.pairs[objects][label] = defaults[label]
                self.replaced[label] = why
                if not kind_changed:
                    self.changed.emit(label)
        if kind_changed:
            for label in LABELS:
                self.changed.emit(label)
        self.limits_changed.emit()

    def why_not(self, strategy: str) -> str | None:
        """Why an engine cannot load the open model (its format), or None."""
        found = engine_settings(strategy) if is_program(strategy) else None
        if found is None or self.model_format is None:
            return None
        engine = next((e for e in engine_choices(self.model_format) if e.name == found[0]), None)
        return None if engine is None else engine.why_not
