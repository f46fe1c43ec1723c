"""A session: one ``LoadRun`` watched by a sampler, everything kept as time series.

A session does not run the load itself: its ``LoadRun`` (``loading.runner``) does, in worker
processes, exactly as an unwatched measurement would. The session adds the watching: it
samples metrics every ``interval_s`` from the moment the workers are told to go until the
last one is done, and keeps every read (time, file offset, length, worker): the access
pattern. The GUI reads the live state (``sampler.series()``, ``load.reads``) on its own
timer; the CLI takes the final ``SessionResult``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from modelmon.core.configuration import StrategyConfig
from modelmon.core.loading.envelope import StartGate
from modelmon.core.loading.messages import WorkerDone
from modelmon.core.loading.reads import ReadLog
from modelmon.core.loading.result import BlockShareTiming, LoadResult, block_share_timings
from modelmon.core.loading.runner import LoadRun
from modelmon.core.metrics.base import MetricSpec, MonitorTarget
from modelmon.core.metrics.read_bins import load_mbps_over
from modelmon.core.metrics.sampler import Sampler
from modelmon.core.metrics.series import PLACEMENT, floats, series_document
from modelmon.core.model.formats import open_model
from modelmon.core.model.records import Model
from modelmon.core.options import LoadOptions
from modelmon.core.system.cache import CacheState

_NONE = np.empty(0, dtype=np.float64)


@dataclass(frozen=True)
class SessionResult:
    result: LoadResult
    interval_s: float
    specs: dict[str, MetricSpec]
    series: dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (seconds after t0, values)
    unavailable: dict[str, str]
    reads: dict[str, np.ndarray]  # access pattern: start/end (s), file, offset, length, worker
    block_workers: tuple[BlockShareTiming, ...] = ()
    residency_maps: tuple[tuple[float, dict[str, np.ndarray]], ...] = ()
    sampler_cpu_seconds: float = 0.0
    samples_taken: int = 0
    ceilings: dict[str, float] = field(default_factory=dict)
    # Each sample's interval (start, end seconds after t0): the series' rows, in order.
    spans: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (_NONE, _NONE))

    def to_dict(self, samples: bool = True) -> dict[str, Any]:
        data = self.result.to_dict()
        if not samples:
            return data
        data["samples"] = {
            "interval_s": self.interval_s,
            "samples_taken": self.samples_taken,
            "sampler_cpu_seconds": self.sampler_cpu_seconds,
            "unavailable": self.unavailable,
            "placement": PLACEMENT,
            "series": series_document(self.specs, self.series, self.spans),
            "access_pattern": {
                key: floats(column) if column.dtype.kind == "f" else column.tolist()
                for key, column in self.reads.items()
            },
            "block_workers": [asdict(b) for b in self.block_workers],
            "residency_maps": [
                {"t": t, "files": {p: floats(m) for p, m in maps.items()}}
                for t, maps in self.residency_maps
            ],
        }
        return data


class Session:
    """One monitored load. ``run()`` blocks; ``cancel()`` from any thread."""

    def __init__(
        self,
        model: Model | str | os.PathLike[str],
        strategy: str = "sequential",
        options: LoadOptions | None = None,
        *,
        interval_s: float = 0.1,
        sources: Sequence[str] | None = None,
        monitor: bool = True,
        on_message: Callable[[object], None] | None = None,
        cancel: threading.Event | None = None,
        memory_limit: int | None = None,
        start_gate: StartGate | None = None,
        time_limit_s: float | None = None,
        map_interval_s: float = 0.5,
    ) -> None:
        self.model = model if isinstance(model, Model) else open_model(model)
        self.start_gate = start_gate
        self.options = options or LoadOptions()
        self.interval_s = interval_s
        self._on_message = on_message
        self.load = LoadRun(
            self.model,
            strategy,
            self.options,
            on_message=self._message,
            on_start=self._begin_sampling,
            start_gate=self._prepare_sampling,
            cancel=cancel,
            memory_limit=memory_limit,
            time_limit_s=time_limit_s,
        )
        self.sampler: Sampler | None = None
        if monitor:
            load = self.load  # not self: no Session → sampler → target → Session cycle
            target = MonitorTarget(
                paths=tuple(load.paths),
                workers=self.options.workers,
                pids=load.worker_pids,
                loaded_bytes=lambda: load.loaded_bytes,
                memory_limit=memory_limit,
                memory_cgroup=lambda: load.memory_cgroup,
            )
            self.sampler = Sampler(
                target, interval_s=interval_s, sources=sources, map_interval_s=map_interval_s
            )

    def cancel(self) -> None:
        self.load.cancel()

    @property
    def config(self) -> StrategyConfig:
        return StrategyConfig(self.load.strategy, self.options)

    @property
    def t0_ns(self) -> int:
        """When the workers were told to go (0 before): the origin of its plots."""
        return self.load.t0_ns

    @property
    def load_started_ns(self) -> int:
        return self.load.t0_ns

    @property
    def loaded_bytes(self) -> int:
        return self.load.loaded_bytes

    @property
    def reads(self) -> ReadLog:
        return self.load.reads

    def _first_look_ns(self) -> int:
        """A run stopped before its workers went has no load start: its looks (the residency
        map taken before the go) are timed from the first, never from 0 (the clock's own
        origin, hours before)."""
        if self.sampler is None:
            return 0
        maps = [t for t, _ in self.sampler.residency_maps()]
        starts = self.sampler.sampled().starts
        return min([*maps, *(int(t) for t in starts[:1])], default=0)

    def _prepare_sampling(self, state: CacheState) -> bool:
        """Once the workers are ready and the cache is prepared: the sampler's baselines
        (rates, the first residency map), so none of that work delays the first sample of the
        load; then the caller's gate, if any."""
        if self.sampler is not None:
            self.sampler.prepare()
        return self.start_gate is None or self.start_gate(state)

    def _begin_sampling(self, _: LoadRun) -> None:
        if self.sampler is not None:
            self.sampler.begin()

    def _message(self, message: object) -> None:
        """The last worker done ends the load: the sampler's final sample is taken then, not
        once the workers are stopped and the result assembled, so no sample reaches past the
        load by more than the sampler's reaction."""
        if (
            self.sampler is not None
            and isinstance(message, WorkerDone)
            and len(self.load.done) == self.options.workers
        ):
            self.sampler.finish()
        if self._on_message is not None:
            self._on_message(message)

    def run(self) -> SessionResult:
        try:
            result = self.load.run()
        finally:
            if self.sampler is not None:
                self.sampler.stop()
            # The run held a bound method of ours: drop it, or the session's buffers (tens of
            # MB of ring buffers) wait for the cyclic garbage collector instead of going now.
            self.load.on_start = self.load.start_gate = self.load.on_message = None
        return self._assemble(result)

    def _assemble(self, result: LoadResult) -> SessionResult:
        t0 = self.load.t0_ns or self._first_look_ns()
        columns = self.load.reads.columns()
        reads = {
            "start": (columns["start"] - t0) / 1e9,
            "end": (columns["end"] - t0) / 1e9,
            "file": columns["file"],
            "offset": columns["offset"],
            "length": columns["length"],
            "worker": columns["worker"],
            "prefetch": columns["prefetch"],
            # Which reader thread read it through which open file description: how the
            # readers shared descriptors, for a run's plots drawn again from what it kept.
            "reader": columns["reader"],
            "descriptor": columns["descriptor"],
        }
        block_workers = tuple(block_share_timings(self.model, columns, t0))
        sampler = self.sampler
        if sampler is None:
            return SessionResult(result, self.interval_s, {}, {}, {}, reads, block_workers)
        sampled = sampler.sampled()
        series = {
            name: ((t - t0) / 1e9, v) for name, (t, v) in sampled.placed(sampler.over).items()
        }
        spans = ((sampled.starts - t0) / 1e9, (sampled.ends - t0) / 1e9)
        if "load_mbps" in series:  # by the reads' own times, not as their reports arrived
            series["load_mbps"] = (series["load_mbps"][0], load_mbps_over(reads, *spans))
        maps = tuple(((t - t0) / 1e9, files) for t, files in sampler.residency_maps())
        return SessionResult(
            result,
            self.interval_s,
            dict(sampler.specs),
            series,
            dict(sampler.unavailable),
            reads,
            block_workers,
            maps,
            sampler.cpu_seconds,
            sampler.samples_taken,
            spans=spans,
        )
