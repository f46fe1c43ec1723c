"""Why a target was missed, from what was measured in the same run (never a fixed story)."""

from __future__ import annotations

from benchmarks.diagnose import summary_line
from benchmarks.records import BenchResults, JobResult
from benchmarks.summary import MiB, Target, ceiling_of, reference, rows_of

# What the destination costs a copying load, when the storage delivers more in discard mode.
FAULT_HINT = (
    "the copying strategies write into fresh anonymous memory (`TensorSink.allocate`), so "
    "every 4 KiB page of the destination is a page fault the kernel must zero and map while "
    "the reads are in flight, on the CPUs the storage's own work needs too (the VM's host "
    "faults are not in it: free memory for the arrays is primed before each run). "
    "`mmap-view` has no destination to fault in (the tensors are views of the page cache)"
)
DISCARD_GAIN = 1.04  # discard mode this much faster than keeping: the loss is the destination
CPU_BOUND_PCT = 85.0  # machine CPU busy from this on: the CPUs were the bottleneck
UNEVEN_WORKERS = 1.15  # the slowest worker's seconds over the fastest's: an uneven split


def _ceiling_miss(job: JobResult) -> str:
    ceiling = ceiling_of(job) or 0.0
    parts: list[str] = []
    found = reference(job)
    if found is not None and found.runs and ceiling:
        low, high = min(found.runs), max(found.runs)
        parts.append(
            f"The ceiling's own runs spread {low:.0f}–{high:.0f} MB/s "
            f"({(high - low) / ceiling:.0%} of its median)"
        )
    diagnosis = job.diagnosis
    if diagnosis is None:
        return ". ".join(parts) + "." if parts else "No monitored run to explain it."
    kept, discarded = diagnosis.kept, diagnosis.discard
    med = kept.medians
    if ceiling and discarded.mbps > 0:
        parts.append(
            f"the best configuration reached {discarded.mbps:.0f} MB/s "
            f"({discarded.mbps / ceiling:.2f}× the ceiling) in discard mode against "
            f"{kept.mbps:.0f} MB/s keeping the tensors in the monitored pair"
        )
        if discarded.mbps >= kept.mbps * DISCARD_GAIN:
            parts.append(
                "so the storage delivers and the loss is in the destination: " + FAULT_HINT
            )
    if med.cpu_pct is not None:
        busy = (
            "the CPUs were the bottleneck"
            if med.cpu_pct >= CPU_BOUND_PCT
            else "CPU was not saturated"
        )
        parts.append(
            f"machine CPU busy {med.cpu_pct:.0f} % (IO wait {med.iowait_pct or 0:.0f} %) "
            f"during the load: {busy}"
        )
    spread = diagnosis.worker_spread
    if spread and spread > UNEVEN_WORKERS:
        seconds = kept.worker_seconds
        parts.append(
            f"the workers finished unevenly ({min(seconds):.2f}–{max(seconds):.2f} s): "
            "a contiguous split by bytes leaves the slowest range deciding the end; "
            "smaller units handed out on demand would even it out"
        )
    device = med.device_read_mbps
    if device is not None and job.cache == "cold" and job.env != "fuse":
        parts.append(f"the disk read {device:.0f} MB/s (median) while loading")
    return "; ".join(parts) + "."


def _shared_fd_miss(job: JobResult) -> str:
    rows = [r for r in rows_of(job) if r.name == "mmap-shared-fd" and r.kind == "strategy"]
    if not rows:
        return "mmap-shared-fd was not measured."
    row = rows[0]
    return (
        f"mmap-shared-fd ran at {row.low:.0f}–{row.high:.0f} MB/s. The page faults of 4 "
        "workers on one shared descriptor become small out-of-order HTTP range reads "
        "through rclone; how much that costs depends on rclone's readahead per open file "
        "and the kernel's FUSE readahead (`max_read`, `read_ahead_kb` of the mount)."
    )


