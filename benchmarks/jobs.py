"""What a bench job is: a model in an environment and cache state, and the entries its rounds
measure (modelmon strategies in worker processes, ``core.load`` with a config, peer loaders)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from modelmon.core import LoadOptions, PeerSettings, format_spec


@dataclass(frozen=True)
class Entry:
    """A row of a table: a modelmon strategy with options, or a peer loader."""

    kind: str  # "strategy" (measure: worker processes) | "load" (core.load) | "peer"
    name: str  # strategy or peer name
    options: dict[str, Any] = field(default_factory=dict)  # LoadOptions fields (strategies)
    role: str = ""  # "recommended" for recommend()'s pick; "alternative" for its strong rivals

    @property
    def spec(self) -> str:
        if self.kind == "peer":
            return self.settings.spec
        return format_spec(self.name, self.loaded)

    @property
    def settings(self) -> PeerSettings:
        """A peer's settings: ``options["env"]`` holds the variables a user would set."""
        return PeerSettings(self.name, tuple((k, v) for k, v in self.options.get("env", ())))

    @property
    def loaded(self) -> LoadOptions:
        return LoadOptions(**self.options)

    @property
    def label(self) -> str:
        prefix = {"load": "core.load: ", "peer": "peer: "}.get(self.kind, "")
        mark = " (recommended)" if self.role == "recommended" else ""
        return f"{prefix}{self.spec}{mark}"


@dataclass
class Job:
    env: str  # "local" | "hdd" | "fuse"
    model_key: str  # names the model in the report
    model_path: str
    cache: str  # "cold" | "warm"
    repeats: int
    entries: list[Entry]
    ceilings: list[str]
    recommend_budget_s: float = 0.0  # 0: no recommendation
    workers: int | None = 4  # None: the engine's default parallelism
    diagnose: bool = True  # monitored runs of the best configuration (diagnose.py)
    time_limit_s: float | None = None  # a run stopped there is bounded, and not run again
    ranks: int = 0  # > 1: the pick as N replica ranks at one barrier vs 1 (ranks.py)

    @property
    def where(self) -> str:
        """The job in progress lines: env/model/cache."""
        return f"{self.env}/{self.model_key}/{self.cache}"

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Job:
        entries = [Entry(**e) for e in data.pop("entries")]
        return Job(entries=entries, **data)
