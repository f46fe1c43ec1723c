"""Live system metrics while a load runs, sampled in the parent process; Qt-free.

One small class per metric source, listed in ``SOURCES`` as s-tui lists its sources, and a
``Sampler`` (``metrics.sampler``) that asks each for its values every interval from one
thread. The list is the whole registry: a new source is written, then added here.
"""

from __future__ import annotations

from modelmon.core.metrics.base import Source
from modelmon.core.metrics.cgroup_memory import CgroupMemorySource
from modelmon.core.metrics.cpu import CpuSource
from modelmon.core.metrics.device import DeviceSource
from modelmon.core.metrics.memory import MemorySource
from modelmon.core.metrics.residency import ResidencySource
from modelmon.core.metrics.throughput import LoadThroughputSource
from modelmon.core.metrics.worker_io import WorkerIoSource

# In listing order: what the load does, what the disk does, then CPU, memory, IO, cache, and
# the run's memory cgroup under a memory limit.
SOURCES: tuple[type[Source], ...] = (
    LoadThroughputSource,
    DeviceSource,
    CpuSource,
    MemorySource,
    WorkerIoSource,
    ResidencySource,
    CgroupMemorySource,
)

__all__ = ["SOURCES"]
