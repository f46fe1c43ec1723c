"""Ceilings: what the storage and the memory give on this very file, measured in this
session by plain code that is none of modelmon's strategies (``measuring.bounds``), so that a
change to a strategy never moves the bar it is judged by.

- sequential_read: one plain reader, one descriptor, 16 MiB reads front to back, cold.
- parallel_read: several plain readers, each its own descriptor and contiguous range, cold.
- parallel_read_warm: the same from a verified-warm page cache (the ceiling for warm loads).
- storage: the best of a small sweep of plain readers (1, P and 2P readers, buffered, P
  readers O_DIRECT where the file system takes it, and the named cold reads' own settings),
  cold, each setting judged on the median of its runs: the bound of a load that discards, or
  maps, its bytes; no plain reader measured with it reads faster.
- memory_fill: how fast fresh memory is faulted in and filled with nothing else running: with
  the storage, the bound of a load that keeps its bytes; and while plain reads of the model
  run beside it, sharing the CPUs as a load's own reads do (which of the two binds).
- memcpy: RAM-to-RAM copy bandwidth, the bound on any copy out of the page cache.
- keeping_read: the storage bound's best plain setting again, each reader's bytes read into
  fresh memory as a load keeps them, cold: no bound (a load's reads may outrun it) but what
  plain code keeps at here, where faulting in fresh memory shares the CPUs with the reads
  (and with a FUSE daemon): the figure that says what holds a keeping load under the bound.
  Measured where the model takes at most a ``KEEPING_SHARE`` of usable memory.
A load is judged against the bound that applies to it (``Ceilings.bound``).
"""

from __future__ import annotations

import functools
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence

from modelmon.core.errors import LoadError
from modelmon.core.measuring.bounds import (
    Reading,
    direct_supported,
    fill_beside,
    fill_rate,
    fill_size,
    fill_threads,
    memcpy_mbps,
    plain_read,
)
from modelmon.core.measuring.ceiling_records import (
    CEILINGS,
    KEEPING_SHARE,
    Ceiling,
    Ceilings,
    fill_ceiling,
)
from modelmon.core.measuring.ceiling_records import make_ceiling as _ceiling
from modelmon.core.measuring.object_ceilings import object_ceilings
from modelmon.core.model.formats import require_tensor_bytes
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode, MiB
from modelmon.core.system.cache import prepare, prime_fresh_memory
from modelmon.core.system.io_throttle import ReadThrottle, read_throttle
from modelmon.core.system.memory import memory_facts
from modelmon.core.units import rate_text

# Runs of the sweep's best setting that its bound is the median of, however few the sweep's.
BOUND_RUNS = 3


def default_parallelism() -> int:
    return max(4, os.cpu_count() or 1)


def _cold_or_warm(
    paths: list[str],
    cache: CacheMode,
    cancel: threading.Event | None,
    arrays: int = 0,
    direct: bool = False,
) -> bool:
    """Put the files in ``cache`` and say whether it was verified. ``arrays``: the bytes of
    fresh memory the run fills besides the page cache (a plain read discards its bytes:
    none); ``direct``: its reads fill no page cache. Free memory is primed for both, the page
    cache too: a bound stands for loads that keep their bytes, whose page cache lands on their
    primed arrays' memory, so that it starts on memory the host backs as they do."""
    state = prepare(
        paths, cache, cancel, arrays=arrays, page_cache=not direct, prime_page_cache=True
    )
    return state.cold if cache == "cold" else state.warm


