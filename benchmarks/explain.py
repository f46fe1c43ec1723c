"""Why a target was missed, from what was measured in the same run (never a fixed story)."""

from __future__ import annotations

from typing import Any

from benchmarks.summary import MiB, Target, ceiling_of, rows_of

FAULT_HINT = (
    "the copying strategies write into fresh anonymous memory (`TensorSink.allocate`), so "
    "every 4 KiB page of the destination is a page fault the kernel must zero and map while "
    "the reads are in flight, on CPUs rclone needs too (the VM's host faults are not in it: "
    "free memory for the arrays is primed before each run). Pre-faulting the destination does "
    "not help here: `madvise(MADV_POPULATE_WRITE)` before each read made warm copies slower "
    "on this machine (2.7 against 3.4 GB/s, 4 threads), and huge pages were slower still "
    "(compaction). `mmap-view` has no destination to fault in (the tensors are views of the "
    "page cache)"
)


def _ceiling_miss(target: Target) -> str:
    job = target.job or {}
    ceiling = ceiling_of(job) or 0.0
    diagnosis = job.get("diagnosis")
    parts: list[str] = []
    name = "parallel_read" if job.get("cache") == "cold" else "parallel_read_warm"
    runs = job["ceilings"].get(name, {}).get("runs", [])
    if runs and ceiling:
        spread = (max(runs) - min(runs)) / ceiling
        parts.append(
            f"The ceiling's own runs spread {min(runs):.0f}–{max(runs):.0f} MB/s "
            f"({spread:.0%} of its median)"
        )
    if not diagnosis:
        return ". ".join(parts) + "." if parts else "No monitored run to explain it."
    kept, discarded = diagnosis["kept"], diagnosis["discard"]
    med = kept["medians"]
    cpu = med.get("cpu_pct")
    if ceiling and discarded["mbps"] > 0:
        parts.append(
            f"the best configuration reached {discarded['mbps']:.0f} MB/s "
            f"({discarded['mbps'] / ceiling:.2f}× the ceiling) in discard mode against "
            f"{kept['mbps']:.0f} MB/s keeping the tensors in the monitored pair"
        )
        if discarded["mbps"] >= kept["mbps"] * 1.04:
            parts.append(
                "so the storage delivers and the loss is in the destination: " + FAULT_HINT
            )
    if cpu is not None:
        busy = "the CPUs were the bottleneck" if cpu >= 85 else "CPU was not saturated"
        parts.append(
            f"machine CPU busy {cpu:.0f} % (IO wait {med.get('iowait_pct') or 0:.0f} %) "
            f"during the load: {busy}"
        )
    spread = diagnosis.get("worker_spread")
    if spread and spread > 1.15:
        seconds = kept["worker_seconds"]
        parts.append(
            f"the workers finished unevenly ({min(seconds):.2f}–{max(seconds):.2f} s): "
            "a contiguous split by bytes leaves the slowest range deciding the end; "
            "smaller units handed out on demand would even it out"
        )
    device = med.get("device_read_mbps")
    if device is not None and job.get("cache") == "cold" and job.get("env") != "fuse":
        parts.append(f"the disk read {device:.0f} MB/s (median) while loading")
    return "; ".join(parts) + "."


def _shared_fd_miss(target: Target) -> str:
    job = target.job or {}
    rows = [r for r in rows_of(job) if r.name == "mmap-shared-fd" and r.kind == "strategy"]
    if not rows:
        return "mmap-shared-fd was not measured."
    row = rows[0]
    return (
        f"mmap-shared-fd ran at {row.low:.0f}–{row.high:.0f} MB/s. The page faults of 4 "
        "workers on one shared descriptor become small out-of-order HTTP range reads "
        "through rclone; how much that costs depends on rclone's readahead per open file "
        "and the kernel's FUSE readahead (`max_read`, `read_ahead_kb` of the mount)"
    )


