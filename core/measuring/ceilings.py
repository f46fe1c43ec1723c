"""Ceilings: what the storage and the memory give on this very file, measured in this
session by plain code that is none of modelmon's strategies (``measuring.bounds``), so that a
change to a strategy never moves the bar it is judged by.

- sequential_read: one plain reader, one descriptor, 16 MiB reads front to back, cold.
- parallel_read: several plain readers, each its own descriptor and contiguous range, cold.
- parallel_read_warm: the same from a verified-warm page cache (the ceiling for warm loads).
- storage: the best of a small sweep of plain readers (1, P and 2P readers, buffered, and P
  readers O_DIRECT where the file system takes it), cold: the bound of a load that discards, or
  maps, its bytes.
- memory_fill: how fast fresh memory is faulted in and filled while plain reads of the model
  run beside it: with the storage, the bound of a load that keeps its bytes.
- memcpy: RAM-to-RAM copy bandwidth, the bound on any copy out of the page cache.
A load is judged against the bound that applies to it (``Ceilings.bound``).
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
from modelmon.core.measuring.bounds import (
    FILL_BYTES,
    Reading,
    direct_supported,
    fill_rate,
    plain_read,
)
from modelmon.core.model.formats import require_tensor_bytes
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode, MiB
from modelmon.core.system.cache import prepare
from modelmon.core.system.memory import memory_facts

CEILINGS = (
    "sequential_read",
    "parallel_read",
    "parallel_read_warm",
    "storage",
    "memory_fill",
    "memcpy",
)
# The strategies whose loads keep no copy of the bytes (tensors are views of the mapping):
# the storage alone bounds them, as it bounds a load that discards.
VIEWS = ("mmap-view",)


@dataclass(frozen=True, slots=True)
class Ceiling:
    name: str
    mbps: float  # median of the repeats
    runs: tuple[float, ...]
    spec: str  # how it was measured, in one line
    verified: bool | None  # every run started in the cache state asked for (None: no cache)
    measured_at: float = 0.0  # time.time() when it was measured (0: unknown)
    wall_s: float = 0.0  # median wall time of one run, worker start-up included (0: unknown)

    @property
    def spread(self) -> float:
        """Half the range of its runs against their median: how far one run may land."""
        return spread_of(self.runs)


# A bound measured once, or whose runs agree, still allows this much above it: the timing of
# one run.
MIN_SPREAD = 0.02


def spread_of(runs: Sequence[float]) -> float:
    """Half the range of ``runs`` against their median (0 for fewer than two)."""
    median = statistics.median(runs) if runs else 0.0
    if len(runs) < 2 or median <= 0:
        return 0.0
    return (max(runs) - min(runs)) / 2 / median


def allowed_ratio(runs: Sequence[float]) -> float:
    """The most a rate may be of a bound with these ``runs`` and still be an efficiency: one
    plus their spread (``MIN_SPREAD`` at least)."""
    return 1 + max(spread_of(runs), MIN_SPREAD)


def beyond_spread(ratio: float, runs: Sequence[float]) -> bool:
    """Whether a rate ``ratio`` times a bound is above it by more than the spread of the
    bound's ``runs``: then it is no efficiency."""
    return ratio > allowed_ratio(runs)


@dataclass(frozen=True, slots=True)
class Efficiency:
    """A load's rate against the bound that applies to it."""

    fraction: float
    bound: Ceiling
    keeps: bool  # the load keeps its bytes (bounded by the memory fill too)

    @property
    def above(self) -> bool:
        """Above its bound by more than the bound's own spread: not an efficiency but a sign
        that something below the guest (a host's cache that cold cannot drop) served it."""
        return beyond_spread(self.fraction, self.bound.runs)

    def words(self) -> str:
        """ "87 % of the storage bound" or, above it, what that means."""
        name = BOUND_WORDS.get(self.bound.name, self.bound.name.replace("_", " "))
        if self.above:
            return (
                f"{self.fraction:.0%} of the {name}: above it, so a cache this machine cannot "
                "drop (the host's, below the guest) served some reads: not an efficiency"
            )
        return f"{self.fraction:.0%} of the {name}"


BOUND_WORDS = {
    "storage": "storage bound",
    "memory_fill": "memory-fill bound",
    "parallel_read": "parallel-read ceiling",
    "parallel_read_warm": "warm parallel-read ceiling",
}


