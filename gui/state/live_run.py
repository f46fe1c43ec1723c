"""The load (or watch) running now, as the window's frame tick sees it. Qt-free.

Each run's start brings a view of its reads (``LiveView`` of a load's ``ReadLog``, or a
watch's) and a feed of its metric series. The window ticks ``tick`` every TICK_S while a run
is live; each tick emits ``frame`` (the totals so far, and the reads new since the last
redraw when this tick redraws: plots redraw at the pacer's rate, the progress strip follows
every tick) and ``metrics`` when the sampler has something new. ``finish`` takes the final
update; ``ended`` says no more ticks come.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from modelmon.gui.state.events import Event
from modelmon.gui.state.live import AccessPoints, LiveUpdate
from modelmon.gui.state.metrics_live import MetricSnapshot
from modelmon.gui.state.pacing import FramePacer

TICK_S = 0.04


class ReadView(Protocol):
    workers_qt_free: bool

    def update(self, now_ns: int, final: bool = False) -> LiveUpdate: ...


class MetricPoll(Protocol):
    def poll(self, now_s: float | None = None) -> MetricSnapshot | None: ...


@dataclass(frozen=True, slots=True)
class Shown:
    """A run as the plots name it: its label ("A", "B", "W" for a watch), what the access
    pattern's title says ("run B · pair 2/3"), its spec; ``watched``: a watch, not a load."""

    label: str
    name: str
    spec: str
    watched: bool = False


@dataclass(frozen=True, slots=True)
class Frame:
    label: str
    update: LiveUpdate
    redraw: bool  # the plots redraw on this tick (the progress strip follows every tick)
    reads: AccessPoints  # new since the last redraw (empty when not redrawing)


class LiveRun:
    def __init__(self, tick_s: float = TICK_S) -> None:
        self.started = Event()  # Shown: a run begins; the window starts ticking
        self.frame = Event()  # Frame
        self.metrics = Event()  # MetricSnapshot
        self.ended = Event()  # (): no more ticks (the run ended, or the window closes)
        self.shown: Shown | None = None  # of the run live now
        self.view: ReadView | None = None
        self.feed: MetricPoll | None = None
        self.last_update: LiveUpdate | None = None  # the latest shown, of this or the last run
        self.workers_qt_free = True  # of the last run that ended
        self.pacer = FramePacer(tick_s)
        self._pending: list[AccessPoints] = []

    @property
    def active(self) -> bool:
        return self.view is not None

    def begin(self, shown: Shown, view: ReadView, feed: MetricPoll | None) -> None:
        self.shown, self.view, self.feed = shown, view, feed
        self.last_update = None
        self._pending = []
        self.started.emit(shown)

    def tick(self, now_ns: int | None = None) -> None:
        """The frame tick: what the running load did since the last one."""
        if self.view is not None:
            self._show(self.view.update(now_ns or time.perf_counter_ns()))
        if self.feed is not None:
            snapshot = self.feed.poll()
            if snapshot is not None:
                self.metrics.emit(snapshot)

    def _show(self, update: LiveUpdate, final: bool = False) -> None:
        self.last_update = update
        if len(update.new_reads):
            self._pending.append(update.new_reads)
        redraw = self.pacer.tick(time.monotonic()) or final
        reads = AccessPoints.empty()
        if redraw:
            reads, self._pending = AccessPoints.concat(self._pending), []
        label = self.shown.label if self.shown is not None else ""
        self.frame.emit(Frame(label, update, redraw, reads))

    def finish(self, final: MetricSnapshot | None) -> None:
        """The run ended: its last reads and its complete series (None: it has none)."""
        view = self.view
        self.stop()
        self.workers_qt_free = True
        if view is not None and final is not None:
            self._show(view.update(time.perf_counter_ns(), final=True), final=True)
            self.metrics.emit(final)
            self.workers_qt_free = view.workers_qt_free

    def stop(self) -> None:
        """No more ticks; let go of the live run (its read log may be large)."""
        live = self.view is not None
        self.pacer.pause()
        self.view = self.feed = None
        if live:
            self.ended.emit()
