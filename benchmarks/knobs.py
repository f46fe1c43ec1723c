"""The disk's own knobs: device readahead, and time to the first block.

    .venv/bin/python -m benchmarks.knobs MODEL [--scratch DIR] [--repeats 3]

On the throttled disk (``envs.throttled_disk``, a blkio cgroup shaped like a hard disk):
readahead 128 KiB against 4 MiB for ``mmap`` and ``sequential``, in alternating cold runs
(each load a ``modelmon load --readahead`` child inside the cgroup, which sets the value and
puts it back). Then ``stream`` against ``sequential`` on the same disk and on the FUSE mount
(``envs.fuse_mount``): MB/s, and when the first and half of the blocks were complete.

The device's value is read before and after the whole run; after every child, a restore
record a killed child left behind is applied (``recover_readahead``), so the value is back even
when a run is killed mid-way.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.envs import EnvUnavailable, fuse_mount, throttled_disk
from modelmon.core import locate_readahead, readahead_unavailable, recover_readahead, stop_child

ROOT = Path(__file__).resolve().parents[1]
READAHEAD_PAIR = (128, 4096)  # KiB: the kernel's default, and the "raise it" advice
READAHEAD_STRATEGIES = ("mmap", "sequential")
STREAM_PAIR = ("stream", "sequential")
RUN_TIMEOUT_S = 900.0
Say = Callable[[str], None]
Wrap = Callable[[list[str]], list[str]]


def _quiet(_: str) -> None:
    return None


def load_argv(path: str, strategy: str, readahead_kb: int | None) -> list[str]:
    argv = [sys.executable, "-m", "modelmon", "load", path, "--strategy", strategy]
    argv += ["--cache", "cold", "--json"]
    return argv + (["--readahead", str(readahead_kb)] if readahead_kb is not None else [])


def one_load(
    argv: list[str], on_start: Callable[[subprocess.Popen[str]], None] | None = None
) -> dict[str, Any]:
    """One ``modelmon load --json`` child; its figures, or why it failed. Afterwards the
    restore record of a child that died with readahead changed is applied."""
    child = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        if on_start is not None:
            on_start(child)
        out, err = child.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        out, err = "", f"no result within {RUN_TIMEOUT_S:.0f} s"
    finally:
        stop_child(child)
        restored = recover_readahead()
    if child.returncode != 0 or not out.strip():
        last = (err.strip().splitlines() or [f"exit code {child.returncode}"])[-1]
        return {"ok": False, "error": last, "exit_code": child.returncode, "restored": restored}
    data = json.loads(out)
    return {
        "ok": data["status"] == "ok",
        "mbps": data["mbps"],
        "seconds": data["seconds"],
        "first_block_s": data.get("first_block_seconds"),
        "half_blocks_s": data.get("half_blocks_seconds"),
        "cold": bool(data["cache"]["cold"]),
        "restored": restored,
    }


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get("ok") and r.get(key) is not None]
    return statistics.median(values) if values else None


def alternate(
    configs: Sequence[tuple[str, int | None]],
    path: str,
    repeats: int,
    wrap: Wrap,
    say: Say,
    on_start: Callable[[subprocess.Popen[str]], None] | None = None,
) -> list[dict[str, Any]]:
    """``repeats`` rounds of every (strategy, readahead) config, the order rotated each round
    so that no config always runs first (drift of a shared machine falls on all alike); one
    row per config with its runs and medians."""
    runs: dict[tuple[str, int | None], list[dict[str, Any]]] = {c: [] for c in configs}
    for round_number in range(repeats):
        shift = round_number % len(configs)
        for config in [*configs[shift:], *configs[:shift]]:
            strategy, kb = config
            result = one_load(wrap(load_argv(path, strategy, kb)), on_start)
            runs[config].append(result)
            figure = f"{result['mbps']:.0f} MB/s" if result.get("ok") else result.get("error")
            say(f"  {strategy} readahead={kb or 'as is'}: {figure}")
    return [
        {
            "strategy": strategy,
            "readahead_kb": kb,
            "runs": len([r for r in rows if r.get("ok")]),
            "failed": [r.get("error") for r in rows if not r.get("ok")],
            "all_cold": all(r.get("cold") for r in rows if r.get("ok")),
            "median_mbps": _median(rows, "mbps"),
            "median_seconds": _median(rows, "seconds"),
            "median_first_block_s": _median(rows, "first_block_s"),
            "median_half_blocks_s": _median(rows, "half_blocks_s"),
            "mbps": [r["mbps"] for r in rows if r.get("ok")],
        }
        for (strategy, kb), rows in runs.items()
    ]


def run(
    model: Path,
    scratch: Path,
    *,
    repeats: int = 3,
    say: Say = _quiet,
    read_bps: int = 150 << 20,
    read_iops: int = 200,
    fuse: bool = True,
    on_start: Callable[[subprocess.Popen[str]], None] | None = None,
) -> dict[str, Any]:
    """Every section as a dict (``markdown`` renders it). ``on_start`` sees each load child
    as it starts (a test kills one mid-way with it)."""
    path = str(model.resolve())
    knob = locate_readahead(path)
    results: dict[str, Any] = {"model": path, "repeats": repeats}
    if knob is None:
        results["readahead"] = {"skipped": f"{path} has no readahead setting"}
    else:
        results["readahead"] = {"device": knob.device, "before_kb": knob.read_kb()}
    try:
        with throttled_disk(scratch, read_bps, read_iops) as throttle:
            results["throttle"] = {"read_bps": read_bps, "read_iops": read_iops}
            reason = readahead_unavailable([path])
            if knob is not None and reason is None:
                say(f"knobs: readahead {READAHEAD_PAIR} KiB on the throttled disk")
                configs = [(s, kb) for s in READAHEAD_STRATEGIES for kb in READAHEAD_PAIR]
                results["readahead"]["table"] = alternate(
                    configs, path, repeats, throttle.command, say, on_start
                )
            elif knob is not None:
                results["readahead"]["skipped"] = reason
            say("knobs: stream against sequential on the throttled disk")
            results["stream_hdd"] = alternate(
                [(s, None) for s in STREAM_PAIR], path, repeats, throttle.command, say, on_start
            )
    except EnvUnavailable as exc:
        results["stream_hdd"] = {"skipped": str(exc)}
        results["readahead"].setdefault("skipped", str(exc))
    finally:
        recover_readahead()
        if knob is not None:
            results["readahead"]["after_kb"] = knob.read_kb()
    if fuse:
        try:
            with fuse_mount(model.parent, scratch / "mnt-knobs") as mounted:
                say("knobs: stream against sequential on the FUSE mount")
                results["stream_fuse"] = alternate(
                    [(s, None) for s in STREAM_PAIR],
                    str(mounted / model.name),
                    repeats,
                    list,
                    say,
                    on_start,
                )
        except EnvUnavailable as exc:
            results["stream_fuse"] = {"skipped": str(exc)}
    return results


def _number(value: float | None, digits: int = 0, unit: str = "") -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def _table(rows: list[dict[str, Any]], with_readahead: bool) -> list[str]:
    head = "| strategy | " + ("readahead | " if with_readahead else "")
    head += "runs | median MB/s | runs' MB/s | median s | first block s | half of blocks s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        cells = [row["strategy"]]
        if with_readahead:
            cells.append(f"{row['readahead_kb']} KiB")
        cells += [
            str(row["runs"]) + ("" if row["all_cold"] else " (not all cold)"),
            _number(row["median_mbps"]),
            ", ".join(f"{m:.0f}" for m in row["mbps"]) or "–",
            _number(row["median_seconds"], 2),
            _number(row["median_first_block_s"], 3),
            _number(row["median_half_blocks_s"], 3),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if row["failed"]:
            lines.append(f"| {row['strategy']}: {len(row['failed'])} failed: {row['failed'][0]} |")
    return lines


def markdown(results: dict[str, Any]) -> str:
    """The knobs' sections of docs/benchmarks.md."""
    out = ["## The disk's own knobs: readahead, and time to the first block", ""]
    if "skipped" in results:
        return "\n".join([*out, f"Not run: {results['skipped']}.", ""])
    throttle = results.get("throttle")
    shape = (
        f"{throttle['read_bps'] / 2**20:.0f} MiB/s, {throttle['read_iops']} IOPS"
        if throttle
        else "not made here"
    )
    out += [
        f"Model `{Path(results['model']).name}`; {results['repeats']} rounds of alternating "
        f"cold runs (the order rotates each round), medians. Throttled disk: {shape}. Each "
        "load is a `modelmon load --readahead` child that sets the device's value and puts it "
        "back.",
        "",
        "### Readahead 128 KiB against 4 MiB (throttled disk)",
        "",
    ]
    section = results["readahead"]
    if section.get("table"):
        out += _table(section["table"], with_readahead=True)
        same = section.get("before_kb") == section.get("after_kb")
        out += [
            "",
            f"Device `{section['device']}` readahead: {section.get('before_kb')} KiB before the "
            f"runs, {section.get('after_kb')} KiB after"
            + (" (the same)." if same else " — NOT the same: see the runs' errors."),
        ]
    else:
        out.append(f"Not measured: {section.get('skipped', 'no readahead setting')}.")
    for key, title in (("stream_hdd", "throttled disk"), ("stream_fuse", "FUSE mount")):
        out += ["", f"### stream against sequential ({title})", ""]
        rows = results.get(key)
        if isinstance(rows, list):
            out += _table(rows, with_readahead=False)
        else:
            out.append(f"Not measured: {(rows or {}).get('skipped', 'not run')}.")
    out += [
        "",
        "First block: when the first block in use order (embeddings, then layer 0) was "
        "complete; half: when the first half of the blocks in use order all were. A loader "
        "that starts using layers as they arrive waits that long.",
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--scratch", type=Path, default=ROOT / "tmp" / "knobs")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-fuse", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    args.scratch.mkdir(parents=True, exist_ok=True)

    def say(text: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    results = run(args.model, args.scratch, repeats=args.repeats, say=say, fuse=not args.no_fuse)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
