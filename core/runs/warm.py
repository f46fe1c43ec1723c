"""A program's code read in before its counted runs: one uncounted run of each program, so
that the runs compared after it find their code (imports, libraries) in the page cache, as a
user's second start does."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from modelmon.core.configuration import ProgramConfig
from modelmon.core.loading.result import LoadResult
from modelmon.core.model.records import Model
from modelmon.core.runs.compile_cache import CompileCaches
from modelmon.core.runs.program import ProgramRun
from modelmon.core.runs.verdict import UNTIMED
from modelmon.core.watching.ready import ReadyCondition


def warm_code(
    model: Model,
    program: ProgramConfig,
    *,
    cancel: threading.Event | None = None,
    path: str | None = None,
    ready: ReadyCondition | None = None,
    ready_timeout_s: float | None = None,
    compile_caches: CompileCaches | None = None,
) -> LoadResult:
    """One run of ``program`` that is not counted, from the cache as it is, so that the runs
    compared after it find its code (its imports, its libraries) in the page cache, as a
    second start does. Without it the first run reads its code from storage as it loads:
    a lazy import in the middle of the load stalls the model's reads, on the same disk's
    budget (on the throttled disk, the first run after a minute's idle loaded at half the
    rate of the runs after it, and a host that pages out idle cache does that to any run
    that follows a minute without the program)."""
    run = ProgramRun(
        model,
        program,
        "keep",
        cancel=cancel,
        path=path,
        ready=ready,
        ready_timeout_s=ready_timeout_s,
        compile_caches=compile_caches,
    )
    return run.run().result


def warm_failure(result: LoadResult) -> str | None:
    """Why an uncounted run failed; None where it ran well but could not be timed (what a
    run from a cache that may hold the model does: it warms the code all the same)."""
    if result.status != "failed" or (result.error or "").startswith(UNTIMED):
        return None
    return result.error or "failed"


def warming_line(spec: str) -> str:
    """What the user is told as ``spec`` runs once uncounted (``warm_code``)."""
    return f"{spec}: once first, not counted, so that its code is in the page cache"


def warm_each(
    model: Model,
    programs: Iterable[ProgramConfig],
    *,
    cancel: threading.Event | None = None,
    path: str | None = None,
    on_warm: Callable[[str], None] | None = None,
    ready: ReadyCondition | None = None,
    ready_timeout_s: float | None = None,
    compile_caches: CompileCaches | None = None,
) -> dict[str, LoadResult]:
    """``warm_code`` once for each code among ``programs``, in order (``ProgramConfig.code``:
    one engine's configurations, or one command's, share theirs); ``on_warm`` hears each
    one's ``warming_line`` as it starts. It ends early once ``cancel`` is set. Each code's
    uncounted run: a server's was seen ready (``LoadResult.server``)."""
    warmed: dict[str, LoadResult] = {}
    for program in programs:
        if program.code in warmed:
            continue
        if cancel is not None and cancel.is_set():
            break
        if on_warm is not None:
            on_warm(warming_line(program.spec))
        warmed[program.code] = warm_code(
            model,
            program,
            cancel=cancel,
            path=path,
            ready=ready,
            ready_timeout_s=ready_timeout_s,
            compile_caches=compile_caches,
        )
    return warmed
