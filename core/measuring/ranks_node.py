"""The node's memory over a ranks run: what each way's weights hold at least
(``weights_bytes``), and what it held: one memory cgroup holds every rank's processes (the
limit asked for, or one the size of the machine's memory, there only to measure), whose
peak, anonymous memory and page cache (shared memory included) are the node's; where no
cgroup can be made, the ranks' own peaks summed, said so."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from modelmon.core.loading.result import LoadResult
from modelmon.core.measuring.ranks_records import NodeMemory, RanksMode
from modelmon.core.model.records import Model
from modelmon.core.model.tensor_parallel import kept_bytes, tp_slice
from modelmon.core.system.memory import memory_facts
from modelmon.core.system.memory_cgroup import MemoryCgroup, limited
from modelmon.core.system.memory_limit import MemoryLimit, planned_only, ram_text


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


def weights_bytes(model: Model, ranks: int, mode: RanksMode) -> int:
    """What ``ranks`` ranks loading ``model`` in ``mode`` hold of its weights at once, at
    least: N copies, their parts (a strided tensor read whole, one at a time), one copy."""
    if mode == "whole":
        return ranks * model.total_bytes
    if mode == "one-reader":
        return model.total_bytes
    total = 0
    for rank in range(ranks):
        part, kept = tp_slice(model, rank, ranks)
        staged = max((e.length for e in part.extents if e.name in kept), default=0)
        total += kept_bytes(part, kept) + staged
    return total


def needs_why(mode: RanksMode, ranks: int, model: Model) -> str:
    """What ``weights_bytes`` is made of, in words (the processes hold more beside)."""
    if mode == "whole":
        return f"{ranks} copies of the model's {ram_text(model.total_bytes)}"
    if mode == "one-reader":
        return f"one copy of the model's {ram_text(model.total_bytes)}"
    return f"each rank's part of the model's {ram_text(model.total_bytes)}"
