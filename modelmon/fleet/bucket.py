"""A fleet on a model in object storage: each node's requests, summed, and the bucket's bound.

Every node counts its own requests (``ReadStats``: GETs, time to first byte, throttles,
retries). In all, GETs, throttles and retries are summed; time to first byte is the median of
the runs' medians and the largest of their p99s (the requests themselves stay on the nodes).

The bound: every object read once by plain GETs (``plain_read``, none of modelmon's
strategies) at the widest side's connections and part size (with only programs, 8
connections of 16 MiB GETs): first from one node alone, then from every node that loaded, at
once from one barrier. The fleet's storage rate is set against the all-at-once rate (what the
bucket gives this many nodes), and that against N times one node alone (how the bucket, or
the network in front of it, scales with nodes).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from modelmon.core import Configuration, StrategyConfig
from modelmon.core.options import MiB
from modelmon.core.output import rate_text
from modelmon.fleet.node import NodeRun, bound_spec

BOUND_ONE = "bound-one"  # plain GETs from one node alone
BOUND_ALL = "bound-all"  # plain GETs from every node that loaded, at once
BOUND_SIDES = (BOUND_ONE, BOUND_ALL)
PROGRAMS_BOUND = (8, 16 * MiB)  # what a parallel client opens without tuning


def bound_setting(configs: Iterable[Configuration]) -> tuple[int, int]:
    """(connections, part size) of the bound: the widest strategy side's, its connections
    every worker's threads (then the larger part size); with only programs, 8 of 16 MiB."""
    settings = [
        (config.options.workers * config.options.threads, config.options.chunk)
        for config in configs
        if isinstance(config, StrategyConfig)
    ]
    return max(settings, default=PROGRAMS_BOUND)


def request_figures(runs: Iterable[NodeRun]) -> dict[str, Any] | None:
    """The requests of ``runs`` in all; None when none counted any (files, programs)."""
    stats = [stats for run in runs for stats in run.object_reads]
    if not stats:
        return None
    medians = [s.ttfb_median_s for s in stats if math.isfinite(s.ttfb_median_s)]
    p99s = [s.ttfb_p99_s for s in stats if math.isfinite(s.ttfb_p99_s)]
    return {
        "gets": sum(s.requests for s in stats),
        "bytes": sum(s.bytes for s in stats),
        "throttles": sum(s.throttles for s in stats),
        "retries": sum(s.retries for s in stats),
        "resumed": sum(s.resumed for s in stats),
        "ttfb_median_s": statistics.median(medians) if medians else None,
        "ttfb_p99_s": max(p99s, default=None),
    }


def requests_text(figures: Mapping[str, Any]) -> str:
    """ "12 GETs, first byte 3.1 ms (p99 8.0 ms), 0 throttled, 0 retried"."""
    median, p99 = figures["ttfb_median_s"], figures["ttfb_p99_s"]
    first = (
        f", first byte {median * 1e3:.1f} ms (p99 {p99 * 1e3:.1f} ms)"
        if median is not None and p99 is not None
        else ", no first byte timed"
    )
    gets = figures["gets"]
    return (
        f"{gets} GET{'' if gets == 1 else 's'}{first}, {figures['throttles']} throttled, "
        f"{figures['retries']} retried"
    )


def bound_summary(
    setting: tuple[int, int],
    runs: Sequence[NodeRun],
    all_at_once: Sequence[Mapping[str, Any]],
    served: Mapping[str, float],
) -> dict[str, Any]:
    """The bound (``setting``) from its ``runs`` and the all-at-once round's figures
    (``FleetResult.rounds``), against what storage served each side (``served``)."""
    alone = next((r for r in runs if r.side == BOUND_ONE), None)
    together = [r for r in runs if r.side == BOUND_ALL]
    one = None
    if alone is not None and alone.status == "ok":
        one = {"node_id": alone.node_id, "host": alone.host, "mbps": alone.mbps}
    every = None
    if together and all(r.status == "ok" for r in together) and all_at_once:
        every = {"nodes": len(together), "mbps": all_at_once[0]["total_mbps"]}
    failed = next((r for r in runs if r.side in BOUND_SIDES and r.status != "ok"), None)
    return {
        "spec": bound_spec(*setting),
        "connections": setting[0],
        "part": setting[1],
        "one_node": one,
        "all_nodes": every,
        "error": failed.error if failed is not None else None,
        # What N nodes at once got, against N times what one node gets alone.
        "scaling": every["mbps"] / (every["nodes"] * one["mbps"]) if every and one else None,
        "of_bound": {
            label: mbps / every["mbps"] if every and every["mbps"] > 0 else None
            for label, mbps in served.items()
        },
    }


def bound_lines(bound: Mapping[str, Any]) -> list[str]:
    """The bound in words, under the sides' reports."""
    lines = [f"[bound] the bucket by {bound['spec']} on each node"]
    one, every = bound["one_node"], bound["all_nodes"]
    if one is None or every is None:
        why = bound["error"] or "no node loaded the model"
        return [*lines, f"  not measured: {why}"]
    lines.append(
        f"  one node alone ({one['host']} {one['node_id'][:12]}): {rate_text(one['mbps'])}; "
        f"{every['nodes']} nodes at once: {rate_text(every['mbps'])} in all "
        f"({bound['scaling']:.0%} of {every['nodes']} × one node alone)"
    )
    for label, share in bound["of_bound"].items():
        if share is not None:
            lines.append(f"  [{label}] storage served {share:.0%} of the all-at-once bound")
    return lines
