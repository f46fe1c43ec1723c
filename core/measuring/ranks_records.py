"""What a ranks run measured (``measuring.ranks``): each rank's time, what it read and kept,
the node's memory, and the straggler."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from modelmon.core.errors import StorageError
from modelmon.core.loading.result import LoadResult
from modelmon.core.options import LoadOptions, format_spec
from modelmon.core.system import cache
from modelmon.core.system.memory_limit import MemoryLimit

RanksMode = Literal["whole", "slice", "one-reader"]
RANKS_MODES: tuple[RanksMode, ...] = ("whole", "slice", "one-reader")
RANKS_MODE_WORDS = {
    "whole": "every rank reads the whole model into its own memory and keeps its part",
    "slice": "every rank reads only its tensor-parallel part",
    "one-reader": "one process reads one shared copy, every rank maps it",
}


@dataclass(frozen=True, slots=True)
class Straggler:
    """The slowest of several loaders that started together, against their median."""

    who: str  # "rank 2", or a fleet node's id
    seconds: float
    median_seconds: float

    @property
    def ratio(self) -> float:
        """max/median seconds: 1.0 when every loader took as long as the typical one."""
        return self.seconds / self.median_seconds if self.median_seconds > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = round(self.ratio, 4) if math.isfinite(self.ratio) else None
        return data


def find_straggler(seconds: Sequence[tuple[str, float]]) -> Straggler | None:
    """The slowest of (who, seconds) pairs, or None when there are none."""
    if not seconds:
        return None
    who, slowest = max(seconds, key=lambda pair: pair[1])
    return Straggler(who, slowest, statistics.median(s for _, s in seconds))


@dataclass(frozen=True, slots=True)
class RankResult:
    rank: int
    tensors: int  # how many tensors (or parts of tensors) this rank has
    start: float  # seconds after the first rank went: the barrier's own spread
    seconds: float  # from its go until it had its weights
    status: str  # "ok" | "cancelled" | "failed"
    read_bytes: int  # what its own reads brought in (0: a one-reader rank maps the copy)
    kept_bytes: int  # what it holds of the model as its own (0: it maps the shared copy)
    result: LoadResult | None  # its load (None: a one-reader rank, which maps the copy)
    error: str | None = None
    mapped_bytes: int = 0  # what it maps of a one-reader's shared copy: the reader read it

    @property
    def end(self) -> float:
        return self.start + self.seconds

    def to_dict(self) -> dict[str, Any]:
        result = self.result
        return {
            "rank": self.rank,
            "status": self.status,
            "error": self.error,
            "tensors": self.tensors,
            "read_bytes": self.read_bytes,
            "bytes": self.read_bytes,
            "mbps": round(self.read_bytes / self.seconds / 1e6, 3) if self.seconds > 0 else 0.0,
            "kept_bytes": self.kept_bytes,
            "mapped_bytes": self.mapped_bytes,
            "seconds": self.seconds,
            "start": self.start,
            "end": self.end,
            "peak_rss": max((w.peak_rss for w in result.workers), default=0) if result else None,
            "checksum": result.checksum if result else None,
            "notes": list(result.notes) if result else [],
        }


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """The node's memory over a ranks run: its cgroup's, or the ranks' peaks summed."""

    peak_bytes: int
    anon_peak_bytes: int | None  # None: summed, not split
    cache_peak_bytes: int | None  # page cache and shared memory (a one-reader's copy)
    measured: bool  # True: one cgroup held every rank; False: their own peaks summed
    limit: MemoryLimit | None  # the record of the limit asked for, if one was
    # Anonymous and shared memory at once: what no reclaim frees, the least a limit leaves.
    held_peak_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["limit"] = self.limit.to_dict() if self.limit is not None else None
        return data


@dataclass(frozen=True, slots=True)
class RanksResult:
    status: str  # "ok" | "cancelled" | "failed": the worst of the ranks'
    strategy: str
    options: LoadOptions
    model: str
    mode: RanksMode
    cache: cache.CacheState  # measured once, before every rank went
    ranks: tuple[RankResult, ...]
    model_bytes: int
    node: NodeMemory | None = None
    reader: LoadResult | None = None  # a one-reader run's reader
    error: str | None = None
    storage_error: StorageError | None = None  # the first rank's, when storage failed it
    notes: tuple[str, ...] = ()

    @property
    def split(self) -> bool:
        return self.mode == "slice"

    @property
    def read_bytes(self) -> int:
        """Bytes every reader of the node brought in (a one-reader's reader's only)."""
        own = sum(r.read_bytes for r in self.ranks)
        return own + (self.reader.bytes if self.reader is not None else 0)

    @property
    def bytes(self) -> int:
        return self.read_bytes

    @property
    def seconds(self) -> float:
        """From the first rank's go to the slowest rank's end: when the server has them."""
        return max((r.end for r in self.ranks), default=0.0)

    @property
    def mbps(self) -> float:
        """The model's bytes over the slowest rank's time: the node's own rate."""
        return self.model_bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0

    @property
    def timed_every_s(self) -> float:
        """How finely ``seconds`` is known: each rank's load times itself (0.0)."""
        loads = [r.result for r in self.ranks if r.result is not None]
        return max((load.timed_every_s for load in loads), default=0.0)

    @property
    def ready_s(self) -> float | None:
        """A ranks run ends when its ranks have loaded: no server's ready."""
        return None

    @property
    def ready_every_s(self) -> float:
        return 0.0

    @property
    def phases(self) -> dict[str, float]:
        return {}

    @property
    def straggler(self) -> Straggler | None:
        ok = [(f"rank {r.rank}", r.seconds) for r in self.ranks if r.status == "ok"]
        return find_straggler(ok) if len(ok) > 1 else None

    def to_dict(self) -> dict[str, Any]:
        straggler = self.straggler
        return {
            "status": self.status,
            "error": self.error,
            "strategy": self.strategy,
            "spec": format_spec(self.strategy, self.options),
            "options": self.options.to_dict(),
            "model": self.model,
            "mode": self.mode,
            "split": self.split,
            "cache": asdict(self.cache),
            "model_bytes": self.model_bytes,
            "read_bytes": self.read_bytes,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "mbps": round(self.mbps, 3),
            "read_mbps": round(self.read_bytes / self.seconds / 1e6, 3) if self.seconds else 0.0,
            "straggler": None if straggler is None else straggler.to_dict(),
            "node": self.node.to_dict() if self.node is not None else None,
            "reader": self.reader.to_dict() if self.reader is not None else None,
            "ranks": [r.to_dict() for r in self.ranks],
            "notes": list(self.notes),
        }