class _Plain:
    """Plain reads of one model, each from the cache state asked for; a reading of each
    setting kept, so that the sweep and the named ceilings share their runs."""

    def __init__(self, model: Model, cancel: threading.Event | None) -> None:
        self.paths = [f.path for f in model.files]
        self.nbytes = model.file_bytes
        self.cancel = cancel
        self.readings: dict[tuple[int, int, bool, str], list[Reading]] = {}
        self.walls: dict[tuple[int, int, bool, str], list[float]] = {}
        self.verified: dict[tuple[int, int, bool, str], list[bool]] = {}
        self.best: tuple[int, int, bool] | None = None  # the sweep's best setting, once swept

    def read(self, readers: int, request: int, direct: bool, cache: CacheMode) -> Reading:
        """One plain read of a setting from ``cache``, kept with the setting's others."""
        key = (readers, request, direct, cache)
        reading, ready, wall = self._once(readers, request, direct, cache)
        self.verified.setdefault(key, []).append(ready)
        self.readings.setdefault(key, []).append(reading)
        self.walls.setdefault(key, []).append(wall)
        return reading

    def _once(
        self, readers: int, request: int, direct: bool, cache: CacheMode, keep: bool = False
    ) -> tuple[Reading, bool, float]:
        """One plain read from ``cache`` (``keep``: into fresh memory, primed for it): the
        reading, whether the cache state was verified, and its wall time with the
        preparation."""
        if self.cancel is not None and self.cancel.is_set():
            raise LoadError("ceiling: cancelled")
        started = time.monotonic()
        arrays = self.nbytes if keep else 0
        ready = _cold_or_warm(self.paths, cache, self.cancel, arrays=arrays, direct=direct)
        try:
            reading = plain_read(self.paths, readers, request, direct=direct, keep=keep)
        except OSError as exc:
            raise LoadError(f"ceiling: plain read of {self.paths[0]} failed: {exc}") from None
        return reading, ready, time.monotonic() - started

    def named(
        self, name: str, readers: int, request: int, cache: CacheMode, repeats: int
    ) -> Ceiling:
        """``repeats`` runs of one setting at least (all the sweep made count) as ceiling
        ``name``."""
        key = (readers, request, False, cache)
        while len(self.readings.get(key, [])) < repeats:
            self.read(readers, request, False, cache)
        spec = (
            f"plain reader, {readers} thread(s), own descriptors, {request // MiB} MiB "
            f"reads, {cache}, discard"
        )
        # Every run the sweep made of it: its bound was judged on them all (``sweep``).
        runs = [r.mbps for r in self.readings[key]]
        verified = all(self.verified[key])
        walls = self.walls[key]
        if cache == "warm":  # from the page cache: no read passes the disk's throttle
            return _ceiling(name, runs, spec, verified, walls)
        return self._through_throttle(name, runs, spec, verified, walls)

    @functools.cached_property
    def throttle(self) -> ReadThrottle | None:
        """The cgroup's read throttle on the model's disk, looked for once, when a cold
        ceiling first needs it."""
        return read_throttle(self.paths[0]) if self.paths else None

    def _through_throttle(
        self,
        name: str,
        runs: list[float],
        spec: str,
        verified: bool,
        walls: Sequence[float] = (),
        curve: tuple[tuple[str, float], ...] = (),
    ) -> Ceiling:
        """A ceiling of cold reads, which passed the cgroup's throttle on the disk where one
        is (a container's I/O limit): its spec names it, and where it set the rate, so does
        its record, with the slice a load's reads may run ahead of it (a load above it then
        passed the throttle faster)."""
        throttle = self.throttle
        if throttle is None:
            return _ceiling(name, runs, spec, verified, walls, curve)
        median = statistics.median(runs)
        spec += f"; {throttle.words()}"
        if not throttle.binds(median):
            return _ceiling(name, runs, spec, verified, walls, curve)
        slack = throttle.slack(median, self.nbytes)
        return _ceiling(
            name, runs, spec, verified, walls, curve, throttle=throttle.words(), slack=slack
        )

    def sweep(self, parallel: int, repeats: int, named: Sequence[tuple[int, int]] = ()) -> Ceiling:
        """The best of a sweep of plain readers, cold, each setting read ``repeats`` times and
        judged on its median; ``named``: the (readers, request) of the named cold ceilings
        measured beside it, swept too, so that none of them reads faster than the bound."""
        # 1 MiB requests were never the sweep's best (a local disk: 1,695 MB/s against 8
        # readers' 2,049; FUSE: 577 against O_DIRECT's 638), and each setting costs a cold
        # preparation of seconds: the sweep is of readers.
        settings = [(1, 16 * MiB, False), (parallel, 16 * MiB, False)]
        settings.append((2 * parallel, 16 * MiB, False))
        if direct_supported(self.paths[0]):
            settings.append((parallel, 16 * MiB, True))
        for readers, request in named:
            if (readers, request, False) not in settings:
                settings.append((readers, request, False))
        # Judged on medians: one run of a setting can land a quarter under its median (a
        # local disk: 4 readers' first at 1,839 MB/s, their median 2,504), and a pick by
        # first runs then sits below a named ceiling of the same runs. Every setting once a
        # round, so that a drift of the storage falls on all of them alike.
        for done in range(repeats):
            for readers, request, direct in settings:
                if len(self.readings.get((readers, request, direct, "cold"), [])) <= done:
                    self.read(readers, request, direct, "cold")
        # The best of settings read fewer than BOUND_RUNS times each is their noise's maximum
        # as much as the storage's pace (FUSE varies ±11 % a run): the best is read to
        # BOUND_RUNS runs and judged on their median, until the best has them.
        runs_of = {s: self._runs(s, repeats) for s in settings}
        best = max(settings, key=lambda s: statistics.median(runs_of[s]))
        while len(runs_of[best]) < BOUND_RUNS:
            self.read(*best, "cold")
            runs_of[best] = self._runs(best, BOUND_RUNS)
            best = max(settings, key=lambda s: statistics.median(runs_of[s]))
        medians = {s: statistics.median(runs) for s, runs in runs_of.items()}
        verified = all(all(self.verified[(*s, "cold")][: len(runs_of[s])]) for s in settings)
        curve = tuple((self.readings[(*s, "cold")][0].setting, medians[s]) for s in settings)
        swept = "; ".join(f"{setting}: {rate_text(mbps)}" for setting, mbps in curve)
        each = (
            "one run of each setting"
            if repeats == 1
            else f"the median of each setting's {repeats} runs"
        )
        if len(runs_of[best]) > repeats:
            each += f", the best's of {len(runs_of[best])}"
        self.best = best
        setting = self.readings[(*best, "cold")][0].setting
        spec = f"plain reader, best of a sweep: {setting} (swept, {each}: {swept}), cold, discard"
        return self._through_throttle("storage", runs_of[best], spec, verified, curve=curve)

    def keeping(self, setting: tuple[int, int, bool], repeats: int) -> Ceiling | None:
        """``setting``'s plain reads keeping their bytes in fresh memory, cold; None where
        the model would take more than ``KEEPING_SHARE`` of usable memory."""
        if self.nbytes > KEEPING_SHARE * memory_facts().usable:
            return None
        done = [self._once(*setting, "cold", keep=True) for _ in range(repeats)]
        runs = [reading.mbps for reading, _, _ in done]
        verified = all(ready for _, ready, _ in done)
        walls = [wall for _, _, wall in done]
        spec = (
            f"plain reader, {done[0][0].setting}, own descriptors, bytes kept in fresh memory, cold"
        )
        return self._through_throttle("keeping_read", runs, spec, verified, walls)

    def _runs(self, setting: tuple[int, int, bool], most: int) -> list[float]:
        """The MB/s of up to ``most`` cold runs of ``setting``, in the order read."""
        return [r.mbps for r in self.readings[(*setting, "cold")][:most]]

    def fill(self, model: Model, parallel: int, repeats: int) -> Ceiling:
        """Fresh memory filled by threads alone (the bound), and by ``parallel`` threads while
        plain reads of the model run beside them, from a cold cache (which bound binds)."""
        size = fill_size(model.file_bytes)
        alone: list[float] = []
        beside: list[float] = []
        verified = True
        for _ in range(repeats):
            prime_fresh_memory(size, self.cancel)  # alone it reads no file: nothing to drop
            alone.append(fill_rate(size, fill_threads(parallel)))
            verified = _cold_or_warm(self.paths, "cold", self.cancel, arrays=size) and verified
            try:
                beside.append(
                    fill_beside(size, parallel, lambda: plain_read(self.paths, parallel, 16 * MiB))
                )
            except OSError as exc:
                raise LoadError(f"ceiling: plain read of {self.paths[0]} failed: {exc}") from None
        return fill_ceiling(alone, beside, size, parallel, "plain cold reads", verified)


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
    require_tensor_bytes(model)  # nothing to read: no bound to measure
    unknown = set(names) - set(CEILINGS)
    if unknown:
        raise ValueError(f"unknown ceiling {sorted(unknown)[0]!r}; known: {', '.join(CEILINGS)}")
    if any(file.remote is not None for file in model.files):
        return object_ceilings(model, names, repeats, cancel, on_ceiling)
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
            cold = [(plans[n][0], chunk) for n in names if n in plans and plans[n][1] == "cold"]
            ceiling = plain.sweep(parallel, repeats, cold)
        elif name == "memory_fill":
            ceiling = plain.fill(model, parallel, repeats)
        elif name == "keeping_read":
            found = plain.keeping(plain.best or (parallel, chunk, False), repeats)
            if found is None:
                continue
            ceiling = found
        else:
            readers, cache = plans[name]
            ceiling = plain.named(name, readers, chunk, cache, repeats)
        items.append(ceiling)
        if on_ceiling is not None:
            on_ceiling(ceiling)
    return Ceilings(model.path, tuple(sorted(items, key=lambda c: CEILINGS.index(c.name))))