def _throttle_miss(job: JobResult, results: BenchResults) -> str:
    ceiling = ceiling_of(job) or 0.0
    parts = [
        f"The cgroup's limits are 150 MiB/s and 200 IOPS; 16 MiB buffered reads of this "
        f"file got {ceiling:.0f} MB/s"
    ]
    if job.blkio is not None and job.blkio.bytes_per_read:
        parts.append(
            f"over the whole job the throttle let {job.blkio.reads:,} reads through, "
            f"{job.blkio.bytes_per_read / 1024:.0f} KiB each on average"
        )
    fastest = max(
        (r for r in rows_of(job) if r.kind != "ceiling" and r.ok),
        key=lambda r: r.median,
        default=None,
    )
    if fastest is not None and fastest.median > 1.2 * ceiling:
        parts.append(
            f"in the same cgroup {fastest.label} read this very file at "
            f"{fastest.median:.0f} MB/s, past the ceiling's reads"
        )
    for other in (j for j in results.jobs if j.env == "hdd" and j is not job):
        seq = other.ceilings.get("sequential_read")
        if seq:
            parts.append(
                f"the same reads of {other.model_key} reached {seq.mbps:.0f} MB/s "
                "in the same cgroup"
            )
    local = {
        j.model_key: j.ceilings.get("sequential_read")
        for j in results.jobs
        if j.env == "local" and j.cache == "cold"
    }
    mine = local.get(job.model_key)
    if mine and len(local) > 1:
        rest = ", ".join(f"{k} {v.mbps:.0f}" for k, v in local.items() if v and k != job.model_key)
        parts.append(
            f"unthrottled, this file's sequential-read ceiling was {mine.mbps:.0f} "
            f"MB/s against {rest} MB/s for the other model(s) (local table)"
        )
    return "; ".join(parts) + "."


def _from_run(target: Target) -> str:
    """The target's own reason, then what the monitored run of the job's best showed."""
    text = target.why[0].upper() + target.why[1:]
    diagnosis = target.job.diagnosis if target.job is not None else None
    if diagnosis is not None and "regret" not in target.section:
        text += (
            f". Monitored run of the best configuration ({diagnosis.strategy}): "
            f"{summary_line(diagnosis)}"
        )
    return text + "."


def explain_miss(target: Target, results: BenchResults) -> str:
    if target.why:
        return _from_run(target)
    if target.section == "monitoring" and results.overhead is not None:
        over = results.overhead
        ratios = over.ratios
        spread = f"{min(ratios):.3f}–{max(ratios):.3f}" if ratios else "n/a"
        return (
            f"The sampler thread used {over.sampler_core_share_median:.2%} of one core beside "
            "the load (the bound the target is judged on); per sample: "
            + ", ".join(f"{name} {us:.0f} µs" for name, us in over.source_cpu_us_per_sample.items())
            + f". The per-pair ratios spread {spread}: pair-to-pair noise on this shared "
            "machine."
        )
    if target.section == "peak memory" and results.memory is not None:
        discard = results.memory.discard
        if "discard" in target.target:
            return (
                f"The largest worker peaked at {discard.max_worker_peak_rss / MiB:.0f} MiB: "
                "each worker process carries the Python interpreter, numpy and modelmon's "
                "imports besides its 16 MiB read buffer."
            )
        base = min((min(r.worker_peak_rss) for r in discard.runs if r.worker_peak_rss), default=0)
        return (
            f"Each worker process carries the interpreter and its imports (a discard-mode "
            f"worker, holding 16 MiB of buffers, peaked at {base / MiB:.0f} MiB), counted "
            "once per worker on top of the arrays, which are exactly the bytes loaded."
        )
    if target.section == "plan" and results.plan is not None:
        plan = results.plan
        return (
            f"Planning itself took {plan.plan_after_open_s:.3f} s; parsing took "
            f"{plan.open_model_s:.3f} s, of which {plan.json_decode_s:.3f} s is `json.loads` "
            f"of the {plan.header_bytes / 1e6:.1f} MB header and the rest the whole-column "
            "checks of the header and building one TensorExtent per tensor (the collector "
            "is paused meanwhile)."
        )
    if target.job is None:
        return "No run to explain it."
    if "throttle bites" in target.target:
        return _throttle_miss(target.job, results)
    if "mmap-shared-fd" in target.target:
        return _shared_fd_miss(target.job)
    return _ceiling_miss(target.job)
