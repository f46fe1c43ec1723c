"""Configurations A and B: the strategy and options each side loads with. Qt-free.

The panels edit them (each edit is an intent: ``set``), the settings restore them, jobs read
them. What a run really gets is ``effective``: options the strategy does not use keep their
defaults, and a model larger than RAM runs in discard mode whatever the panel says.
"""

from __future__ import annotations

from modelmon.core.options import LoadOptions, format_spec
from modelmon.gui.state.events import Event
from modelmon.gui.state.load_config import effective_options
from modelmon.gui.state.programs import PROGRAM_OPTIONS, is_program

# The first comparison worth making, four readers each, from a verified cold cache: modelmon's
# default (planned sequential reads, four threads, each its own descriptor) against the
# anti-pattern of the seed story (four processes mapping one shared descriptor).
DEFAULT_CONFIGS = {
    "A": ("sequential", LoadOptions(cache="cold")),
    "B": ("mmap-shared-fd", LoadOptions(workers=4, threads=1, cache="cold")),
}
LABELS = tuple(DEFAULT_CONFIGS)


class Configs:
    def __init__(self) -> None:
        self.configs: dict[str, tuple[str, LoadOptions]] = dict(DEFAULT_CONFIGS)
        self.discard_forced = False  # the open model does not fit in RAM
        self.readahead_unavailable: str | None = None  # why the model's device refuses it
        self.changed = Event()  # label
        self.limits_changed = Event()  # (): discard_forced or readahead_unavailable

    def set(self, label: str, strategy: str, options: LoadOptions) -> None:
        if self.configs.get(label) != (strategy, options):
            self.configs[label] = (strategy, options)
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

    def set_limits(self, discard_forced: bool, readahead_unavailable: str | None) -> None:
        self.discard_forced = discard_forced
        self.readahead_unavailable = readahead_unavailable
        self.limits_changed.emit()
