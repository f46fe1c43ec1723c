"""A fleet whose nodes each run N ranks (``fleet load|bench --ranks N --ranks-mode MODE``):
what a node's ranks did, in a record small enough to travel back with its row, and how the
report tells it.

Each node runs ``RanksRun`` (the same barrier, cache and node cgroup as ``load --ranks``),
its start gate the fleet's barrier: the node's ranks all go when every node's are ready. A
node's time is its slowest rank's (the server's, on that node), its rate the model's bytes
over it; its bytes are what every reader of the node read, in all; its memory the node's
cgroup's. Across the fleet, the slowest node is the one whose slowest rank ended last.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core import (
    CacheState,
    Configuration,
    Model,
    RanksResult,
    RanksRun,
    ReadStats,
    StrategyConfig,
)
from modelmon.core.errors import OptionsError
from modelmon.core.output import human_bytes, limit_text, ram_text
from modelmon.core.system import MemoryLimit

CSV_FIELDS = (
    "ranks",
    "ranks_mode",
    "slowest_rank",
    "node_peak_bytes",
    "node_held_peak_bytes",
    "memory_limit",
    "oom_kills",
)


@dataclass(frozen=True, slots=True)
class NodeRanks:
    """A node's N ranks in one round."""

    ranks: int
    mode: str
    model_bytes: int
    read_bytes: int  # every reader of the node, in all (a one-reader's reader only)
    rank_seconds: tuple[float | None, ...]  # each rank's end after the first go; None: not ok
    peak_bytes: int | None  # the node's memory: its cgroup's, or its ranks' peaks summed
    anon_peak_bytes: int | None
    cache_peak_bytes: int | None  # page cache and shared memory (a one-reader's copy)
    held_peak_bytes: int | None  # anonymous and shared memory at once: what no reclaim frees
    measured: bool  # one cgroup held every rank (else: their own peaks, summed)
    reads: tuple[ReadStats, ...] = ()  # each load's requests to object storage
    notes: tuple[str, ...] = ()
    memory_limit: int | None = None  # the limit asked for the node's ranks together
    limit: MemoryLimit | None = None  # its cgroup's record: None where none could be made

    @classmethod
    def of(cls, result: RanksResult, limit: int | None = None) -> NodeRanks:
        """``limit``: the memory limit the node's ranks were asked to run under."""
        node = result.node
        loads = [r.result for r in result.ranks if r.result is not None]
        loads += [result.reader] if result.reader is not None else []
        return cls(
            ranks=len(result.ranks),
            mode=result.mode,
            model_bytes=result.model_bytes,
            read_bytes=result.read_bytes,
            rank_seconds=tuple(r.end if r.status == "ok" else None for r in result.ranks),
            peak_bytes=node.peak_bytes if node is not None else None,
            anon_peak_bytes=node.anon_peak_bytes if node is not None else None,
            cache_peak_bytes=node.cache_peak_bytes if node is not None else None,
            held_peak_bytes=node.held_peak_bytes if node is not None else None,
            measured=node is not None and node.measured,
            reads=tuple(load.object_reads for load in loads if load.object_reads is not None),
            notes=result.notes,
            memory_limit=limit,
            limit=node.limit if node is not None else None,
        )

    @property
    def slowest_rank(self) -> int | None:
        """The rank whose end came last (the node's time), among those that loaded."""
        ended = [(s, rank) for rank, s in enumerate(self.rank_seconds) if s is not None]
        return max(ended)[1] if ended else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["reads"]  # summed as the run's and the node's requests
        data["rank_seconds"] = list(self.rank_seconds)
        data["notes"] = list(self.notes)
        data["slowest_rank"] = self.slowest_rank
        data["limit"] = self.limit.to_dict() if self.limit is not None else None
        return data

    @property
    def oom_kills(self) -> int | None:
        """The OOM kills in the node's limited cgroup; None without one."""
        return self.limit.oom_kills if self.limit is not None else None


def ranks_run(
    model: Model,
    config: Configuration,
    ranks: tuple[int, str],
    gate: Callable[[CacheState], bool],
    memory_limit: int | None = None,
) -> RanksRun:
    """The node's N ranks of ``config`` (a strategy's: the driver refused a program), their
    go the fleet's barrier (``gate``), all in one cgroup of ``memory_limit`` where given
    (else of the node's size: its memory is measured all the same)."""
    if not isinstance(config, StrategyConfig):
        raise OptionsError(f"{config.spec}: a program runs its own processes, not N ranks")
    count, mode = ranks
    return RanksRun(
        model, config.strategy, config.options, count, mode,  # type: ignore[arg-type]
        start_gate=gate, memory_limit=memory_limit,
    )  # fmt: skip


