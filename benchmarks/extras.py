"""The sections beside the throughput tables: monitoring overhead, plan time for a 100 000-tensor
model, and the GUI tick latency (``benchmarks/gui_tick.py``, when present). Each is measured
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
from modelmon.core import (
    LoadOptions,
    LoadRun,
    Model,
    ModelFile,
    TensorExtent,
    coalesce,
    encode_safetensors_header,
    open_model,
    partition,
)

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20


def overhead(model: Path, pairs: int, workers: int = 4) -> dict[str, Any]:
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
) -> dict[str, Any]:
    """Planning a load of ``tensors`` tensors: in memory, and from a real file's header."""
    chunk = 16 * MiB
    synthetic = synthetic_model(tensors)
    in_memory = [_plan_seconds(synthetic, workers, chunk) for _ in range(repeats)]
    real = write_many_tensors(scratch / "many-tensors.safetensors", tensors)
    parse, planned, loads, decode = [], [], [], []
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
        loads.append(
            {
                "status": result.status,
                "wall_s": time.perf_counter() - started,
                "load_s": result.seconds,
                "bytes": result.bytes,
            }
        )
        header_bytes = real.stat().st_size - 32 * tensors
    finally:
        real.unlink(missing_ok=True)
    median_total = statistics.median(p + q for p, q in zip(parse, planned, strict=True))
    return {
        "tensors": tensors,
        "workers": workers,
        "chunk": chunk,
        "in_memory_s": statistics.median(in_memory),
        "open_model_s": statistics.median(parse),
        "json_decode_s": statistics.median(decode),
        "plan_after_open_s": statistics.median(planned),
        "open_and_plan_s": median_total,
        "header_bytes": header_bytes,
        "whole_load": loads[0] if loads else None,
        "target_met": statistics.median(in_memory) < 1.0,
        "open_target_met": median_total < 1.0,
    }


def gui_tick(timeout_s: float = 150.0) -> dict[str, Any]:
    """Run benchmarks/gui_tick.py (someone else's) if it exists; its JSON, or why not."""
    script = ROOT / "benchmarks" / "gui_tick.py"
    if not script.exists():
        return {"skipped": "benchmarks/gui_tick.py does not exist yet"}
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
        return {"skipped": f"benchmarks/gui_tick.py ran over {timeout_s:.0f} s"}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"skipped": f"benchmarks/gui_tick.py exited {done.returncode}: {tail}"}
    text = done.stdout.strip()
    try:  # the first JSON object it printed, whatever follows it
        data = json.JSONDecoder().raw_decode(text[text.index("{") :])[0]
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return {"skipped": "benchmarks/gui_tick.py printed no JSON object"}
    return {"result": data}


# --- their sections of docs/benchmarks.md (report.py puts them in place) -------------


def overhead_section(results: dict[str, Any]) -> list[str]:
    over = results.get("overhead") or {}
    if "skipped" in over:
        return [f"Skipped: {over['skipped']}\n"]
    if not over:
        return ["Not run.\n"]
    lines = [
        f"`benchmarks/monitor_overhead.py` on {over['model_key']}: `{over['strategy']}`, "
        f"{over['workers']} workers, discard mode, cold, {over['pairs']} pairs alternating "
        f"(monitored first in every other pair).\n",
        "| monitored MB/s | unmonitored MB/s | ratio per pair | median ratio | overhead | "
        "sampler CPU (share of one core) |\n| ---: | ---: | --- | ---: | ---: | ---: |\n"
        f"| {over['median_mbps_monitored']:,.0f} | {over['median_mbps_unmonitored']:,.0f} | "
        f"{', '.join(f'{r:.3f}' for r in over['ratios'])} | {over['median_ratio']:.3f} | "
        f"{over['overhead']:.1%} | {over['sampler_core_share_median']:.2%} |\n",
    ]
    if "judged_on" in over:  # results of this version of the benchmark
        costs = ", ".join(
            f"{name} {us:.0f} µs" for name, us in over["source_cpu_us_per_sample"].items()
        )
        lines.append(
            "The target is judged on the sampler's CPU share: the CPU its thread used from the "
            "first sample to the last, beside the load, as a share of one core (its baselines "
            "before the load and its final sample after it left out; with them, over the load's "
            f"time: {over['sampler_thread_share_median']:.2%}). The sampler can slow a load "
            "only by taking CPU from it, so this bounds the overhead; the per-pair ratios "
            "spread far more than 3 % on a shared machine and are shown as evidence only. "
            f"Sampler CPU per sample: {costs}.\n"
        )
    return lines


def plan_section(results: dict[str, Any]) -> list[str]:
    plan = results.get("plan") or {}
    if "in_memory_s" not in plan:
        return [f"Skipped: {plan.get('skipped', 'not run')}\n"]
    load = plan.get("whole_load") or {}
    return [
        f"{plan['tensors']:,} tensors, {plan['workers']} workers, "
        f"{plan['chunk'] // MiB} MiB reads. `partition` + `coalesce` on a `Model` built in "
        f"memory: **{plan['in_memory_s'] * 1000:.0f} ms**. A real safetensors file of "
        f"{plan['tensors']:,} 32-byte tensors ({plan['header_bytes'] / 1e6:.1f} MB header): "
        f"`open_model` {plan['open_model_s'] * 1000:.0f} ms + plan "
        f"{plan['plan_after_open_s'] * 1000:.0f} ms = **{plan['open_and_plan_s'] * 1000:.0f} "
        f"ms** (medians of 3). A whole `sequential` load of that file ({load.get('status')}) "
        f"took {load.get('wall_s', 0):.2f} s wall, spawn and parse in every worker "
        f"included.\n"
    ]


def gui_section(results: dict[str, Any]) -> list[str]:
    tick = results.get("gui_tick") or {}
    head = (
        "<!-- GUI tick: filled by benchmarks/run.py from `python -m benchmarks.gui_tick` "
        "(QT_QPA_PLATFORM=offscreen) when that script exists and prints JSON. -->\n"
    )
    if "result" not in tick:
        return [head, f"*Placeholder:* {tick.get('skipped', 'not run')}.\n"]
    lines = ["| measure | value |", "| --- | --- |"]
    for key, value in tick["result"].items():
        shown = (
            json.dumps(value, separators=(", ", ": "), default=str)
            if isinstance(value, dict | list)
            else value
        )
        lines.append(
            f"| {key} | `{shown}` |" if isinstance(value, dict | list) else f"| {key} | {shown} |"
        )
    return [
        head,
        "From `python -m benchmarks.gui_tick` (its own defaults), run by this command.\n",
        "\n".join(lines) + "\n",
    ]
