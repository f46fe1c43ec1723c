"""A fleet's result: every node's runs, one row per node, the aggregate, as JSON, CSV and text.

Per node, a side's value is the median over its runs of that side (one run for ``fleet load``).
The aggregate spreads those values over the nodes (p50, p99, max), names the straggler (slowest
node against the median), and gives the rate the storage served the whole fleet in each round:
every node's bytes over the wall time from the first node's go to the last node's end (node
clocks, so on a real cluster as good as their NTP sync). A model in object storage adds each
node's requests and their sum, and the bucket's bound (``bucket``).
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from modelmon.core import Configuration, ObjectStorage, StorageFacts
from modelmon.core.errors import redact_urls
from modelmon.core.measuring import find_straggler
from modelmon.core.output import rate_text
from modelmon.fleet.bucket import (
    BOUND_ALL,
    bound_lines,
    bound_summary,
    request_figures,
    requests_text,
)
from modelmon.fleet.node import NodeRun
from modelmon.fleet.ranks import CSV_FIELDS as RANKS_CSV_FIELDS
from modelmon.fleet.ranks import NodeRanks, limit_figures, node_text, side_figures, side_lines
from modelmon.fleet.ranks import csv_columns as ranks_csv_columns

CSV_FIELDS = (
    "node_id",
    "host",
    "side",
    "round",
    "spec",
    "status",
    "error",
    "bytes",
    "seconds",
    "mbps",
    "start_offset_s",
    "peak_rss",
    "cache_requested",
    "resident_before",
    "cold",
    "fs_type",
    "device",
    "gets",
    "throttles",
    "retries",
    "ttfb_median_s",
    "ttfb_p99_s",
)


@dataclass(frozen=True, slots=True)
class Side:
    label: str  # "load", or "A" / "B" in a bench
    config: Configuration  # with the round's cache state, for a strategy
    ranks: tuple[int, str] | None = None  # (N, mode): N ranks on every node

    @property
    def spec(self) -> str:
        return self.config.spec


def spread(values: list[float]) -> dict[str, float | None]:
    """p50, p99, max and min of per-node values (linear interpolation between nodes)."""
    if not values:
        return {"p50": None, "p99": None, "max": None, "min": None}
    array = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(array, 50)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
        "min": float(array.min()),
    }


@dataclass(frozen=True, slots=True)
class FleetResult:
    verb: str  # "load" | "bench"
    model: str
    sides: tuple[Side, ...]
    runs: tuple[NodeRun, ...]  # every node's part of every round, in round order
    bound: tuple[int, int] | None = None  # a bucket's bound asked for: (connections, part)

    @property
    def status(self) -> str:
        statuses = {run.status for run in self.runs}
        return next((s for s in ("failed", "cancelled") if s in statuses), "ok")

    @property
    def node_ids(self) -> list[str]:
        return list(dict.fromkeys(run.node_id for run in self.runs))

    def round_start(self, round_: int) -> float:
        """The first node's go in this round (wall clock), or 0.0 when none went."""
        return min(
            (r.start_wall for r in self.runs if r.round == round_ and r.start_wall), default=0.0
        )

    def start_offset(self, run: NodeRun) -> float | None:
        return run.start_wall - self.round_start(run.round) if run.start_wall else None

    def _node_values(self, node_id: str, side: str) -> tuple[float, float] | None:
        """(median seconds, median MB/s) of the node's good runs of this side."""
        good = [
            r for r in self.runs if r.node_id == node_id and r.side == side and r.status == "ok"
        ]
        if not good:
            return None
        return statistics.median(r.seconds for r in good), statistics.median(r.mbps for r in good)

    def rounds(self, side: str) -> list[dict[str, Any]]:
        """Per round of this side: how far apart the nodes started, what storage served."""
        found = []
        for round_ in sorted({r.round for r in self.runs if r.side == side}):
            went = [r for r in self.runs if r.round == round_ and r.start_wall]
            first = self.round_start(round_)
            last_end = max((r.start_wall + r.seconds for r in went), default=first)
            wall = last_end - first
            total = sum(r.bytes for r in went)
            found.append(
                {
                    "round": round_,
                    "nodes_started": len(went),
                    "start_spread_s": max((r.start_wall for r in went), default=first) - first,
                    "wall_seconds": wall,
                    "bytes": total,
                    "total_mbps": total / wall / 1e6 if wall > 0 else 0.0,
                    "requests": request_figures(r for r in self.runs if r.round == round_),
                }
            )
        return found

    def aggregate(self, side: str) -> dict[str, Any]:
        values = {n: v for n in self.node_ids if (v := self._node_values(n, side)) is not None}
        straggler = find_straggler([(node, v[0]) for node, v in values.items()])
        hosts = {r.node_id: r.host for r in self.runs}
        rounds = self.rounds(side)
        return {
            "spec": next(s.spec for s in self.sides if s.label == side),
            "nodes": len(values),
            "seconds": spread([v[0] for v in values.values()]),
            "mbps": spread([v[1] for v in values.values()]),
            "straggler": None
            if straggler is None
            else {**straggler.to_dict(), "node_id": straggler.who, "host": hosts[straggler.who]},
            "total_mbps": statistics.median(r["total_mbps"] for r in rounds) if rounds else 0.0,
            "start_spread_s": max((r["start_spread_s"] for r in rounds), default=0.0),
            "requests": request_figures(r for r in self.runs if r.side == side),
            "rounds": rounds,
        } | self._ranks_aggregate(side, values, hosts)

    def _ranks_aggregate(
        self, side: str, values: dict[str, tuple[float, float]], hosts: dict[str, str]
    ) -> dict[str, Any]:
        """N ranks on every node: the nodes' memory spread, and the slowest node."""
        ranks = next(s.ranks for s in self.sides if s.label == side)
        if ranks is None:
            return {}
        figures = [side_figures(self._node_ranks(n, side)) for n in values]
        memory = {  # bytes, whole (p50 and p99 interpolate between nodes)
            name: {
                key: None if value is None else round(value)
                for key, value in spread([f[name] for f in figures if f[name] is not None]).items()
            }
            for name in ("node_peak_bytes", "node_held_peak_bytes")
        }
        slowest = max(values, key=lambda n: values[n][0], default=None)
        every = [r.ranks for r in self.runs if r.side == side and r.ranks is not None]
        found: dict[str, Any] = {"ranks": ranks[0], "mode": ranks[1], **memory}
        found |= limit_figures(every)
        if slowest is None:
            return found | {"slowest_node": None}
        last = self._node_ranks(slowest, side)
        return found | {
            "slowest_node": {
                "node_id": slowest,
                "host": hosts[slowest],
                "seconds": values[slowest][0],
                "slowest_rank": last[0].slowest_rank if len(last) == 1 else None,
            }
        }

    def _node_ranks(self, node_id: str, side: str) -> list[NodeRanks]:
        """The node's good runs' ranks of ``side``."""
        return [
            r.ranks
            for r in self.runs
            if r.node_id == node_id and r.side == side and r.status == "ok" and r.ranks
        ]

    def bound_figures(self) -> dict[str, Any] | None:
        """The bucket's bound against what storage served each side; None when not asked."""
        if self.bound is None:
            return None
        served = {side.label: self.aggregate(side.label)["total_mbps"] for side in self.sides}
        return bound_summary(self.bound, self.runs, self.rounds(BOUND_ALL), served)

    def node_rows(self) -> list[dict[str, Any]]:
        rows = []
        single = len(self.sides) == 1
        for node in self.node_ids:
            mine = [r for r in self.runs if r.node_id == node]
            row: dict[str, Any] = {
                "node_id": node,
                "host": mine[0].host,
                "storage": [asdict(facts) for facts in mine[0].storage],
                "peak_rss": max(r.peak_rss for r in mine),
            }
            for side in self.sides:
                values = self._node_values(node, side.label)
                summary = {
                    "seconds": None if values is None else values[0],
                    "mbps": None if values is None else round(values[1], 3),
                    "requests": request_figures(r for r in mine if r.side == side.label),
                }
                if side.ranks is not None:
                    good = [r for r in mine if r.side == side.label and r.status == "ok"]
                    summary |= side_figures([r.ranks for r in good if r.ranks is not None])
                if single:
                    row.update(summary)
                else:
                    row[side.label] = summary
            row["runs"] = [self._run_dict(r) for r in mine]
            rows.append(row)
        return rows

    def _run_dict(self, run: NodeRun) -> dict[str, Any]:
        return {
            "side": run.side,
            "round": run.round,
            "spec": run.spec,
            "status": run.status,
            "error": run.error,
            "bytes": run.bytes,
            "seconds": run.seconds,
            "mbps": round(run.mbps, 3),
            "start_offset_s": self.start_offset(run),
            "start_wall": run.start_wall or None,
            "arrived_wall": run.arrived_wall or None,
            "waited_s": waited(run),
            "peak_rss": run.peak_rss,
            "cache": asdict(run.cache),
            "object_reads": asdict(run.reads) if run.reads is not None else None,
            "withdrew": run.withdrew,
        } | ({"ranks": run.ranks.to_dict()} if run.ranks is not None else {})

    def to_dict(self) -> dict[str, Any]:
        if len(self.sides) == 1:
            aggregate = self.aggregate(self.sides[0].label)
        else:
            aggregate = {side.label: self.aggregate(side.label) for side in self.sides}
            aggregate["b_over_a"] = self.b_over_a(aggregate)
        return {
            "verb": self.verb,
            "status": self.status,
            "model": self.model,
            "sides": {side.label: side.spec for side in self.sides},
            "nodes": self.node_rows(),
            "aggregate": aggregate,
            "bound": self.bound_figures(),
        }

    def b_over_a(self, aggregate: dict[str, Any]) -> float | None:
        """B against A: the MB/s storage served; with ranks, the slowest node's time (A's
        over B's: when each side's job was ready), as the nodes' readers read unequal bytes."""
        a, b = (aggregate[s.label] for s in self.sides[:2])
        if self.sides[0].ranks is None:
            return b["total_mbps"] / a["total_mbps"] if a["total_mbps"] else None
        if a["slowest_node"] is None or b["slowest_node"] is None:
            return None
        seconds = a["slowest_node"]["seconds"], b["slowest_node"]["seconds"]
        return seconds[0] / seconds[1] if seconds[1] > 0 else None

    def csv_bytes(self) -> bytes:
        """One CSV row per node per round."""
        text = io.StringIO()
        ranked = any(run.ranks is not None for run in self.runs)
        fields = CSV_FIELDS + RANKS_CSV_FIELDS if ranked else CSV_FIELDS
        writer = csv.DictWriter(text, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for run in self.runs:
            first = run.storage[0] if run.storage else None
            offset = self.start_offset(run)
            reads = run.reads
            row = {
                "node_id": run.node_id,
                "host": run.host,
                "side": run.side,
                "round": run.round,
                "spec": run.spec,
                "status": run.status,
                "error": run.error or "",
                "bytes": run.bytes,
                "seconds": f"{run.seconds:.6f}",
                "mbps": f"{run.mbps:.3f}",
                "start_offset_s": "" if offset is None else f"{offset:.6f}",
                "peak_rss": run.peak_rss,
                "cache_requested": run.cache.requested,
                "resident_before": ""
                if math.isnan(run.cache.resident_before)
                else f"{run.cache.resident_before:.6f}",
                "cold": run.cache.cold,
                **storage_columns(first),
                "gets": reads.requests if reads else "",
                "throttles": reads.throttles if reads else "",
                "retries": reads.retries if reads else "",
                "ttfb_median_s": finite(reads.ttfb_median_s) if reads else "",
                "ttfb_p99_s": finite(reads.ttfb_p99_s) if reads else "",
            }
            if ranked:
                row |= ranks_csv_columns(run.ranks, request_figures([run]))
            writer.writerow(row)
        return text.getvalue().encode()


def storage_columns(first: StorageFacts | ObjectStorage | None) -> dict[str, str]:
    """The CSV's fs_type and device: a folder's file system and device, or a bucket's
    storage and endpoint."""
    if isinstance(first, StorageFacts):
        return {"fs_type": first.fs_type, "device": first.block_device or first.source}
    if isinstance(first, ObjectStorage):
        return {"fs_type": first.storage, "device": first.endpoint}
    return {"fs_type": "", "device": ""}


def waited(run: NodeRun) -> float | None:
    """How long the node waited at the barrier for the others, on its own clock (so on a
    real cluster as exact as on one machine); None where it did not both arrive and go."""
    if not (run.arrived_wall and run.start_wall):
        return None
    return run.start_wall - run.arrived_wall


def finite(value: float) -> str:
    return f"{value:.6f}" if math.isfinite(value) else ""


def render_fleet(result: FleetResult) -> str:
    """The text report: one line per node and side, then each side's aggregate."""
    lines = [f"fleet {result.verb} of {result.model} on {len(result.node_ids)} nodes"]
    model_bytes = next((r.ranks.model_bytes for r in result.runs if r.ranks), 0)
    for side in result.sides:
        aggregate = result.aggregate(side.label)
        ranks = f" · {side.ranks[0]} ranks a node, {side.ranks[1]}" if side.ranks else ""
        lines.append(f"[{side.label}] {side.spec}{ranks}")
        for row in result.node_rows():
            summary = row if len(result.sides) == 1 else row[side.label]
            requests = summary["requests"]
            counted = f"; {requests_text(requests)}" if requests else ""
            if summary["seconds"] is None:
                run = next(r for r in row["runs"] if r["side"] == side.label)
                lines.append(
                    f"  {row['host']} {row['node_id'][:12]}  {run['status']}: {run['error']}"
                    f"{counted}"
                )
                continue
            node = f" (slowest rank); {node_text(summary, model_bytes)}" if ranks else ""
            lines.append(
                f"  {row['host']} {row['node_id'][:12]}  {rate_text(summary['mbps']):>10}  "
                f"{summary['seconds']:7.3f} s{node}{counted}"
            )
        seconds = aggregate["seconds"]
        if seconds["p50"] is not None:
            served = "the nodes read" if ranks else "storage served"
            lines.append(
                f"  seconds p50 {seconds['p50']:.3f} · p99 {seconds['p99']:.3f} · "
                f"max {seconds['max']:.3f}; {served} {rate_text(aggregate['total_mbps'])}; "
                f"nodes started within {aggregate['start_spread_s']:.3f} s"
            )
        slowest = aggregate.get("slowest_node")
        if slowest is not None:
            rank = slowest["slowest_rank"]
            lines.append(
                f"  slowest node: {slowest['host']} {slowest['node_id'][:12]}, its slowest "
                f"rank{'' if rank is None else f' ({rank})'} at {slowest['seconds']:.3f} s"
            )
        if side.ranks is not None:
            lines += side_lines([r.ranks for r in result.runs if r.side == side.label and r.ranks])
        if aggregate["requests"] is not None:
            lines.append(f"  in all: {requests_text(aggregate['requests'])}")
        straggler = aggregate["straggler"]
        if straggler is not None and straggler["ratio"] is not None:
            lines.append(
                f"  straggler: {straggler['host']} {straggler['node_id'][:12]}, "
                f"{straggler['ratio']:.2f}× the median"
            )
    ratio = None
    if len(result.sides) == 2 and result.sides[0].ranks is not None:
        ratio = result.b_over_a({s.label: result.aggregate(s.label) for s in result.sides})
    if ratio is not None:
        lines.append(f"B/A {ratio:.2f}× (the slowest node's time: A's over B's)")
    bound = result.bound_figures()
    if bound is not None:
        lines += bound_lines(bound)
    return redact_urls("\n".join(lines))  # the model's URL as given, the nodes' lines
