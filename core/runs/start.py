"""The one run protocol, and the one place a configuration becomes a run.

Whatever is measured is a ``Run``: ``run()`` blocks and returns its outcome, ``cancel()``
from any thread ends it (so does its ``cancel`` event, polled, and a time limit), its
``start_gate`` hears the measured cache state before it goes (``loading.envelope``), and
while it runs ``reads``, ``sampler`` and ``t0_ns`` are what a live view plots, ``loaded_bytes``
and ``load_started_ns`` what a search judges its pace by. Its outcome is a ``RunOutcome``,
whose variants are types: a ``SessionResult`` (modelmon's strategy, with its series) or a
``ProgramResult`` (another program, with what its watch saw); ``.result`` is the run as a
load either way, what an A/B, a search or a fleet round counts.
"""

from __future__ import annotations

import threading
from typing import Protocol

from modelmon.core.configuration import Configuration, ProgramConfig, StrategyConfig
from modelmon.core.errors import OptionsError
from modelmon.core.loading.envelope import StartGate
from modelmon.core.loading.reads import ReadLog
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode
from modelmon.core.runs.compile_cache import CompileCaches
from modelmon.core.runs.program import INTERVAL_S, ProgramResult, ProgramRun
from modelmon.core.runs.session import Session, SessionResult
from modelmon.core.watching.ready import ReadyCondition
from modelmon.core.watching.watch import MAP_INTERVAL_S

RunOutcome = SessionResult | ProgramResult


class Run(Protocol):
    """What every measured run offers (``Session`` and ``ProgramRun`` do)."""

    @property
    def reads(self) -> ReadLog: ...

    @property
    def sampler(self) -> Sampler | None: ...

    @property
    def t0_ns(self) -> int: ...

    @property
    def load_started_ns(self) -> int: ...

    @property
    def loaded_bytes(self) -> int: ...

    def cancel(self) -> None: ...

    def run(self) -> RunOutcome: ...


def run_for(
    model: Model,
    config: Configuration,
    cache: CacheMode | None = None,
    *,
    cancel: threading.Event | None = None,
    start_gate: StartGate | None = None,
    time_limit_s: float | None = None,
    interval_s: float = INTERVAL_S,
    map_interval_s: float = MAP_INTERVAL_S,
    monitor: bool = True,
    path: str | None = None,
    memory_limit: int | None = None,
    ready: ReadyCondition | None = None,
    ready_timeout_s: float | None = None,
    compile_caches: CompileCaches | None = None,
) -> Session | ProgramRun:
    """The run ``config`` calls for on ``model``, from the cache state ``cache`` (None: a
    strategy's own option; a program's run is always timed from a cold cache, or a kept one
    where its code is warmed). ``monitor``: sample its metrics (a program's watch always
    does), residency maps every ``map_interval_s``. ``path``: what a program's ``{path}``
    stands for (default: the model's path). ``memory_limit``: the run happens in a memory
    cgroup of that size (``system.memory_cgroup``), where one can be made. ``ready`` and
    ``ready_timeout_s``: when a program is ready, a server (``runs.program``); a program's
    own ``page_cache`` is the state it starts from, and ``compile_caches`` the experiment's
    folders for its ``compile_cache`` (``runs.compile_cache``)."""
    if isinstance(config, StrategyConfig):
        options = config.options if cache is None else config.options.with_(cache=cache)
        return Session(
            model,
            config.strategy,
            options,
            interval_s=interval_s,
            map_interval_s=map_interval_s,
            monitor=monitor,
            cancel=cancel,
            memory_limit=memory_limit,
            start_gate=start_gate,
            time_limit_s=time_limit_s,
        )
    if isinstance(config, ProgramConfig):
        return ProgramRun(
            model,
            config,
            config.page_cache or ("cold" if cache is None else cache),
            cancel=cancel,
            time_limit_s=time_limit_s,
            interval_s=interval_s,
            start_gate=start_gate,
            path=path,
            map_interval_s=map_interval_s,
            memory_limit=memory_limit,
            ready=ready,
            ready_timeout_s=ready_timeout_s,
            compile_caches=compile_caches,
        )
    raise OptionsError(f"not a configuration: {config!r}")