def keeps_bytes(strategy: str, discard: bool) -> bool:
    """Whether a load keeps a copy of the bytes in fresh memory (and pays to fill it)."""
    return not discard and strategy not in VIEWS


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

    def bound(self, keeps: bool, warm: bool = False) -> Ceiling | None:
        """The bound of a load: from a warm cache, the warm parallel read; else the storage
        (the plain parallel read where the sweep was not measured), and for a load that keeps
        its bytes the memory fill too, whichever is lower."""
        if warm and self.get("parallel_read_warm") is not None:
            return self.get("parallel_read_warm")
        storage = self.get("storage") or self.get("parallel_read")
        fill = self.get("memory_fill") if keeps else None
        found = [c for c in (storage, fill) if c is not None and c.mbps > 0]
        return min(found, key=lambda c: c.mbps) if found else None

    def efficiency(self, mbps: float, keeps: bool, warm: bool = False) -> Efficiency | None:
        bound = self.bound(keeps, warm)
        if bound is None or mbps <= 0:
            return None
        return Efficiency(mbps / bound.mbps, bound, keeps)

    def binding_words(self) -> str:
        """Which bound binds a load that keeps its bytes, in one sentence ("" unmeasured)."""
        storage, fill = self.get("storage"), self.get("memory_fill")
        if storage is None or fill is None:
            return ""
        if fill.mbps < storage.mbps:
            return (
                f"A load that keeps its bytes is limited here by filling fresh memory, not by "
                f"the storage: {fill.mbps:.0f} MB/s to fill against {storage.mbps:.0f} to read."
            )
        return (
            f"A load that keeps its bytes is limited here by the storage, not by filling "
            f"fresh memory: {storage.mbps:.0f} MB/s to read against {fill.mbps:.0f} to fill."
        )

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


def _cold_or_warm(
    paths: list[str], cache: CacheMode, cancel: threading.Event | None, arrays: int = 0
) -> bool:
    """Put the files in ``cache`` and say whether it was verified. ``arrays``: the bytes of
    fresh memory the run fills (free memory is primed for them as for a load's arrays; a
    plain read discards its bytes: none)."""
    state = prepare(paths, cache, cancel, arrays=arrays)
    return state.cold if cache == "cold" else state.warm


def _ceiling(
    name: str, runs: list[float], spec: str, verified: bool | None, walls: Sequence[float] = ()
) -> Ceiling:
    return Ceiling(
        name,
        statistics.median(runs),
        tuple(runs),
        spec,
        verified,
        measured_at=time.time(),
        wall_s=statistics.median(walls) if walls else 0.0,
    )


