"""An A/B's runs: A, B, A, B … ``n`` pairs, each run whatever its configuration calls for
(``runs.start.run_for``: modelmon's strategy in worker processes, or another program watched
and counted by the bytes that arrive), each from the same verified cache state; the pairs and
the verdict count them alike (``measuring.ab``)."""

from __future__ import annotations

import contextlib
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypedDict, TypeVar

from modelmon.core.configuration import Configuration, ProgramConfig
from modelmon.core.errors import OptionsError
from modelmon.core.limits import MAX_AB_PAIRS, check_whole
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ab import (
    BY_READY,
    ABFailed,
    ABResult,
    Paired,
    Verdict,
    compared_by,
    judge,
    pair_ratio,
    phase_shifts,
    summarize,
    timing_error,
)
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode
from modelmon.core.runs.compile_cache import CompileCaches, asks_compile_cache
from modelmon.core.runs.start import RunOutcome, run_for
from modelmon.core.runs.warm import warm_each
from modelmon.core.system.storage_rest import rest_storage
from modelmon.core.watching.ready import ReadyCondition

# Runs one load of an A/B: (side "A" | "B", 0-based pair, its configuration with the A/B's
# cache state, what ``run_for`` is to be given for it) → the run as a load.
RunOne = Callable[[str, int, Configuration, "RunSettings"], LoadResult]
R = TypeVar("R", bound=Paired)  # one run of an A/B: a load, or a ranks run
# Hears each run of an A/B as it ends, when the A/B runs them itself: (side, pair, outcome).
OnOutcome = Callable[[str, int, RunOutcome], None]


class Serving(TypedDict, total=False):
    """When a program of an A/B is ready (``runs.program.ProgramRun``): its condition, and
    how long it may take."""

    ready: ReadyCondition | None
    ready_timeout_s: float | None


class RunSettings(Serving, total=False):
    """What ``run_for`` is given for each run of an A/B: its cache state, when a program is
    ready, and the A/B's compile-cache folders (``runs.compile_cache``)."""

    cache: CacheMode
    compile_caches: CompileCaches | None


def check_cache(configs: tuple[Configuration, ...], cache: str, servers: set[str]) -> None:
    """A program's load is timed by the bytes that arrive: its sides need a cold cache (the
    A/B's, or its own ``page_cache``), but for a server (``servers``: the codes of the
    programs whose uncounted run was seen ready), timed to its ready from any cache."""
    for config in configs:
        if not isinstance(config, ProgramConfig) or config.code in servers:
            continue
        state = config.page_cache or cache
        if state != "cold":
            raise OptionsError(
                f"{config.spec}: a program's load is timed by the bytes that arrive from "
                f"storage, and a {state} model brings none: use a cold cache (a server, "
                "seen ready, is timed to its ready from any cache)"
            )


def with_cache(config: Configuration, cache: CacheMode) -> Configuration:
    """The configuration as an A/B runs it: a strategy from the A/B's cache state (a
    program's run is given it as it starts: ``check_cache`` says which may take it)."""
    if isinstance(config, ProgramConfig):
        return config
    return config.with_options(cache=cache)


def run_ab(
    model: Model,
    a: Configuration,
    b: Configuration,
    n: int = 3,
    cache: CacheMode = "cold",
    *,
    on_result: Callable[[str, int, LoadResult], None] | None = None,
    cancel: threading.Event | None = None,
    run_one: RunOne | None = None,
    on_outcome: OnOutcome | None = None,
    path: str | None = None,
    on_warm: Callable[[str], None] | None = None,
    on_rest: Callable[[float], None] | None = None,
    time_limit_s: float | None = None,
    memory_limit: int | None = None,
    serving: Serving | None = None,
) -> ABResult:
    """Run A, B, A, B … ``n`` pairs; each run starts from the same verified ``cache`` state.

    Each run is what ``run_for`` makes of its configuration, or what ``run_one`` does (the
    window runs them monitored, told which side and pair each is); ``on_outcome`` hears each
    of the runs made here, ``path`` is what a program's ``{path}`` stands for. Each program
    side runs once first, not counted (``runs.warm.warm_each``), and ``on_warm`` hears its
    line as it starts: both sides' counted runs find their code in the page cache. On network
    storage each run waits for the mount to rest after the last (``rest_storage``);
    ``on_rest`` hears the seconds first. A run still going ``time_limit_s`` after its start
    is stopped, and the A/B with it (a server that never exits and never loads it all). Under
    ``memory_limit`` every run happens in a memory cgroup of that size. A run the storage
    failed ends the A/B with that StorageError (throttled, changed, refused...).

    A program seen ready (a server: by default its first listening socket after its
    weights; ``serving``'s ``ready`` and ``ready_timeout_s`` ask otherwise) is stopped there
    with everything it started, and timed to ready: two servers are compared by their time
    to ready, each phase of their cold starts beside it (``ABResult.phases``), from any
    cache state."""
    check_whole("n (pairs)", n, 1, MAX_AB_PAIRS)
    with contextlib.ExitStack() as stack:
        caches = stack.enter_context(CompileCaches()) if asks_compile_cache(a, b) else None
        settings: RunSettings = {"cache": cache, **(serving or {}), "compile_caches": caches}
        warmed = warm_sides(
            model,
            (a, b),
            cancel=cancel,
            path=path,
            on_warm=on_warm,
            **(serving or {}),
            compile_caches=caches,
        )
        check_cache((a, b), cache, {code for code, result in warmed.items() if result.server})

        def load(side: str, pair: int, config: Configuration, given: RunSettings) -> LoadResult:
            outcome = run_for(
                model,
                config,
                cancel=cancel,
                monitor=False,
                path=path,
                time_limit_s=time_limit_s,
                memory_limit=memory_limit,
                **given,
            ).run()
            if on_outcome is not None:
                on_outcome(side, pair, outcome)
            return outcome.result

        run = run_one or load
        configs = {"A": a, "B": b}
        ordered = alternate(
            lambda side, pair: run(side, pair, with_cache(configs[side], cache), settings),
            n,
            [f.path for f in model.files],
            cancel=cancel,
            on_rest=on_rest,
            on_result=on_result,
        )
    results, ratios, verdict = judged(ordered, cache)
    side_a = summarize(a.spec, results["A"])
    side_b = summarize(b.spec, results["B"])
    shifts = phase_shifts(results["A"], results["B"]) if verdict.by == BY_READY else ()
    return ABResult(side_a, side_b, tuple(ratios), verdict, tuple(ordered), cache, shifts)


