"""An A/B whose sides may be programs: each run of a ``cmd:`` or ``engine:`` side is a watched
``ProgramRun``, each run of a strategy a ``LoadRun``, alternating, from the same verified
cache state, and the pairs and the verdict count them alike (``measuring.ab``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from modelmon.core.engines.run import ProgramResult, ProgramRun, warm_each
from modelmon.core.engines.spec import program_of
from modelmon.core.errors import OptionsError
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.runner import LoadRun
from modelmon.core.measuring import ab
from modelmon.core.model.records import Model
from modelmon.core.options import Config, LoadOptions

# Hears each program run of an A/B as it ends: (side, 0-based pair, what it did).
OnProgram = Callable[[str, int, ProgramResult], None]


def check_cache(configs: tuple[Config, ...], cache: str) -> None:
    """A program's load is timed by the bytes that arrive: its sides need a cold cache."""
    programs = [c.strategy for c in configs if program_of(c.strategy) is not None]
    if programs and cache != "cold":
        raise OptionsError(
            f"{programs[0]}: a program's load is timed by the bytes that arrive from storage, "
            f"and a {cache} model brings none: use a cold cache"
        )


def run_configuration(
    model: Model,
    strategy: str,
    options: LoadOptions,
    *,
    cancel: threading.Event | None = None,
    on_program: Callable[[ProgramResult], None] | None = None,
    path: str | None = None,
) -> LoadResult:
    """One run of a configuration: a program watched, or a strategy in worker processes.
    ``path``: what a program's ``{path}`` stands for (default: the model's path)."""
    program = program_of(strategy)
    if program is None:
        return LoadRun(model, strategy, options, cancel=cancel).run()
    outcome = ProgramRun(model, program, options.cache, cancel=cancel, path=path).run()
    if on_program is not None:
        on_program(outcome)
    return outcome.load


def run_ab(
    model: Model,
    a: Config,
    b: Config,
    n: int = 3,
    cache: str = "cold",
    *,
    on_result: Callable[[str, int, LoadResult], None] | None = None,
    cancel: threading.Event | None = None,
    run_one: ab.RunOne | None = None,
    on_program: OnProgram | None = None,
    path: str | None = None,
    on_warm: Callable[[str], None] | None = None,
    on_rest: Callable[[float], None] | None = None,
) -> ab.ABResult:
    """``measuring.ab.run_ab`` where a side may be a program (``engines.spec.as_config``).

    ``run_one`` (the app's monitored runs) is told each run's strategy: a program's is its
    spec, which ``program_of`` reads back. Without it, programs run as ``ProgramRun`` s and
    ``on_program`` hears each one's watch; ``path`` is what their ``{path}`` stands for.
    Each program side runs once first, not counted (``run.warm_each``), and ``on_warm``
    hears its ``run.warming_line`` as it starts: both sides' counted runs find their code
    in the page cache.
    ``on_rest`` hears each rest of network storage between runs (``measuring.ab.run_ab``)."""
    check_cache((a, b), cache)
    warm_sides(model, (a, b), cancel=cancel, path=path, on_warm=on_warm)

    def load(side: str, pair: int, strategy: str, options: LoadOptions) -> LoadResult:
        def heard(outcome: ProgramResult) -> None:
            if on_program is not None:
                on_program(side, pair, outcome)

        return run_configuration(
            model, strategy, options, cancel=cancel, on_program=heard, path=path
        )

    return ab.run_ab(
        model,
        a,
        b,
        n,
        cache,
        on_result=on_result,
        cancel=cancel,
        run_one=run_one or load,
        on_rest=on_rest,
    )


def warm_sides(
    model: Model,
    configs: tuple[Config, ...],
    *,
    cancel: threading.Event | None = None,
    path: str | None = None,
    on_warm: Callable[[str], None] | None = None,
) -> None:
    """One uncounted run of each program among ``configs`` (``run.warm_each``); a stop asked
    meanwhile voids the A/B before its first run."""
    programs = [p for c in configs if (p := program_of(c.strategy)) is not None]
    warm_each(model, programs, cancel=cancel, path=path, on_warm=on_warm)
    if cancel is not None and cancel.is_set():
        raise ab.ABFailed("A", 0, None)
