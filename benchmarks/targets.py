"""Every target the report checks, from every section: the environment tables' (``summary``),
the applied loads' (``tables``), the regret's (``regret_tables``), monitoring overhead, peak
memory and the plan."""

from __future__ import annotations

from typing import Any

from benchmarks.regret_tables import regret_targets
from benchmarks.summary import (
    OVERHEAD_TARGET,
    PLAN_TARGET_S,
    RSS_TARGET,
    MiB,
    Target,
    job_targets,
)
from benchmarks.tables import applied_targets


def all_targets(results: dict[str, Any]) -> list[Target]:
    found = [
        t
        for job in results.get("jobs", [])
        for t in (*job_targets(job), *applied_targets(job), *regret_targets(job))
    ]
    over = results.get("overhead") or {}
    if "judged_on" in over:  # the bound: the sampler's CPU beside the load, share of one core
        bound = over["sampler_core_share_median"]
        found.append(
            Target(
                "monitoring",
                f"overhead ≤ {OVERHEAD_TARGET:.0%}",
                f"≤ {bound:.2%} (sampler CPU, share of one core; measured "
                f"{over['overhead']:.1%}, median of {over['pairs']} pairs)",
                bound <= OVERHEAD_TARGET,
            )
        )
    elif "overhead" in over:  # results without the sampler's bound: the ratio only
        found.append(
            Target(
                "monitoring",
                f"overhead ≤ {OVERHEAD_TARGET:.0%}",
                f"{over['overhead']:.1%} (median of {over['pairs']} pairs)",
                over["overhead"] <= OVERHEAD_TARGET,
            )
        )
    memory = results.get("memory") or {}
    for row in memory.get("load_to_ram", []):
        if row["strategy"] == "sequential" and row["status"] == "ok":
            found.append(
                Target(
                    "peak memory",
                    f"load to RAM: peak RSS ≤ {RSS_TARGET}× bytes "
                    f"(sequential, {row['workers']} workers)",
                    f"{row['ratio']:.2f}×",
                    row["ratio"] <= RSS_TARGET,
                )
            )
    discard = memory.get("discard") or {}
    if "max_worker_peak_rss" in discard:
        found.append(
            Target(
                "peak memory",
                "discard: peak RSS ≤ 256 MiB (per worker)",
                f"{discard['max_worker_peak_rss'] / MiB:.0f} MiB",
                discard["target_met"],
            )
        )
    plan = results.get("plan") or {}
    if "in_memory_s" in plan:
        found.append(
            Target(
                "plan",
                f"{plan['tensors']:,}-tensor plan (partition + coalesce, "
                f"in memory) < {PLAN_TARGET_S:g} s",
                f"{plan['in_memory_s']:.3f} s",
                plan["target_met"],
            )
        )
        found.append(
            Target(
                "plan",
                f"{plan['tensors']:,}-tensor real file: open_model + plan < {PLAN_TARGET_S:g} s",
                f"{plan['open_and_plan_s']:.3f} s",
                plan["open_target_met"],
            )
        )
    return found
