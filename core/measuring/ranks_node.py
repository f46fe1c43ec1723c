"""The node's memory over a ranks run: one memory cgroup holds every rank's processes (the
limit asked for, or one the size of the machine's memory, there only to measure), whose peak,
anonymous memory and page cache (shared memory included) are the node's; where no cgroup can
be made, the ranks' own peaks summed, said so."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ranks_records import NodeMemory
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.memory_cgroup import MemoryCgroup, limited
from modelmon.core.system.memory_limit import MemoryLimit, planned_only


@contextmanager
def node_cgroup(asked: int | None) -> Iterator[tuple[MemoryCgroup | None, list[str]]]:
    """One cgroup for every rank's processes, of the limit ``asked`` for or the machine's
    size; None where none can be made, with the notes that say so."""
    size = asked if asked is not None else memory_facts().total
    with limited(size) as found:
        notes = []
        if isinstance(found, str):
            if asked is not None:
                notes.append(planned_only(found, asked))
            notes.append(f"the node's memory is the ranks' own peaks summed: {found}")
        yield (found if isinstance(found, MemoryCgroup) else None), notes


def cgroup_memory(record: MemoryLimit, limit_asked: bool) -> NodeMemory:
    """The node's memory as its cgroup measured it (``record``, kept as the limit's record
    where a limit was asked for)."""
    return NodeMemory(
        record.peak_bytes,
        record.anon_peak_bytes,
        record.cache_peak_bytes,
        True,
        record if limit_asked else None,
        record.held_peak_bytes,
    )


def node_memory(
    node: MemoryCgroup | None, loads: Sequence[LoadResult], limit_asked: bool
) -> NodeMemory:
    """The node's memory: its cgroup's, or the peaks of ``loads``' workers summed."""
    if node is not None:
        return cgroup_memory(node.record(), limit_asked)
    summed = sum(w.peak_rss for load in loads for w in load.workers)
    return NodeMemory(summed, None, None, False, None)
