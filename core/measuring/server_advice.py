"""``recommend`` for a server: the user's server as it is and with each change that may make it
ready sooner (``server_variants``), each a start from a cold page cache and fresh compile
caches (as a new pod's; the caches are variants of their own), stopped at ready and timed to
it, in rounds within the budget; the answer is the fastest change that every round agrees is
faster than the server as it is, beyond the noise.

Round 1 screens: after one uncounted start that reads the server's code into the page cache
(and tells that it is a server at all), the server as it is, then each variant once, while
the budget keeps room for the rounds after it. Then the finalists (the server as it is, the
change that gained most, and the caches) run in rounds, the order rotated, to
``EVIDENCE_RUNS`` each while a round ends within the budget's overrun. A variant is judged
against the server as it is round by round, as an A/B judges its pairs.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from modelmon.core.configuration import ProgramConfig
from modelmon.core.errors import LoadError, OptionsError
from modelmon.core.limits import EVIDENCE_OVERRUN, EVIDENCE_RUNS, check_budget
from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ab import BY_READY, PhaseShift, Verdict, judge, phase_shifts
from modelmon.core.measuring.judging import MIN_GAIN
from modelmon.core.measuring.server_variants import (
    LeftOut,
    Variant,
    cache_variants,
    engine_variants,
    server_engine,
    with_change,
)
from modelmon.core.model.records import Model
from modelmon.core.runs.compile_cache import CompileCaches
from modelmon.core.runs.start import run_for
from modelmon.core.runs.verdict import UNTIMED
from modelmon.core.runs.warm import warm_code
from modelmon.core.system.storage_rest import rest_storage
from modelmon.core.watching.ready import ReadyCondition

Say = Callable[[str], None]


@dataclass
class Measured:
    """One variant (or the server as it is) and its starts, by round."""

    variant: Variant
    by_round: dict[int, LoadResult] = field(default_factory=dict)
    failure: str = ""  # why its start failed, or why it was not measured
    verdict: Verdict | None = None  # against the server as it is, round by round
    shifts: tuple[PhaseShift, ...] = ()  # where its time to ready differs

    @property
    def runs(self) -> list[LoadResult]:
        return [self.by_round[n] for n in sorted(self.by_round)]

    @property
    def ready_s(self) -> float | None:
        """The median time to ready of its starts."""
        times = [r.ready_s for r in self.runs if r.ready_s is not None]
        return statistics.median(times) if times else None

    @property
    def spread_s(self) -> tuple[float, float] | None:
        times = [r.ready_s for r in self.runs if r.ready_s is not None]
        return (min(times), max(times)) if times else None

    @property
    def sooner(self) -> bool:
        """Every round agrees it is ready sooner than the server as it is, beyond the noise
        and by ``MIN_GAIN`` at least."""
        verdict = self.verdict
        return (
            verdict is not None and verdict.text == "B faster" and verdict.median_ratio >= MIN_GAIN
        )

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "change": self.variant.change,
            "kind": self.variant.kind,
            "why": self.variant.why,
            "spec": self.variant.config.spec,
            "ready_s": self.ready_s,
            "ready_s_each": [r.ready_s for r in self.runs],
            "runs": len(self.runs),
            "failure": self.failure or None,
            "verdict": asdict(self.verdict) if self.verdict is not None else None,
            "phases": [asdict(s) for s in self.shifts],
        }


@dataclass(frozen=True)
class ServerAdvice:
    """A server measured as it is and with its variants."""

    server: ProgramConfig  # as the user gave it
    engine: str | None  # the serving engine recognised in its command
    as_is: Measured
    variants: tuple[Measured, ...]  # each change, in the order measured (or not)
    left_out: tuple[LeftOut, ...]
    rounds: int
    budget_s: float
    elapsed_s: float
    files: tuple[str, ...] = ()  # the model's local files (what a pre-warmed node holds)
    notes: tuple[str, ...] = ()

    @property
    def pick(self) -> Measured | None:
        """The change to make to the command: the fastest that is surely sooner."""
        made = [m for m in self.variants if m.variant.kind != "cache" and m.sooner]
        return min(made, key=lambda m: m.ready_s or float("inf"), default=None)

    def cache(self, change: str) -> Measured | None:
        return next((m for m in self.variants if m.variant.change == change), None)

    def to_dict(self) -> dict[str, Any]:
        pick = self.pick
        return {
            "server": self.server.spec,
            "engine": self.engine,
            "by": BY_READY,
            "as_is": self.as_is.to_dict(),
            "pick": pick.variant.change if pick is not None else None,
            "variants": [m.to_dict() for m in self.variants],
            "left_out": [{"change": x.change, "why": x.why} for x in self.left_out],
            "rounds": self.rounds,
            "budget_s": self.budget_s,
            "elapsed_s": round(self.elapsed_s, 1),
            "notes": list(self.notes),
        }


def server_variants(
    server: ProgramConfig, changes: list[str], local: bool = True
) -> tuple[list[Variant], list[LeftOut]]:
    """The user's changes first, then the engine's, then the caches: each from the server
    as it is (one change each). ``local``: the model is in files here (a bucket's is in no
    page cache to warm)."""
    yours = [Variant(with_change(server, text), text, "yours") for text in changes]
    engine, left = engine_variants(server)
    said = {v.config.spec for v in yours}
    engine = [v for v in engine if v.config.spec not in said]
    caches = [v for v in cache_variants(server) if local or v.config.page_cache is None]
    if not local:
        left.append(LeftOut("a pre-warmed page cache", "the model is in object storage"))
    return [*yours, *engine, *caches], left


def recommend_server(
    model: Model,
    server: ProgramConfig,
    budget_s: float,
    *,
    changes: list[str] | None = None,
    path: str | None = None,
    ready: ReadyCondition | None = None,
    ready_timeout_s: float | None = None,
    progress: Say | None = None,
    cancel: threading.Event | None = None,
) -> ServerAdvice:
    """Measure ``server`` as it is and with each variant, within ``budget_s`` (see the
    module's docstring)."""
    check_budget(budget_s)
    if server.kind != "cmd" or server.command_words is None:
        raise OptionsError("--server takes a command: cmd: COMMAND ARGS ({path} is the model)")
    say = progress or (lambda _line: None)
    began = time.monotonic()
    # As a new pod starts: fresh compile caches, in folders of modelmon's.
    base = replace(server, compile_cache="fresh", page_cache=None)
    files = tuple(f.path for f in model.files if f.remote is None)
    variants, left = server_variants(base, list(changes or []), local=bool(files))
    with CompileCaches() as caches:
        rounds = _Rounds(model, path, began + budget_s, say, cancel, caches, ready, ready_timeout_s)
        as_is = Measured(Variant(base, "as it is", "yours"))
        rounds.first(as_is)
        measured = [Measured(v) for v in variants]
        rounds.screen(as_is, measured)
        finalists = _finalists(as_is, measured)
        rounds.settle([as_is, *finalists], budget_s * EVIDENCE_OVERRUN)
        for one in measured:
            _judge(as_is, one)
    return ServerAdvice(
        server,
        server_engine(server),
        as_is,
        tuple(measured),
        tuple(left),
        rounds.round + 1,
        budget_s,
        time.monotonic() - began,
        files,
        tuple(rounds.notes),
    )


def _judge(as_is: Measured, one: Measured) -> None:
    """Its rounds against the server as it is's, as an A/B judges its pairs."""
    common = [n for n in sorted(one.by_round) if n in as_is.by_round]
    if not common:
        return
    base = [as_is.by_round[n] for n in common]
    mine = [one.by_round[n] for n in common]
    ratios = [(a.ready_s or 0.0) / (b.ready_s or 1.0) for a, b in zip(base, mine, strict=True)]
    error = statistics.median(
        a.ready_every_s / (a.ready_s or 1.0) + b.ready_every_s / (b.ready_s or 1.0)
        for a, b in zip(base, mine, strict=True)
    )
    one.verdict = judge(ratios, error, BY_READY)
    one.shifts = phase_shifts(base, mine)


def _finalists(as_is: Measured, measured: list[Measured]) -> list[Measured]:
    """The change that gained most in the screening, and every cache variant measured."""
    for one in measured:
        _judge(as_is, one)
    changes = [m for m in measured if m.variant.kind != "cache" and m.verdict is not None]
    best = max(changes, key=lambda m: m.verdict.median_ratio if m.verdict else 0.0, default=None)
    chosen = [best] if best is not None and best.verdict and best.verdict.median_ratio > 1 else []
    return [*chosen, *(m for m in measured if m.variant.kind == "cache" and m.by_round)]


class _Rounds:
    def __init__(
        self,
        model: Model,
        path: str | None,
        deadline: float,
        say: Say,
        cancel: threading.Event | None,
        caches: CompileCaches,
        ready: ReadyCondition | None,
        ready_timeout_s: float | None,
    ) -> None:
        self.model, self.path, self.deadline, self.say = model, path, deadline, say
        self.cancel, self.caches = cancel, caches
        self.ready, self.ready_timeout_s = ready, ready_timeout_s
        self.round = 0
        self.walls: list[float] = []  # each start, with its stop and the storage's rest
        self.warmed: set[str] = set()
        self.notes: list[str] = []

    def left(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def pace(self) -> float:
        return statistics.median(self.walls) if self.walls else 0.0

    def check_cancel(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("recommendation cancelled")

    def warm(self, one: Measured, as_is: bool = False) -> None:
        """Its code read in by a start that is not counted (a kept cache filled by it). The
        server as it is must be seen ready there: else it is no server, or it fails."""
        config = one.variant.config
        if config.code in self.warmed:
            return
        self.warmed.add(config.code)
        self.say(f"{one.variant.change}: once first, not counted (its code, its caches)")
        began = time.monotonic()
        result = warm_code(
            self.model,
            config,
            cancel=self.cancel,
            path=self.path,
            ready=self.ready,
            ready_timeout_s=self.ready_timeout_s,
            compile_caches=self.caches,
        )
        self.walls.append(time.monotonic() - began)
        self.check_cancel()
        if as_is and not result.server:
            untimed = (result.error or "").startswith(UNTIMED) or "warm model" in (
                result.error or ""
            )
            if result.status == "ok" or untimed:
                raise OptionsError(
                    f"{config.spec}: not a server: it was never seen ready (it loaded and "
                    "exited, or went quiet, without listening); name when it is ready with "
                    "--ready-port, --ready-line or --ready-url, or recommend for it as a "
                    "loader (--loader)"
                )
            raise LoadError(f"the server as it is failed its first start: {result.error}")

    def start(self, one: Measured, as_is: bool = False) -> LoadResult:
        """One counted start of ``one`` in the current round."""
        self.warm(one, as_is)
        began = time.monotonic()
        rest_storage([f.path for f in self.model.files], self.cancel)
        self.check_cancel()
        result = (
            run_for(
                self.model,
                one.variant.config,
                cancel=self.cancel,
                monitor=False,
                path=self.path,
                ready=self.ready,
                ready_timeout_s=self.ready_timeout_s,
                compile_caches=self.caches,
            )
            .run()
            .result
        )
        self.check_cancel()
        self.walls.append(time.monotonic() - began)
        if result.storage_error is not None:
            raise result.storage_error
        if result.status == "ok" and result.ready_s is not None:
            one.by_round[self.round] = result
            self.say(f"{one.variant.change}: ready in {result.ready_s:.1f} s")
        elif not one.by_round:
            one.failure = f"{result.status}: {result.error or 'never seen ready'}"
            self.say(f"{one.variant.change}: {one.failure}")
        else:
            self.say(f"{one.variant.change}: a start not counted ({result.error})")
        return result

    def first(self, as_is: Measured) -> None:
        result = self.start(as_is, as_is=True)
        if not as_is.by_round:
            raise LoadError(f"the server as it is failed: {result.error or result.status}")

    def screen(self, as_is: Measured, measured: list[Measured]) -> None:
        """Each variant once, while the budget keeps room for the evidence after it: the
        server as it is and one finalist to ``EVIDENCE_RUNS`` more starts each."""
        keep = 2 * (EVIDENCE_RUNS - 1) * self.pace
        for one in measured:
            if self.left() - keep < self.pace:
                one.failure = "not measured: no budget left for it"
                continue
            self.start(one)

    def settle(self, finalists: list[Measured], overrun_s: float) -> None:
        alive = [m for m in finalists if m.by_round]
        while alive and min(len(m.by_round) for m in alive) < EVIDENCE_RUNS:
            needed = len(alive) * self.pace
            if self.left() + overrun_s < needed:
                fewest = min(len(m.by_round) for m in alive)
                self.notes.append(
                    f"the budget held {fewest} start(s) of each finalist, not {EVIDENCE_RUNS}: "
                    f"a round of them takes about {needed:.0f} s, "
                    f"{max(0.0, self.left()):.0f} s were left"
                )
                break
            self.round += 1
            shift = self.round % len(alive)
            for one in alive[shift:] + alive[:shift]:
                self.start(one)
            # One that failed this round is not run again: its starts so far are judged; the
            # server as it is failing, no more round can be judged.
            alive = [m for m in alive if self.round in m.by_round]
            if finalists[0] not in alive:
                self.notes.append("the server as it is failed a start: the rounds ended there")
                break
