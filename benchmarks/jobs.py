"""What a bench job is: a model in an environment and cache state, and the entries its rounds
measure (modelmon strategies in worker processes, ``core.load`` with a config, other loaders:
``modelmon.core.ENGINES`` entries run by the one child harness)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from modelmon.core import ProgramConfig
from modelmon.core.options import LoadOptions, format_spec

# The other loaders the bench runs beside modelmon (``modelmon.core.ENGINES`` names): the plain
# library calls modelmon's ``library`` strategy wraps, and the loaders users pick for speed.
PEER_ENGINES = (
    "safetensors",
    "gguf-reader",
    "runai",
    "fastsafetensors",
    "cattensors",
    "instanttensor",
)

Kind = Literal["strategy", "load", "peer"]
Cache = Literal["cold", "warm"]


@dataclass(frozen=True)
class Entry:
    """A row of a table: a modelmon strategy with options, or another loader (a peer) with
    the knobs a user would set for it."""

    kind: Kind  # "strategy" (measure: worker processes) | "load" (core.load) | "peer"
    name: str  # strategy, or the peer's ``ENGINES`` name
    options: LoadOptions = field(default_factory=LoadOptions)  # a strategy's or a load's
    knobs: tuple[tuple[str, str], ...] = ()  # a peer's settings
    role: str = ""  # "recommended" for recommend()'s pick; "alternative" for its strong rivals

    @property
    def program(self) -> ProgramConfig:
        """A peer as the configuration its runs are made of."""
        return ProgramConfig("engine", engine=self.name, knobs=self.knobs)

    @property
    def spec(self) -> str:
        if self.kind == "peer":
            return self.program.spec
        return format_spec(self.name, self.options)

    @property
    def label(self) -> str:
        prefix = {"load": "core.load: ", "peer": "peer: "}.get(self.kind, "")
        mark = " (recommended)" if self.role == "recommended" else ""
        named = self.program.body if self.kind == "peer" else self.spec
        return f"{prefix}{named}{mark}"

    def marked(self, role: str) -> Entry:
        return Entry(self.kind, self.name, self.options, self.knobs, role)


@dataclass
class Job:
    env: str  # "local" | "hdd" | "fuse" | "here" (benchmarks.regret)
    model_key: str  # names the model in the report
    model_path: str
    cache: Cache
    repeats: int
    entries: list[Entry]
    ceilings: list[str]
    recommend_budget_s: float = 0.0  # 0: no recommendation
    workers: int | None = 4  # None: the engine's default parallelism
    diagnose: bool = True  # monitored runs of the best configuration (diagnose.py)
    time_limit_s: float | None = None  # a run stopped there is bounded, and not run again
    ranks: int = 0  # > 1: the pick as N replica ranks at one barrier vs 1 (applied.ranks)

    @property
    def where(self) -> str:
        """The job in progress lines: env/model/cache."""
        return f"{self.env}/{self.model_key}/{self.cache}"
