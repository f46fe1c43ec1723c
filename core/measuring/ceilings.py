"""Ceilings: what the hardware gives on this very file, measured in this session.

Results are reported as a fraction of these, so "78 %" means something on NVMe, on a
throttled disk and on a FUSE mount alike.
- sequential_read: one worker, one descriptor, large reads front to back, cold.
- parallel_read: several workers, each its own descriptor and contiguous range, cold.
- parallel_read_warm: the same from a verified-warm page cache (the ceiling for warm loads).
- memcpy: RAM-to-RAM copy bandwidth, the bound on any copy out of the page cache.
Reads run in discard mode (bounded buffers), so no ceiling pays for page faults on destination
arrays that a real load would pay for: they are upper bounds, as ceilings should be.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from modelmon.core.errors import LoadError
from modelmon.core.loading.preflight import refuse_objects
from modelmon.core.loading.runner import LoadRun
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions, MiB

CEILINGS = ("sequential_read", "parallel_read", "parallel_read_warm", "memcpy")


@dataclass(frozen=True, slots=True)
class Ceiling:
    name: str
    mbps: float  # median of the repeats
    runs: tuple[float, ...]
    spec: str  # how it was measured, in one line
    verified: bool | None  # every run started in the cache state asked for (None: no cache)
    measured_at: float = 0.0  # time.time() when it was measured (0: unknown)
    wall_s: float = 0.0  # median wall time of one run, worker start-up included (0: unknown)


@dataclass(frozen=True, slots=True)
class Ceilings:
    model: str
    items: tuple[Ceiling, ...]

    def get(self, name: str) -> Ceiling | None:
        return next((c for c in self.items if c.name == name), None)

    def has(self, names: Sequence[str]) -> bool:
        return all(self.get(name) is not None for name in names)

    def merged(self, newer: Ceilings) -> Ceilings:
        """These ceilings with ``newer``'s in place of the same names (one set per model)."""
        kept = tuple(c for c in self.items if newer.get(c.name) is None)
        return Ceilings(newer.model or self.model, (*kept, *newer.items))

    def fraction(self, mbps: float, name: str) -> float | None:
        ceiling = self.get(name)
        return mbps / ceiling.mbps if ceiling and ceiling.mbps > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "ceilings": [asdict(c) for c in self.items]}


def default_parallelism() -> int:
    return max(4, os.cpu_count() or 1)


def memcpy_mbps(size: int = 256 * MiB, repeats: int = 3) -> float:
    """Best-of-``repeats`` numpy copy bandwidth (counts bytes copied once, like a load)."""
    source = np.ones(size, dtype=np.uint8)
    target = np.empty_like(source)
    target[:] = source  # fault the pages in before timing
    best = 0.0
    for _ in range(repeats):
        started = time.perf_counter()
        np.copyto(target, source)
        best = max(best, size / (time.perf_counter() - started) / 1e6)
    return best


def _read_ceiling(
    model: Model, name: str, options: LoadOptions, repeats: int, cancel: threading.Event | None
) -> Ceiling:
    runs: list[float] = []
    walls: list[float] = []
    verified = True
    for _ in range(repeats):
        started = time.monotonic()
        result = LoadRun(model, "sequential", options, cancel=cancel).run()
        walls.append(time.monotonic() - started)
        if result.status != "ok":
            raise LoadError(f"ceiling {name}: {result.status}: {result.error}")
        runs.append(result.mbps)
        verified = verified and (
            result.cache.cold if options.cache == "cold" else result.cache.warm
        )
    spec = (
        f"sequential, {options.workers} worker(s), own descriptors, "
        f"{options.chunk // MiB} MiB reads, {options.cache}, discard"
    )
    return Ceiling(
        name,
        statistics.median(runs),
        tuple(runs),
        spec,
        verified,
        measured_at=time.time(),
        wall_s=statistics.median(walls),
    )


def measure_ceilings(
    model: Model,
    names: Sequence[str] = CEILINGS,
    *,
    repeats: int = 3,
    workers: int | None = None,
    chunk: int = 16 * MiB,
    cancel: threading.Event | None = None,
    on_ceiling: Callable[[Ceiling], None] | None = None,
) -> Ceilings:
    """Measure the named ceilings on ``model``'s files; each is the median of ``repeats``."""
    refuse_objects(model)
    unknown = set(names) - set(CEILINGS)
    if unknown:
        raise ValueError(f"unknown ceiling {sorted(unknown)[0]!r}; known: {', '.join(CEILINGS)}")
    parallel = workers or default_parallelism()
    plans = {
        "sequential_read": LoadOptions(
            workers=1, threads=1, chunk=chunk, cache="cold", discard=True
        ),
        "parallel_read": LoadOptions(
            workers=parallel, threads=1, chunk=chunk, cache="cold", discard=True
        ),
        "parallel_read_warm": LoadOptions(
            workers=parallel, threads=1, chunk=chunk, cache="warm", discard=True
        ),
    }
    items: list[Ceiling] = []
    for name in names:
        if cancel is not None and cancel.is_set():
            break
        if name == "memcpy":
            runs = tuple(memcpy_mbps() for _ in range(repeats))
            ceiling = Ceiling(
                name,
                statistics.median(runs),
                runs,
                "numpy copy of a 256 MiB buffer in RAM",
                None,
                measured_at=time.time(),
            )
        else:
            ceiling = _read_ceiling(model, name, plans[name], repeats, cancel)
        items.append(ceiling)
        if on_ceiling is not None:
            on_ceiling(ceiling)
    return Ceilings(model.path, tuple(items))
