"""What each process of a watched tree reads of the model through its mappings, followed
every ``PERIOD_S``: a rank that maps a shard, copies it out and unmaps it within a fraction of
a second would fall between two of the watch's looks.

A process's file-backed resident memory (``/proc/PID/statm``: shared pages, which are the
file pages it maps) rises as it faults the model's pages in and drops when it unmaps them.
Its rises while it maps a model file are what it read that way: an unmap's drop is no rise,
so shards mapped one after another add up; and where the drop is larger than what the rises
counted, it held that much at the unmap (pages faulted since the last sample). Whether it
maps a model file is asked of its ``/proc/PID/maps`` only when its file pages move by
``MOVE_BYTES`` (a search, not a parse): a library loading moves them too, and is told apart
by that search.

The kernel's fault-around maps up to 64 KiB of pages already cached around a fault: a rank
that reads a slice is counted with up to that much on each side of it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core.loading.reads import now_ns
from modelmon.core.metrics.procfs import PAGE_SIZE
from modelmon.core.watching.openings import mapped_length
from modelmon.core.watching.rank_evidence import Evidence

PERIOD_S = 0.025
MOVE_BYTES = 1 << 20  # file pages moved this much: is it the model's mapping?
CPU_SHARE = 0.02  # of one core, at most: the samples are spaced by their cost beyond it


@dataclass
class _Mapped:
    """One process's mapped reading so far."""

    file_rss: int  # at the last sample
    unmapped_at: int  # its file pages when last known not to map the model
    mapping: bool = False
    segment: int = 0  # what the rises counted of the mapping under way


class MappedReads:
    """A thread that samples the tree's processes' file pages while the watch runs.
    ``members`` gives the live pids and ``paths`` the model files' (both asked under
    ``lock``); from ``ended`` on, nothing is counted."""

    def __init__(
        self,
        evidence: Evidence,
        lock: threading.Lock,
        members: Callable[[], list[int]],
        paths: Callable[[], list[str]],
        ended: Callable[[], bool],
    ) -> None:
        self._evidence, self._lock = evidence, lock
        self._members, self._paths, self._ended = members, paths, ended
        self._state: dict[int, _Mapped] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="modelmon-mapped-reads", daemon=True)
        self.cpu_ns = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        wait = PERIOD_S
        while not self._stop.wait(wait):
            started = time.thread_time_ns()
            self.sample()
            cost = time.thread_time_ns() - started
            self.cpu_ns += cost
            wait = max(PERIOD_S, cost / 1e9 / CPU_SHARE)

    def sample(self) -> None:
        with self._lock:
            if self._ended():  # a stopped program's teardown unmaps: no reading
                return
            pids, paths = self._members(), [os.fsencode(p) for p in self._paths()]
        now = now_ns()
        for pid in pids:
            file_rss = _file_pages(pid)
            if file_rss is None:
                continue
            state = self._state.get(pid)
            if state is None:  # what it maps when first seen was not read under the watch
                self._state[pid] = _Mapped(file_rss, file_rss)
                continue
            read = self._follow(pid, state, file_rss, paths)
            if read:
                with self._lock:
                    process = self._evidence.process(pid, now)
                    process.mapped_rises += read
                    process.note(now)

    def _follow(self, pid: int, state: _Mapped, file_rss: int, paths: list[bytes]) -> int:
        """What ``pid`` read through mappings of the model since the last sample."""
        change, state.file_rss = file_rss - state.file_rss, file_rss
        if state.mapping and change >= 0:
            state.segment += change
            return change
        if abs(change) < MOVE_BYTES:
            if not state.mapping:
                state.unmapped_at = file_rss
            return 0
        maps = mapped_length(pid, paths) if paths else 0
        if maps is None:
            return 0
        if not state.mapping:
            if maps:  # mapped since the last sample: its pages rose from when it did not
                state.mapping = True
                state.segment = max(0, file_rss - state.unmapped_at)
                return state.segment
            state.unmapped_at = file_rss
            return 0
        # Its file pages dropped while it mapped the model: an unmap held -change.
        read = max(0, -change - state.segment)
        state.segment = 0
        if not maps:
            state.mapping, state.unmapped_at = False, file_rss
        return read


def _file_pages(pid: int) -> int | None:
    """File-backed resident bytes of ``pid`` (statm's shared pages); None when gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as statm:
            fields = statm.read().split()
        return int(fields[2]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None