def _throttle_miss(target: Target, results: dict[str, Any]) -> str:
    job = target.job or {}
    blkio = job.get("blkio") or {}
    ceiling = ceiling_of(job) or 0.0
    parts = [
        f"The cgroup's limits are 150 MiB/s and 200 IOPS; 16 MiB buffered reads of this "
        f"file got {ceiling:.0f} MB/s"
    ]
    if blkio.get("bytes_per_read"):
        parts.append(
            f"over the whole job the throttle let {blkio['reads']:,} reads through, "
            f"{blkio['bytes_per_read'] / 1024:.0f} KiB each on average"
        )
    fastest = max(
        (r for r in rows_of(job) if r.kind != "ceiling" and r.ok),
        key=lambda r: r.median,
        default=None,
    )
    if fastest is not None and fastest.median > 1.2 * ceiling:
        parts.append(
            f"in the same cgroup {fastest.label} read this very file at "
            f"{fastest.median:.0f} MB/s, the bps limit, so the throttle does bite "
            "and caps every loader there"
        )
    others = [j for j in results.get("jobs", []) if j["env"] == "hdd" and j is not job]
    for other in others:
        seq = other["ceilings"].get("sequential_read")
        if seq:
            parts.append(
                f"the same reads of {other['model_key']} reached {seq['mbps']:.0f} MB/s "
                "in the same cgroup"
            )
    local = {
        j["model_key"]: j["ceilings"].get("sequential_read")
        for j in results.get("jobs", [])
        if j["env"] == "local" and j["cache"] == "cold"
    }
    mine = local.get(job["model_key"])
    if mine and len(local) > 1:
        rest = ", ".join(
            f"{k} {v['mbps']:.0f}" for k, v in local.items() if v and k != job["model_key"]
        )
        parts.append(
            f"unthrottled, this file's sequential-read ceiling was {mine['mbps']:.0f} "
            f"MB/s against {rest} MB/s for the other model(s) (local table): the "
            "virtual disk serves this file more slowly per request, and a single "
            "buffered reader pays that latency on top of the throttle's pacing, while "
            "mmap faults from 4 workers on one descriptor keep more requests in flight"
        )
    parts.append(
        "what limits the ceiling here is not pinned down: a blktrace of request sizes "
        "and service times inside the cgroup would settle it"
    )
    return "; ".join(parts) + "."


def _from_run(target: Target) -> str:
    """The target's own reason, then what the monitored run of the job's best showed."""
    from benchmarks.diagnose import summary_line

    text = target.why[0].upper() + target.why[1:]
    diagnosis = (target.job or {}).get("diagnosis")
    if diagnosis and "regret" not in target.section:
        text += (
            f". Monitored run of the best configuration ({diagnosis['strategy']}): "
            f"{summary_line(diagnosis)}"
        )
    return text + "."


def explain_miss(target: Target, results: dict[str, Any]) -> str:
    if target.why:
        return _from_run(target)
    if "throttle bites" in target.target:
        return _throttle_miss(target, results)
    if target.section == "monitoring":
        over = results.get("overhead", {})
        ratios = over.get("ratios", [])
        spread = f"{min(ratios):.3f}–{max(ratios):.3f}" if ratios else "n/a"
        share = over.get("sampler_core_share_median", 0)
        if "judged_on" in over:
            return (
                f"The sampler thread used {share:.2%} of one core beside the load (the bound "
                "the target is judged on); per sample: "
                + ", ".join(
                    f"{name} {us:.0f} µs"
                    for name, us in over.get("source_cpu_us_per_sample", {}).items()
                )
                + f". The per-pair ratios spread {spread}: pair-to-pair noise on this shared "
                "machine."
            )
        return (
            f"The per-pair ratios spread {spread}: on this shared 2-core machine the "
            "pair-to-pair noise (others' processes included: see the load averages) is "
            "larger than the effect. The sampler thread itself used "
            f"{share:.1%} of one core ({share / 2:.1%} of the machine) while loading, "
            "which bounds what monitoring can cost the load when the loaders are "
            "CPU-bound; its 10 Hz reads of /proc compete with 4 workers for 2 cores."
        )
    if target.section == "peak memory" and "discard" in target.target:
        discard = results.get("memory", {}).get("discard", {})
        return (
            f"The largest worker peaked at "
            f"{discard.get('max_worker_peak_rss', 0) / MiB:.0f} MiB: each worker process "
            "carries the Python interpreter, numpy and modelmon's imports besides its "
            "16 MiB read buffer."
        )
    if target.section == "peak memory":
        memory = results.get("memory", {})
        discard = memory.get("discard", {}).get("runs", [])
        base = min((min(r["worker_peak_rss"]) for r in discard if r["worker_peak_rss"]), default=0)
        return (
            f"Each worker process carries the interpreter and its imports (a discard-mode "
            f"worker, holding 16 MiB of buffers, peaked at {base / MiB:.0f} MiB), counted "
            "once per worker on top of the arrays, which are exactly the bytes loaded."
        )
    if target.section == "plan":
        plan = results.get("plan", {})
        return (
            f"Planning itself took {plan.get('plan_after_open_s', 0):.3f} s; parsing took "
            f"{plan.get('open_model_s', 0):.3f} s, of which "
            f"{plan.get('json_decode_s', 0):.3f} s is `json.loads` of the "
            f"{plan.get('header_bytes', 0) / 1e6:.1f} MB header and the rest the whole-column "
            "checks of the header and building one TensorExtent per tensor (the collector "
            "is paused meanwhile). Measured without a neighbour's load it takes about 0.8 s: "
            "a busy 2-core machine stretches it past the target."
        )
    if "mmap-shared-fd" in target.target:
        return _shared_fd_miss(target)
    return _ceiling_miss(target)