def alternate(
    run: Callable[[str, int], R],
    n: int,
    files: list[str],
    *,
    cancel: threading.Event | None = None,
    on_rest: Callable[[float], None] | None = None,
    on_result: Callable[[str, int, R], None] | None = None,
) -> list[tuple[str, R]]:
    """``run(side, pair)`` for A, B, A, B … ``n`` pairs: each side's runs, in run order. A
    run the storage failed raises that StorageError, another that did not complete (or a
    stop asked between two runs) ``ABFailed``: the comparison is void."""
    ordered: list[tuple[str, R]] = []
    for pair in range(n):
        for side in ("A", "B"):
            # On network storage neither side is timed with help left by the other's run.
            rest_storage(files, cancel, on_rest)
            if cancel is not None and cancel.is_set():  # between two runs: void, as mid-run
                raise ABFailed(side, pair, None)
            result = run(side, pair)
            ordered.append((side, result))
            if on_result is not None:
                on_result(side, pair, result)
            if result.storage_error is not None:  # the storage failed, not the side
                raise result.storage_error
            if result.status != "ok":
                raise ABFailed(side, pair, result)
            compared_by(ordered)  # a server beside a load: void now
    return ordered


def judged(
    ordered: Sequence[tuple[str, R]], cache: str
) -> tuple[dict[str, list[R]], list[float], Verdict]:
    """Each side's runs of the complete pairs, the pairs' B/A ratios and their verdict (noted
    where a run meant to be cold was not verified so)."""
    results: dict[str, list[R]] = {"A": [], "B": []}
    for side, result in ordered:
        results[side].append(result)
    pairs = min(len(results["A"]), len(results["B"]))
    if pairs == 0:
        raise ABFailed("A", 0, None)
    results = {side: runs[:pairs] for side, runs in results.items()}
    by = compared_by([(side, run) for side, runs in results.items() for run in runs])
    ratios = [pair_ratio(results["A"][i], results["B"][i], by) for i in range(pairs)]
    resolution = statistics.median(
        timing_error(results["A"][i], results["B"][i]) for i in range(pairs)
    )
    verdict = judge(ratios, resolution, by)
    not_cold = [
        f"{s} run {i // 2 + 1}"
        for i, (s, r) in enumerate(ordered)
        if cache == "cold" and not r.cache.cold
    ]
    if not_cold:
        verdict = replace(verdict, note=f"not verified cold: {', '.join(not_cold)}")
    return results, ratios, verdict


def warm_sides(
    model: Model,
    configs: tuple[Configuration, ...],
    *,
    cancel: threading.Event | None = None,
    path: str | None = None,
    on_warm: Callable[[str], None] | None = None,
    ready: ReadyCondition | None = None,
    ready_timeout_s: float | None = None,
    compile_caches: CompileCaches | None = None,
) -> dict[str, LoadResult]:
    """One uncounted run of each program among ``configs`` (``runs.warm.warm_each``), by
    its code; a stop asked meanwhile voids the A/B before its first run."""
    programs = [c for c in configs if isinstance(c, ProgramConfig)]
    warmed = warm_each(
        model,
        programs,
        cancel=cancel,
        path=path,
        on_warm=on_warm,
        ready=ready,
        ready_timeout_s=ready_timeout_s,
        compile_caches=compile_caches,
    )
    if cancel is not None and cancel.is_set():
        raise ABFailed("A", 0, None)
    return warmed
