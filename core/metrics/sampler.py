"""The sampler: one thread that asks every source for its values at a fixed rate.

Sample times sit on absolute deadlines, t0 + k·interval, so they never drift; a sample that
overruns its slot makes the sampler skip the slots it missed rather than catch up in a
burst. Time stamps are ``time.perf_counter_ns()`` (CLOCK_MONOTONIC), the clock the workers
stamp their events with, so series and the access pattern share one time axis.

A sample belongs to the interval it covers: each row records (previous sample, this sample],
the first from ``begin()`` (the rates' baselines are taken again then, so no rate reaches back
before the load), the last ending at ``finish()``. A rate is placed at its interval's middle,
a level (memory, residency) at the moment it was read (``MetricSpec.over``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from modelmon.core.errors import OptionsError
from modelmon.core.limits import MAX_INTERVAL_S, MIN_INTERVAL_S, check_number
from modelmon.core.metrics import SOURCES
from modelmon.core.metrics.base import (
    NAN,
    FailureLog,
    MetricSpec,
    MonitorTarget,
    Source,
    describe_error,
)
from modelmon.core.metrics.residency import ResidencySource
from modelmon.core.metrics.residency_rounds import ResidencyRounds
from modelmon.core.metrics.series import RingTable, Sampled, merged

JOIN_TIMEOUT_S = 2.0


def next_slot(t0_ns: int, interval_ns: int, now_ns: int, slot: int) -> int:
    """The first slot after ``slot`` whose deadline t0 + k·interval is still ahead of now.

    On time, that is ``slot + 1``; after an overrun the missed slots are skipped.
    """
    return max(slot + 1, (now_ns - t0_ns) // interval_ns + 1)


@dataclass
class _Running:
    source: Source
    series: list[str]  # names of its specs
    log: FailureLog = field(init=False)  # of sample() as a whole
    nanoseconds: int = 0  # CPU time (of the sampler thread) spent in its sample()

    def __post_init__(self) -> None:
        self.log = FailureLog(self.source.name)


class Sampler:
    """Samples ``available`` sources (all, or those named) every ``interval_s`` in a thread.

    ``specs`` holds the series of the sources that can measure here; ``unavailable`` says
    why the others cannot, and also names a source that failed on every sample (its series
    stay, as gaps). Everything public is safe to read from any thread while it runs.
    """

    def __init__(
        self,
        target: MonitorTarget,
        interval_s: float = 0.1,
        sources: Sequence[str] | None = None,
        map_interval_s: float = 0.5,
        map_bins: int = 256,
        capacity: int = 36_000,
        available: Sequence[type[Source]] | None = None,  # None: every source in SOURCES
    ) -> None:
        available = SOURCES if available is None else available
        by_name = {source.name: source for source in available}
        if len(by_name) < len(available):  # a programming error, not a condition of this machine
            raise ValueError(f"two metric sources share a name: {[s.name for s in available]}")
        check_number("the sampling interval", interval_s, MIN_INTERVAL_S, MAX_INTERVAL_S, "s")
        if map_bins < 1:
            raise OptionsError(f"a residency map needs at least one bin, not {map_bins}")
        names = list(by_name) if sources is None else list(dict.fromkeys(sources))
        unknown = [name for name in names if name not in by_name]
        if unknown:
            raise OptionsError(
                f"unknown metric source {unknown[0]!r}: choose from {', '.join(by_name)}"
            )
        self.target = target
        self.interval_s = interval_s
        self.specs: dict[str, MetricSpec] = {}
        self._unavailable: dict[str, str] = {}
        self._running: list[_Running] = []
        for name in names:
            self._add(name, by_name[name])
        self._lock = threading.Lock()  # guards _unavailable, the rounds' maps and the counters
        self._residency = next(
            (r.source for r in self._running if isinstance(r.source, ResidencySource)), None
        )
        self._residency_rounds = ResidencyRounds(
            self._residency,
            len(target.paths),
            map_interval_s,
            map_bins,
            self._lock,
            target.residency_maps,
        )
        # Residency rounds run where maps can be taken: a residency source, or the target's.
        self._rounds = self._residency_rounds.maps_of is not None
        self._table = RingTable(list(self.specs), capacity)
        self._over = {name: spec.over for name, spec in self.specs.items()}
        self._kinds = [spec.over for spec in self.specs.values()]  # in the table's order
        self._last_row_round = False  # the newest row holds a residency round's fraction
        self._stop = threading.Event()
        self._prepared = threading.Event()  # the baselines are taken (or the thread ended)
        self._begin = threading.Event()  # the load started: sample from now on
        self._thread: threading.Thread | None = None
        self._closed = False
        self._cpu_seconds = 0.0
        self._sampling = (0.0, 0.0)  # (CPU, wall) seconds of the regular samples
        self._samples_taken = 0
        self._rounds_recorded = 0  # residency rounds whose fraction is in the series

    def _add(self, name: str, source_class: type[Source]) -> None:
        try:
            source = source_class(self.target)
        except Exception as error:
            self._unavailable[name] = f"could not start: {describe_error(error)}"
            return
        try:
            reason = source.unavailable()
            specs = [] if reason else source.specs()
        except Exception as error:
            reason = f"could not start: {describe_error(error)}"
        if reason:
            self._unavailable[name] = reason
            source.close()
            return
        clash = [spec.name for spec in specs if spec.name in self.specs]
        if clash:  # a programming error in a source, not a condition of this machine
            raise ValueError(f"metric source {name!r} redeclares series {clash}")
        self.specs.update((spec.name, spec) for spec in specs)
        self._running.append(_Running(source, [spec.name for spec in specs]))

    # --- what other threads read -------------------------------------------------------------

    @property
    def unavailable(self) -> dict[str, str]:
        """Source name -> why it gives nothing (a copy)."""
        with self._lock:
            return dict(self._unavailable)

    @property
    def cpu_seconds(self) -> float:
        """CPU time the sampler thread has used (``time.thread_time`` inside it)."""
        with self._lock:
            return self._cpu_seconds

    @property
    def sampling_cpu_share(self) -> float:
        """Share of one core the thread used from ``begin`` to ``stop``: the regular samples
        and rounds that run beside the load, not the baselines before it nor the final sample
        after it. NaN before the sampling ended."""
        with self._lock:
            cpu, wall = self._sampling
        return cpu / wall if wall > 0 else float("nan")

    @property
    def samples_taken(self) -> int:
        with self._lock:
            return self._samples_taken

    @property
    def rounds_recorded(self) -> int:
        """Residency rounds whose measured fraction is in the series (regular rounds, and
        the final one when it came with the final sample)."""
        with self._lock:
            return self._rounds_recorded

    @property
    def source_seconds(self) -> dict[str, float]:
        """CPU time spent in each source's ``sample()`` so far, and in the residency maps."""
        with self._lock:
            spent = {r.source.name: r.nanoseconds / 1e9 for r in self._running}
            if self._residency_rounds.maps or self._residency_rounds.seconds:
                spent["residency maps"] = self._residency_rounds.seconds
            return spent

    def series(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Series name -> (t_ns, values), copies in time order: a series over intervals
        placed at each interval's middle, an instant series when it was measured."""
        return self._table.sampled().placed(self._over)

    def sampled(self) -> Sampled:
        """Every sample so far: the interval each covers, and the values (copies)."""
        return self._table.sampled()

    @property
    def over(self) -> dict[str, str]:
        """Series name -> INTERVAL or INSTANT (``MetricSpec.over``)."""
        return dict(self._over)

    def residency_maps(self) -> list[tuple[int, dict[str, np.ndarray]]]:
        """(t_ns, {path: resident fraction per bin}) at the map rate; the arrays are read-only."""
        with self._lock:
            return list(self._residency_rounds.maps)

    @property
    def map_interval_s(self) -> float:
        """Between residency maps (0 or less: no maps, the fraction still measured); doubled
        each time the maps are thinned out. Set before ``prepare`` to change it."""
        return self._residency_rounds.interval_s

    @map_interval_s.setter
    def map_interval_s(self, seconds: float) -> None:
        self._residency_rounds.interval_s = seconds

    # --- control -----------------------------------------------------------------------------

    def start(self) -> None:
        """Take the baselines and start sampling at once."""
        self.prepare()
        self.begin()

    def prepare(self) -> None:
        """Start the thread and return once it has taken its baselines (not recorded: the
        rates' previous values, the first residency map); sampling waits for ``begin``."""
        if self._thread is not None or self._stop.is_set():
            raise RuntimeError("a Sampler runs once: make a new one")
        self._thread = threading.Thread(target=self._run, name="modelmon-sampler", daemon=False)
        self._thread.start()
        self._prepared.wait()

    def begin(self) -> None:
        """Sample from now on, every ``interval_s`` counted from this moment."""
        self._begin.set()

    def finish(self) -> None:
        """End the sampling now (the load is done): the thread takes its final sample at
        once, covering the time since the one before. Returns without waiting for it."""
        self._stop.set()

    def stop(self) -> None:
        """Stop, take a final sample, and join the thread. Safe to call more than once, and
        without ``start()`` (the sources are closed then)."""
        self._stop.set()
        if self._thread is None:
            self._close()
            return
        self._thread.join(JOIN_TIMEOUT_S)

    def __enter__(self) -> Sampler:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    # --- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        cpu_start = time.thread_time()
        interval_ns = max(1, round(self.interval_s * 1e9))
        try:
            baseline = time.perf_counter_ns()
            # Baselines for every rate, not recorded: the first recorded sample, one interval
            # after begin(), has all its rates defined. The first residency map is the
            # starting state. Both happen before the load starts (prepare), so their cost
            # never delays the first sample.
            self._sample(baseline, record=False)
            next_round = self._residency_rounds.collect(baseline, baseline)
            self._prepared.set()
            while not self._begin.wait(0.05):
                if self._stop.is_set():
                    return
            # The rates' baselines again: the first sample covers the load from its start,
            # not the cache preparation before it.
            t0 = last = time.perf_counter_ns()
            self._sample(t0, record=False)
            cpu_begin = time.thread_time()
            slot = 1
            while not self._stop.wait(
                max(0.0, (t0 + slot * interval_ns - time.perf_counter_ns()) / 1e9)
            ):
                now = time.perf_counter_ns()
                round_due = self._rounds and now >= next_round
                if self._residency is not None:
                    self._residency.due = round_due
                self._sample(now, start_ns=last)
                last = now
                self._last_row_round = round_due and self._residency is not None
                if round_due:
                    next_round = self._residency_rounds.collect(last, next_round)
                    if self._residency is not None:  # its fraction is in the row
                        self._count_round()
                self._account(cpu_start)
                slot = next_slot(t0, interval_ns, time.perf_counter_ns(), slot)
            now = time.perf_counter_ns()
            with self._lock:
                self._sampling = (time.thread_time() - cpu_begin, (now - t0) / 1e9)
            # The final sample covers the time since the last one, up to the end. Right after
            # a regular sample its rates would be over a few ms (noise): then it is folded
            # into that sample, which then covers both intervals and ends at the end.
            fold = self._samples_taken > 0 and now - last < interval_ns // 4
            replaced_round = fold and self._last_row_round
            # The state it ended in: measured again unless a round was just taken (and then
            # always when the row that held that round is being replaced).
            final_round = self._residency_rounds.last_ns is not None and (
                fold or now - self._residency_rounds.last_ns >= interval_ns // 4
            )
            if self._residency is not None:
                self._residency.due = final_round
            self._sample(now, start_ns=last, fold=fold)
            if final_round:
                self._residency_rounds.collect(now, now)
                if not replaced_round and self._residency is not None:
                    self._count_round()
        finally:
            self._prepared.set()  # never leave prepare() waiting on a thread that ended
            self._close()
            self._account(cpu_start)
            self._report_failures(at_least=1)

    def _sample(
        self, now_ns: int, record: bool = True, start_ns: int | None = None, fold: bool = False
    ) -> None:
        """Read every source at ``now_ns``; ``record``: as the row for (start_ns, now_ns],
        or, with ``fold``, merged into the newest row."""
        table_row: list[float] = []  # the sources' rows end to end: the order of self.specs
        for running in self._running:
            started = time.thread_time_ns()
            try:
                values = running.source.sample(now_ns)
                row = [float(values.get(name, NAN)) for name in running.series]
                running.log.ok()
            except Exception as error:  # psutil denial, a vanished file, a field this OS lacks
                running.log.failed(error)
                row = [NAN] * len(running.series)
            running.nanoseconds += time.thread_time_ns() - started
            table_row += row
        if not record:
            return
        start = now_ns if start_ns is None else start_ns
        previous = self._table.last() if fold else None
        if previous is not None:
            start, end, row = merged(previous, (start, now_ns, table_row), self._kinds)
            self._table.replace_last(end, row, start)
        else:
            self._table.append(now_ns, table_row, start)
            with self._lock:
                self._samples_taken += 1
        self._report_failures()

    def _count_round(self) -> None:
        with self._lock:
            self._rounds_recorded += 1

    def _report_failures(self, at_least: int | None = None) -> None:
        """Name, once, each source that has failed on every sample so far."""
        for running in self._running:
            name = running.source.name
            if name in self._unavailable:
                continue
            if at_least is None:
                reason = running.log.reason() or running.source.failing()
            else:
                reason = running.log.reason(at_least) or running.source.failing(at_least)
            if reason:
                with self._lock:
                    self._unavailable[name] = reason

    def _account(self, cpu_start: float) -> None:
        with self._lock:
            self._cpu_seconds = time.thread_time() - cpu_start

    def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for running in self._running:
            try:
                running.source.close()
            except Exception:  # closing must not hide why the run ended
                continue