class _Plain:
    """Plain reads of one model, each from the cache state asked for; a reading of each
    setting kept, so that the sweep and the named ceilings share their runs."""

    def __init__(self, model: Model, cancel: threading.Event | None) -> None:
        self.paths = [f.path for f in model.files]
        self.cancel = cancel
        self.readings: dict[tuple[int, int, bool, str], list[Reading]] = {}
        self.walls: dict[tuple[int, int, bool, str], list[float]] = {}
        self.verified: dict[tuple[int, int, bool, str], list[bool]] = {}

    def read(self, readers: int, request: int, direct: bool, cache: CacheMode) -> Reading:
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("ceiling: cancelled")
        key = (readers, request, direct, cache)
        started = time.monotonic()
        self.verified.setdefault(key, []).append(_cold_or_warm(self.paths, cache, self.cancel))
        try:
            reading = plain_read(self.paths, readers, request, direct=direct)
        except OSError as exc:
            raise LoadError(f"ceiling: plain read of {self.paths[0]} failed: {exc}") from None
        self.readings.setdefault(key, []).append(reading)
        self.walls.setdefault(key, []).append(time.monotonic() - started)
        return reading

    def named(
        self, name: str, readers: int, request: int, cache: CacheMode, repeats: int
    ) -> Ceiling:
        """``repeats`` runs of one setting (those the sweep made count) as ceiling ``name``."""
        key = (readers, request, False, cache)
        while len(self.readings.get(key, [])) < repeats:
            self.read(readers, request, False, cache)
        spec = (
            f"plain reader, {readers} thread(s), own descriptors, {request // MiB} MiB "
            f"reads, {cache}, discard"
        )
        runs = [r.mbps for r in self.readings[key][:repeats]]
        verified = all(self.verified[key][:repeats])
        return _ceiling(name, runs, spec, verified, self.walls[key][:repeats])

    def sweep(self, parallel: int, repeats: int) -> Ceiling:
        """The best of a sweep of plain readers, cold, then repeated to ``repeats`` runs."""
        # 1 MiB requests were never the sweep's best (a local disk: 1,695 MB/s against 8
        # readers' 2,049; FUSE: 577 against O_DIRECT's 638), and each setting costs a cold
        # preparation of seconds: the sweep is of readers.
        settings = [(1, 16 * MiB, False), (parallel, 16 * MiB, False)]
        settings.append((2 * parallel, 16 * MiB, False))
        if direct_supported(self.paths[0]):
            settings.append((parallel, 16 * MiB, True))
        for readers, request, direct in settings:
            if not self.readings.get((readers, request, direct, "cold")):
                self.read(readers, request, direct, "cold")
        best = max(settings, key=lambda s: self.readings[(*s, "cold")][0].mbps)
        while len(self.readings[(*best, "cold")]) < repeats:
            self.read(*best, "cold")
        runs = [r.mbps for r in self.readings[(*best, "cold")]]
        verified = all(all(self.verified[(*s, "cold")]) for s in settings)
        swept = "; ".join(
            f"{self.readings[(*s, 'cold')][0].setting}: "
            f"{self.readings[(*s, 'cold')][0].mbps:.0f} MB/s"
            for s in settings
        )
        setting = self.readings[(*best, "cold")][0].setting
        spec = f"plain reader, best of a sweep: {setting} (swept: {swept}), cold, discard"
        return _ceiling("storage", runs, spec, verified)

    def fill(self, model: Model, parallel: int, repeats: int) -> Ceiling:
        """Fresh memory filled by ``parallel`` threads while plain reads of the model run
        beside it, from a cold cache."""
        size = min(FILL_BYTES, max(model.file_bytes, 64 * MiB), memory_facts().usable // 4)
        runs: list[float] = []
        verified = True
        failed: list[OSError] = []

        def read_beside() -> None:
            try:
                plain_read(self.paths, parallel, 16 * MiB)
            except OSError as exc:  # said after the fill, one line
                failed.append(exc)

        for _ in range(repeats):
            cold = _cold_or_warm(self.paths, "cold", self.cancel, arrays=size)
            verified = cold and verified
            beside = threading.Thread(target=read_beside, name="modelmon-plain-read-beside")
            beside.start()
            try:
                runs.append(fill_rate(size, parallel))
            finally:
                beside.join()
            if failed:
                raise LoadError(f"ceiling: plain read of {self.paths[0]} failed: {failed[0]}")
        spec = (
            f"{parallel} threads filling {size // MiB} MiB of fresh memory from /dev/zero, "
            "beside plain cold reads of the model"
        )
        return _ceiling("memory_fill", runs, spec, verified)


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
    require_tensor_bytes(model)  # nothing to read: no bound to measure
    unknown = set(names) - set(CEILINGS)
    if unknown:
        raise ValueError(f"unknown ceiling {sorted(unknown)[0]!r}; known: {', '.join(CEILINGS)}")
    parallel = workers or default_parallelism()
    plain = _Plain(model, cancel)
    plans: dict[str, tuple[int, CacheMode]] = {
        "sequential_read": (1, "cold"),
        "parallel_read": (parallel, "cold"),
        "parallel_read_warm": (parallel, "warm"),
    }
    # The sweep first: the named reads reuse its runs of their settings.
    order = sorted(names, key=lambda name: name != "storage")
    items: list[Ceiling] = []
    for name in order:
        if cancel is not None and cancel.is_set():
            break
        if name == "memcpy":
            runs = [memcpy_mbps() for _ in range(repeats)]
            ceiling = _ceiling(name, runs, "numpy copy of a 256 MiB buffer in RAM", None)
        elif name == "storage":
            ceiling = plain.sweep(parallel, repeats)
        elif name == "memory_fill":
            ceiling = plain.fill(model, parallel, repeats)
        else:
            readers, cache = plans[name]
            ceiling = plain.named(name, readers, chunk, cache, repeats)
        items.append(ceiling)
        if on_ceiling is not None:
            on_ceiling(ceiling)
    return Ceilings(model.path, tuple(sorted(items, key=lambda c: CEILINGS.index(c.name))))
