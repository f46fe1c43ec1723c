"""Every target the report checks, from every section: the environment tables' (``summary``),
the applied loads' (``tables``), the regret's (``regret_tables``), monitoring overhead, peak
memory, the plan, other loaders watched (``watch_tables``) and models in a bucket
(``object_targets``)."""

from __future__ import annotations

from benchmarks.memory import DISCARD_TARGET
from benchmarks.monitor_overhead import OVERHEAD_TARGET
from benchmarks.object_targets import object_targets
from benchmarks.records import BenchResults
from benchmarks.regret_tables import regret_targets
from benchmarks.summary import PLAN_TARGET_S, RSS_TARGET, MiB, Target, job_targets
from benchmarks.tables import applied_targets
from benchmarks.watch_tables import watch_targets


def all_targets(results: BenchResults) -> list[Target]:
    found = [
        t
        for job in results.jobs
        for t in (*job_targets(job), *applied_targets(job), *regret_targets(job))
    ]
    over = results.overhead
    if over is not None:  # the bound: the sampler's CPU beside the load, share of one core
        bound = over.sampler_core_share_median
        found.append(
            Target(
                "monitoring",
                f"overhead ≤ {OVERHEAD_TARGET:.0%}",
                f"≤ {bound:.2%} (sampler CPU, share of one core; measured "
                f"{over.overhead:.1%}, median of {over.pairs} pairs)",
                bound <= OVERHEAD_TARGET,
            )
        )
    memory = results.memory
    if memory is not None:
        for row in memory.load_to_ram:
            if row.strategy == "sequential" and row.status == "ok" and row.ratio is not None:
                found.append(
                    Target(
                        "peak memory",
                        f"load to RAM: peak RSS ≤ {RSS_TARGET}× bytes "
                        f"(sequential, {row.workers} workers)",
                        f"{row.ratio:.2f}×",
                        row.ratio <= RSS_TARGET,
                    )
                )
        found.append(
            Target(
                "peak memory",
                f"discard: peak RSS ≤ {DISCARD_TARGET // MiB} MiB (per worker)",
                f"{memory.discard.max_worker_peak_rss / MiB:.0f} MiB",
                memory.discard.target_met,
            )
        )
    plan = results.plan
    if plan is not None:
        found.append(
            Target(
                "plan",
                f"{plan.tensors:,}-tensor plan (partition + coalesce, "
                f"in memory) < {PLAN_TARGET_S:g} s",
                f"{plan.in_memory_s:.3f} s",
                plan.target_met,
            )
        )
        found.append(
            Target(
                "plan",
                f"{plan.tensors:,}-tensor real file: open_model + plan < {PLAN_TARGET_S:g} s",
                f"{plan.open_and_plan_s:.3f} s",
                plan.open_target_met,
            )
        )
    return found + watch_targets(results) + object_targets(results)
