"""An A/B of N ranks a side: A's N ranks, then B's, ``n`` pairs (``ab_run.alternate``), each
a ``RanksRun`` of its side's mode and strategy from the same verified cache state. The figure
compared is the server's: the slowest rank's time (``RanksResult.mbps``, the model's bytes
over it), judged as any A/B's pairs are (``ab_run.judged``); beside it, each side's node
memory, measured in one cgroup per run (under ``memory_limit``, that limit's).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.configuration import StrategyConfig
from modelmon.core.errors import OptionsError
from modelmon.core.limits import MAX_AB_PAIRS, check_whole
from modelmon.core.measuring.ab import SideSummary, Verdict, side_summary
from modelmon.core.measuring.ab_run import alternate, judged
from modelmon.core.measuring.ranks import RanksRun
from modelmon.core.measuring.ranks_checks import check_ranks
from modelmon.core.measuring.ranks_records import NodeMemory, RanksMode, RanksResult
from modelmon.core.model.records import Model
from modelmon.core.options import CacheMode


@dataclass(frozen=True, slots=True)
class RanksSide:
    """One side of a ranks A/B: how its ranks get their weights, and with what."""

    mode: RanksMode
    config: StrategyConfig

    @property
    def spec(self) -> str:
        return self.config.spec


@dataclass(frozen=True, slots=True)
class RanksAB:
    ranks: int
    a: SideSummary  # A's slowest-rank times and the model's bytes over them
    b: SideSummary
    modes: tuple[RanksMode, RanksMode]  # A's, B's
    # Each side's node memory, each figure the highest of its runs (the limit's record: the
    # run that peaked highest); None for a side whose runs measured none.
    nodes: tuple[NodeMemory | None, NodeMemory | None]
    ratios: tuple[float, ...]  # B/A of each pair: A's slowest rank's time over B's
    verdict: Verdict
    runs: tuple[tuple[str, RanksResult], ...]  # ("A"|"B", result) in run order
    cache: str = "cold"

    @property
    def notes(self) -> list[str]:
        """What the runs said (more ranks than CPUs, no cgroup), each once."""
        return list(dict.fromkeys(note for _, run in self.runs for note in run.notes))

    def read_bytes(self, side: str) -> int:
        """The most any run of ``side`` ("A" | "B") read, every reader of the node together."""
        return max((run.read_bytes for s, run in self.runs if s == side), default=0)

    def to_dict(self) -> dict[str, Any]:
        sides = {}
        for label, summary, mode, node in zip(
            ("A", "B"), (self.a, self.b), self.modes, self.nodes, strict=True
        ):
            sides[label.lower()] = {
                **asdict(summary),
                "mode": mode,
                "read_bytes": self.read_bytes(label),
                "node": node.to_dict() if node is not None else None,
            }
        return {
            "ranks": self.ranks,
            "cache": self.cache,
            **sides,
            "ratios": list(self.ratios),
            "verdict": asdict(self.verdict),
            "runs": [{"side": side, **result.to_dict()} for side, result in self.runs],
            "notes": self.notes,
        }


def side_node(results: Sequence[RanksResult]) -> NodeMemory | None:
    """A side's node memory over its runs: each figure the highest of theirs."""
    nodes = [r.node for r in results if r.node is not None]
    if not nodes:
        return None
    highest = max(nodes, key=lambda node: node.peak_bytes)

    def most(values: list[int | None]) -> int | None:
        known = [v for v in values if v is not None]
        return max(known) if known and len(known) == len(values) else None

    return NodeMemory(
        highest.peak_bytes,
        most([n.anon_peak_bytes for n in nodes]),
        most([n.cache_peak_bytes for n in nodes]),
        all(n.measured for n in nodes),
        highest.limit,
        most([n.held_peak_bytes for n in nodes]),
    )


def largest_worker(results: Sequence[RanksResult]) -> int:
    """The largest peak RSS of any one worker of any rank (or reader) of ``results``."""
    loads = [r.result for run in results for r in run.ranks if r.result is not None]
    loads += [run.reader for run in results if run.reader is not None]
    return max((w.peak_rss for load in loads for w in load.workers), default=0)


def check_sides(model: Model, sides: Sequence[RanksSide], ranks: int) -> None:
    """OptionsError, in one line naming the side, for one that cannot run ``ranks`` ranks."""
    for label, side in zip(("A", "B"), sides, strict=True):
        try:
            check_ranks(model, side.config.strategy, ranks, side.mode, side.config.options)
        except OptionsError as exc:
            raise OptionsError(f"{label} ({side.mode}, {side.spec}): {exc}") from None


def run_ranks_ab(
    model: Model,
    a: RanksSide,
    b: RanksSide,
    ranks: int,
    n: int = 3,
    cache: CacheMode = "cold",
    *,
    on_result: Callable[[str, int, RanksResult], None] | None = None,
    cancel: threading.Event | None = None,
    on_rest: Callable[[float], None] | None = None,
    time_limit_s: float | None = None,
    memory_limit: int | None = None,
) -> RanksAB:
    """Run A's ``ranks`` ranks, then B's, ``n`` pairs, each from the verified ``cache`` state;
    see the module's docstring. A rank still loading ``time_limit_s`` after its go is
    stopped, and the A/B with it; a run that fails ends it (``ABFailed``), one the storage
    failed with that StorageError."""
    check_whole("n (pairs)", n, 1, MAX_AB_PAIRS)
    sides = {"A": a, "B": b}
    check_sides(model, (a, b), ranks)

    def run(label: str, _pair: int) -> RanksResult:
        side = sides[label]
        return RanksRun(
            model,
            side.config.strategy,
            side.config.options.with_(cache=cache),
            ranks,
            side.mode,
            cancel=cancel,
            memory_limit=memory_limit,
            time_limit_s=time_limit_s,
        ).run()

    files = [f.path for f in model.files]
    ordered = alternate(run, n, files, cancel=cancel, on_rest=on_rest, on_result=on_result)
    results, ratios, verdict = judged(ordered, cache)
    summaries = [
        side_summary(sides[s].spec, results[s], largest_worker(results[s])) for s in ("A", "B")
    ]
    return RanksAB(
        ranks,
        summaries[0],
        summaries[1],
        (a.mode, b.mode),
        (side_node(results["A"]), side_node(results["B"])),
        tuple(ratios),
        verdict,
        tuple(ordered),
        cache,
    )