def row_fields(result: RanksResult, limit: int | None = None) -> dict[str, Any]:
    """A node's row's figures from its ranks: what every reader read, the slowest rank's
    time, the largest peak RSS of one worker of any rank (or the reader), the ranks (run
    under the memory limit ``limit``, where one was asked)."""
    loads = [r.result for r in result.ranks if r.result is not None]
    loads += [result.reader] if result.reader is not None else []
    return {
        "bytes": result.read_bytes,
        "seconds": result.seconds,
        "peak_rss": max((w.peak_rss for load in loads for w in load.workers), default=0),
        "cache": result.cache,
        "ranks": NodeRanks.of(result, limit),
    }


def _most(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def side_figures(ranks: Sequence[NodeRanks]) -> dict[str, Any]:
    """A node's ranks over its good runs of one side: the node's memory at its highest, what
    it read (the median of its runs)."""
    return {
        "node_peak_bytes": _most(r.peak_bytes for r in ranks),
        "node_held_peak_bytes": _most(r.held_peak_bytes for r in ranks),
        "read_bytes": int(statistics.median(r.read_bytes for r in ranks)) if ranks else None,
    }


def csv_columns(ranks: NodeRanks | None, requests: Mapping[str, Any] | None) -> dict[str, Any]:
    """A CSV row's ranks columns; a ranks run's requests are its ranks' in all."""
    if ranks is None:
        return dict.fromkeys(CSV_FIELDS, "")
    columns = {
        "ranks": ranks.ranks,
        "ranks_mode": ranks.mode,
        "slowest_rank": "" if ranks.slowest_rank is None else ranks.slowest_rank,
        "node_peak_bytes": "" if ranks.peak_bytes is None else ranks.peak_bytes,
        "node_held_peak_bytes": "" if ranks.held_peak_bytes is None else ranks.held_peak_bytes,
        "memory_limit": "" if ranks.memory_limit is None else ranks.memory_limit,
        "oom_kills": "" if ranks.oom_kills is None else ranks.oom_kills,
    }
    if requests is not None:
        columns |= {name: requests[name] for name in ("gets", "throttles", "retries")}
        for name in ("ttfb_median_s", "ttfb_p99_s"):
            value = requests[name]
            columns[name] = "" if value is None else f"{value:.6f}"
    return columns


def node_text(figures: Mapping[str, Any], model_bytes: int) -> str:
    """ "node peak 277 MiB (4.3×), held 260 MiB (4.0×), read 272 MB": memory binary, data
    decimal, as everywhere else."""

    def of_model(count: int | None) -> str:
        if count is None:
            return "–"
        return f"{ram_text(count)} ({count / max(1, model_bytes):.1f}×)"

    read = figures["read_bytes"]
    return (
        f"node peak {of_model(figures['node_peak_bytes'])}, "
        f"held {of_model(figures['node_held_peak_bytes'])}, "
        f"read {human_bytes(read) if read is not None else '–'}"
    )


def limit_figures(ranks: Sequence[NodeRanks]) -> dict[str, Any]:
    """A side's memory limit on every node (None: none asked) and the OOM kills its nodes'
    cgroups saw in all (None where no node's cgroup was limited)."""
    kills = [r.oom_kills for r in ranks if r.oom_kills is not None]
    return {
        "memory_limit": next((r.memory_limit for r in ranks if r.memory_limit), None),
        "oom_kills": sum(kills) if kills else None,
    }


def side_lines(ranks: Sequence[NodeRanks]) -> list[str]:
    """Under a side's nodes: the limit they ran under, then each note of theirs once."""
    lines = []
    figures = limit_figures(ranks)
    if figures["memory_limit"] is not None:
        limited = sum(1 for r in ranks if r.limit is not None)
        kills = figures["oom_kills"]
        lines.append(
            f"  each node's ranks in one {limit_text(figures['memory_limit'])} cgroup "
            f"({limited} of {len(ranks)} nodes could make one); OOM kills: {kills or 0}"
        )
    notes = dict.fromkeys(note for r in ranks for note in r.notes)
    lines += [f"  note: {note}" for note in notes]
    return lines
