"""The sections beside the throughput tables: monitoring overhead, plan time for a 100 000-tensor
model, and the GUI tick latency (``benchmarks/gui_tick.py``). Each is measured
here and rendered here, as its markdown for docs/benchmarks.md (peak memory is measured in
``memory.py``; report.py renders that section)."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import monitor_overhead
from benchmarks.records import BenchResults, OverheadResult, PlanResult, WholeLoad
from benchmarks.summary import PLAN_TARGET_S
from modelmon.core import Model, ModelFile, TensorExtent, open_model
from modelmon.core.model import coalesce, encode_safetensors_header, partition
from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def overhead(model: Path, pairs: int, workers: int = 4) -> OverheadResult:
    """benchmarks/monitor_overhead.py: sampler on vs off, alternating, cold, discard."""
    return monitor_overhead.measure(model, pairs, "sequential", workers)


def synthetic_model(tensors: int, files: int = 8) -> Model:
    """A Model of ``tensors`` small tensors spread over ``files`` shards, built in memory."""
    per_file = -(-tensors // files)
    extents = []
    model_files = []
    for number in range(files):
        path = f"/synthetic/model-{number:05d}.safetensors"
        offset = 4096
        count = min(per_file, tensors - number * per_file)
        for index in range(count):
            length = 2 * 4096 * (1 + index % 7)
            name = f"model.layers.{(number * per_file + index) // 12}.t{index}.weight"
            extents.append(
                TensorExtent(
                    name,
                    path,
                    offset,
                    length,
                    "F16",
                    (length // 2,),
                    name.rsplit(".", 2)[0],
                    "<f2",
                    (length // 2,),
                )
            )
            offset += length
        model_files.append(ModelFile(path, offset))
    return Model("/synthetic", "safetensors", tuple(model_files), tuple(extents))


def _plan_seconds(model: Model, workers: int, chunk: int) -> float:
    started = time.perf_counter()
    for share in partition(model, workers, "contiguous"):
        coalesce(model, share, chunk)
    return time.perf_counter() - started


def write_many_tensors(path: Path, tensors: int, elements: int = 16) -> Path:
    """A real safetensors file of ``tensors`` small F16 tensors (zeros)."""
    nbytes = elements * 2
    entries = [
        (f"model.layers.{i // 10}.t{i % 10}.weight", "F16", (elements,), nbytes)
        for i in range(tensors)
    ]
    with open(path, "wb") as out:
        out.write(encode_safetensors_header(entries))
        out.write(bytes(nbytes * tensors))
    return path


def plan_time(
    scratch: Path, tensors: int = 100_000, repeats: int = 3, workers: int = 4
) -> PlanResult:
    """Planning a load of ``tensors`` tensors: in memory, and from a real file's header."""
    chunk = 16 * MiB
    synthetic = synthetic_model(tensors)
    in_memory = [_plan_seconds(synthetic, workers, chunk) for _ in range(repeats)]
    real = write_many_tensors(scratch / "many-tensors.safetensors", tensors)
    parse: list[float] = []
    planned: list[float] = []
    decode: list[float] = []
    try:
        for _ in range(repeats):
            started = time.perf_counter()  # the JSON header alone, for the breakdown
            with open(real, "rb") as handle:
                json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
            decode.append(time.perf_counter() - started)
            started = time.perf_counter()
            model = open_model(real)
            parse.append(time.perf_counter() - started)
            planned.append(_plan_seconds(model, workers, chunk))
        started = time.perf_counter()
        result = LoadRun(real, "sequential", LoadOptions(workers=workers, chunk=chunk)).run()
        whole = WholeLoad(
            result.status, time.perf_counter() - started, result.seconds, result.bytes
        )
        header_bytes = real.stat().st_size - 32 * tensors
    finally:
        real.unlink(missing_ok=True)
    median_total = statistics.median(p + q for p, q in zip(parse, planned, strict=True))
    return PlanResult(
        tensors=tensors,
        workers=workers,
        chunk=chunk,
        in_memory_s=statistics.median(in_memory),
        open_model_s=statistics.median(parse),
        json_decode_s=statistics.median(decode),
        plan_after_open_s=statistics.median(planned),
        open_and_plan_s=median_total,
        header_bytes=header_bytes,
        whole_load=whole,
        target_met=statistics.median(in_memory) < PLAN_TARGET_S,
        open_target_met=median_total < PLAN_TARGET_S,
    )


