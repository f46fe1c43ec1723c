"""What surrounds every measured run, whatever runs in it (modelmon's workers, its threads,
another program): one start gate signature and one envelope.

The envelope (``run_envelope``), for the whole run:
- the device's readahead for the run, where the configuration sets it, put back on every way
  out (``system.readahead.for_run``); every other run only shares the device's lock;
- the run announced to every other modelmon run on its devices (``system.device_use``), so
  that it names those that used them during its timed part (``overlapped``);
- this process's own peak memory over the run (``own_peak``): what modelmon's side took;
- where a memory limit is asked for, a memory cgroup of that size that the run's processes
  are moved into (``system.memory_cgroup``), removed on every way out; where none can be
  made, a setup note says so and the limit is only planned with.

The start gate (``StartGate``): once the run is ready to go and its files are in the cache
state asked for, it hears that state, measured, and says whether the run may start. It may
hold the run there (ranks and fleet nodes wait for each other at a barrier) or refuse (the
run then ends as cancelled, having read nothing).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from modelmon.core.system import device_use, readahead
from modelmon.core.system.cache import CacheState
from modelmon.core.system.memory_cgroup import MemoryCgroup, limited
from modelmon.core.system.memory_limit import planned_only
from modelmon.core.system.proc_status import own_peak_watch

StartGate = Callable[[CacheState], bool]


@dataclass
class RunEnvelope:
    """A run's envelope while it is open (see ``run_envelope``)."""

    setup_notes: list[str]  # what was done to the machine for the run (readahead set)
    activity: device_use.Activity
    own_peak: Callable[[], int | None]  # this process's peak RSS since the run began
    overlapped: tuple[str, ...] = field(default=())  # other runs on the devices while timed
    memory: MemoryCgroup | None = None  # the cgroup the run's processes go into, if any

    def timed_part_begins(self) -> None:
        """The run is told to go: other runs on its devices count from now."""
        self.activity.mark()

    def timed_part_ended(self) -> tuple[str, ...]:
        """The other modelmon runs that used the devices since the timed part began, in
        words (kept in ``overlapped``)."""
        self.overlapped = tuple(run.text() for run in self.activity.others())
        return self.overlapped


@contextlib.contextmanager
def run_envelope(
    paths: Iterable[str], readahead_kib: int | None, memory_limit: int | None = None
) -> Iterator[RunEnvelope]:
    """The envelope of one run over the files ``paths`` (ReadaheadError, before anything
    changed, where a readahead is asked for and cannot be set), under ``memory_limit`` bytes
    where one is given."""
    listed = list(paths)
    with (
        readahead.for_run(listed, readahead_kib) as notes,
        device_use.activity(readahead.device_names(listed)) as activity,
        own_peak_watch() as peak,
        limited(memory_limit) as memory,
    ):
        if isinstance(memory, str) and memory_limit is not None:
            notes = [*notes, planned_only(memory, memory_limit)]
        cgroup = memory if isinstance(memory, MemoryCgroup) else None
        yield RunEnvelope(notes, activity, peak, memory=cgroup)