def gui_tick(timeout_s: float = 150.0) -> dict[str, Any]:
    """Run ``python -m benchmarks.gui_tick -n 1`` offscreen: the JSON object it prints. A
    failure raises ``RuntimeError`` with why (``run.py`` reports it as the section's)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.gui_tick", "-n", "1"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"benchmarks/gui_tick.py ran over {timeout_s:.0f} s") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"benchmarks/gui_tick.py exited {done.returncode}: {tail}")
    text = done.stdout.strip()
    try:  # the first JSON object it printed, whatever follows it
        data = json.JSONDecoder().raw_decode(text[text.index("{") :])[0]
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise RuntimeError("benchmarks/gui_tick.py printed no JSON object")
    return data


# --- their sections of docs/benchmarks.md (report.py puts them in place) -------------


def overhead_section(results: BenchResults) -> list[str]:
    over = results.overhead
    if over is None:
        return [f"Skipped: {results.skipped.get('overhead', 'not run')}\n"]
    costs = ", ".join(f"{name} {us:.0f} µs" for name, us in over.source_cpu_us_per_sample.items())
    return [
        f"`benchmarks/monitor_overhead.py` on {over.model_key}: `{over.strategy}`, "
        f"{over.workers} workers, discard mode, cold, {over.pairs} pairs alternating "
        f"(monitored first in every other pair).\n",
        "| monitored MB/s | unmonitored MB/s | ratio per pair | median ratio | overhead | "
        "sampler CPU (share of one core) |\n| ---: | ---: | --- | ---: | ---: | ---: |\n"
        f"| {over.median_mbps_monitored:,.0f} | {over.median_mbps_unmonitored:,.0f} | "
        f"{', '.join(f'{r:.3f}' for r in over.ratios)} | {over.median_ratio:.3f} | "
        f"{over.overhead:.1%} | {over.sampler_core_share_median:.2%} |\n",
        "The target is judged on the sampler's CPU share: the CPU its thread used from the "
        "first sample to the last, beside the load, as a share of one core (its baselines "
        "before the load and its final sample after it left out; with them, over the load's "
        f"time: {over.sampler_thread_share_median:.2%}). The sampler can slow a load only by "
        "taking CPU from it, so this bounds the overhead; the per-pair ratios spread far more "
        "than 3 % on a shared machine and are shown as evidence only. Sampler CPU per "
        f"sample: {costs}.\n",
    ]


def plan_section(results: BenchResults) -> list[str]:
    plan = results.plan
    if plan is None:
        return [f"Skipped: {results.skipped.get('plan', 'not run')}\n"]
    load = plan.whole_load
    whole = (
        f" A whole `sequential` load of that file ({load.status}) took {load.wall_s:.2f} s "
        "wall, spawn and parse in every worker included."
        if load is not None
        else ""
    )
    return [
        f"{plan.tensors:,} tensors, {plan.workers} workers, {plan.chunk // MiB} MiB reads. "
        f"`partition` + `coalesce` on a `Model` built in memory: "
        f"**{plan.in_memory_s * 1000:.0f} ms**. A real safetensors file of {plan.tensors:,} "
        f"32-byte tensors ({plan.header_bytes / 1e6:.1f} MB header): `open_model` "
        f"{plan.open_model_s * 1000:.0f} ms + plan {plan.plan_after_open_s * 1000:.0f} ms = "
        f"**{plan.open_and_plan_s * 1000:.0f} ms** (medians of 3).{whole}\n"
    ]


def gui_section(results: BenchResults) -> list[str]:
    head = (
        "<!-- GUI tick: filled by benchmarks/run.py from `python -m benchmarks.gui_tick` "
        "(QT_QPA_PLATFORM=offscreen). -->\n"
    )
    tick = results.gui_tick
    if tick is None:
        return [head, f"Not measured: {results.skipped.get('gui_tick', 'not run')}.\n"]
    lines = ["| measure | value |", "| --- | --- |"]
    for key, value in tick.items():
        if isinstance(value, dict | list):
            lines.append(f"| {key} | `{json.dumps(value, separators=(', ', ': '), default=str)}` |")
        else:
            lines.append(f"| {key} | {value} |")
    return [
        head,
        "From `python -m benchmarks.gui_tick` (its own defaults), run by this command.\n",
        "\n".join(lines) + "\n",
    ]
