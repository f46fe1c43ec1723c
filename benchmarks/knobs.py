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
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.codec import to_json
from benchmarks.envs import EnvUnavailable, fuse_mount, throttled_disk
from modelmon.core.runs import stop_child
from modelmon.core.system import locate_readahead, readahead_unavailable, recover_readahead

ROOT = Path(__file__).resolve().parents[1]
READAHEAD_PAIR = (128, 4096)  # KiB: the kernel's default, and the "raise it" advice
READAHEAD_STRATEGIES = ("mmap", "sequential")
STREAM_PAIR = ("stream", "sequential")
RUN_TIMEOUT_S = 900.0
Say = Callable[[str], None]
Wrap = Callable[[list[str]], list[str]]
OnStart = Callable[[subprocess.Popen[str]], None]


@dataclass(frozen=True)
class KnobRun:
    """One ``modelmon load --json`` child: its figures, or why it failed."""

    ok: bool
    restored: list[str]  # restore records applied after it (a child killed mid-run)
    error: str | None = None
    mbps: float | None = None
    seconds: float | None = None
    first_block_s: float | None = None
    half_blocks_s: float | None = None
    cold: bool = False


@dataclass(frozen=True)
class KnobRow:
    """One (strategy, readahead) configuration over its rounds."""

    strategy: str
    readahead_kb: int | None
    runs: int  # completed
    failed: list[str]
    all_cold: bool
    median_mbps: float | None
    median_seconds: float | None
    median_first_block_s: float | None
    median_half_blocks_s: float | None
    mbps: list[float]


@dataclass
class ReadaheadSection:
    device: str | None = None
    before_kb: int | None = None
    after_kb: int | None = None
    table: list[KnobRow] = field(default_factory=list)
    skipped: str | None = None


@dataclass(frozen=True)
class Section:
    rows: list[KnobRow] = field(default_factory=list)
    skipped: str | None = None


@dataclass
class KnobsResult:
    model: str
    repeats: int
    readahead: ReadaheadSection
    read_bps: int | None = None  # the throttle, where it was made
    read_iops: int | None = None
    stream_hdd: Section = field(default_factory=Section)
    stream_fuse: Section | None = None


def _quiet(_: str) -> None:
    return None


def load_argv(path: str, strategy: str, readahead_kb: int | None) -> list[str]:
    argv = [sys.executable, "-m", "modelmon", "load", path, "--strategy", strategy]
    argv += ["--cache", "cold", "--json"]
    return argv + (["--readahead", str(readahead_kb)] if readahead_kb is not None else [])


def one_load(argv: list[str], on_start: OnStart | None = None) -> KnobRun:
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
        restored = list(recover_readahead())
    if child.returncode != 0 or not out.strip():
        last = (err.strip().splitlines() or [f"exit code {child.returncode}"])[-1]
        return KnobRun(False, restored, error=last)
    data = json.loads(out)  # the CLI's own JSON result
    return KnobRun(
        data["status"] == "ok",
        restored,
        mbps=data["mbps"],
        seconds=data["seconds"],
        first_block_s=data.get("first_block_seconds"),
        half_blocks_s=data.get("half_blocks_seconds"),
        cold=bool(data["cache"]["cold"]),
    )


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def alternate(
    configs: Sequence[tuple[str, int | None]],
    path: str,
    repeats: int,
    wrap: Wrap,
    say: Say,
    on_start: OnStart | None = None,
) -> list[KnobRow]:
    """``repeats`` rounds of every (strategy, readahead) config, the order rotated each round
    so that no config always runs first (drift of a shared machine falls on all alike); one
    row per config with its runs and medians."""
    runs: dict[tuple[str, int | None], list[KnobRun]] = {c: [] for c in configs}
    for round_number in range(repeats):
        shift = round_number % len(configs)
        for config in [*configs[shift:], *configs[:shift]]:
            strategy, kb = config
            result = one_load(wrap(load_argv(path, strategy, kb)), on_start)
            runs[config].append(result)
            figure = f"{result.mbps:.0f} MB/s" if result.ok else result.error
            say(f"  {strategy} readahead={kb or 'as is'}: {figure}")
    rows = []
    for (strategy, kb), done in runs.items():
        good = [r for r in done if r.ok]
        rows.append(
            KnobRow(
                strategy,
                kb,
                len(good),
                [r.error or "" for r in done if not r.ok],
                all(r.cold for r in good),
                _median([r.mbps for r in good]),
                _median([r.seconds for r in good]),
                _median([r.first_block_s for r in good]),
                _median([r.half_blocks_s for r in good]),
                [r.mbps for r in good if r.mbps is not None],
            )
        )
    return rows


def run(
    model: Path,
    scratch: Path,
    *,
    repeats: int = 3,
    say: Say = _quiet,
    read_bps: int = 150 << 20,
    read_iops: int = 200,
    fuse: bool = True,
    on_start: OnStart | None = None,
) -> KnobsResult:
    """Every section (``markdown`` renders them). ``on_start`` sees each load child as it
    starts (a test kills one mid-way with it)."""
    path = str(model.resolve())
    knob = locate_readahead(path)
    section = ReadaheadSection()
    if knob is None:
        section.skipped = f"{path} has no readahead setting"
    else:
        section.device, section.before_kb = knob.device, knob.read_kb()
    results = KnobsResult(path, repeats, section)
    try:
        with throttled_disk(scratch, read_bps, read_iops) as throttle:
            results.read_bps, results.read_iops = read_bps, read_iops
            reason = readahead_unavailable([path])
            if knob is not None and reason is None:
                say(f"knobs: readahead {READAHEAD_PAIR} KiB on the throttled disk")
                configs = [(s, kb) for s in READAHEAD_STRATEGIES for kb in READAHEAD_PAIR]
                section.table = alternate(configs, path, repeats, throttle.command, say, on_start)
            elif knob is not None:
                section.skipped = reason
            say("knobs: stream against sequential on the throttled disk")
            pair = [(s, None) for s in STREAM_PAIR]
            results.stream_hdd = Section(
                alternate(pair, path, repeats, throttle.command, say, on_start)
            )
    except EnvUnavailable as exc:
        results.stream_hdd = Section(skipped=str(exc))
        section.skipped = section.skipped or str(exc)
    finally:
        recover_readahead()
        if knob is not None:
            section.after_kb = knob.read_kb()
    if fuse:
        try:
            with fuse_mount(model.parent, scratch / "mnt-knobs") as mounted:
                say("knobs: stream against sequential on the FUSE mount")
                pair = [(s, None) for s in STREAM_PAIR]
                where = str(mounted / model.name)
                results.stream_fuse = Section(alternate(pair, where, repeats, list, say, on_start))
        except EnvUnavailable as exc:
            results.stream_fuse = Section(skipped=str(exc))
    return results


def _number(value: float | None, digits: int = 0, unit: str = "") -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def _table(rows: list[KnobRow], with_readahead: bool) -> list[str]:
    head = "| strategy | " + ("readahead | " if with_readahead else "")
    head += "runs | median MB/s | runs' MB/s | median s | first block s | half of blocks s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for row in rows:
        cells = [row.strategy]
        if with_readahead:
            cells.append(f"{row.readahead_kb} KiB")
        cells += [
            str(row.runs) + ("" if row.all_cold else " (not all cold)"),
            _number(row.median_mbps),
            ", ".join(f"{m:.0f}" for m in row.mbps) or "–",
            _number(row.median_seconds, 2),
            _number(row.median_first_block_s, 3),
            _number(row.median_half_blocks_s, 3),
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if row.failed:
            lines.append(f"| {row.strategy}: {len(row.failed)} failed: {row.failed[0]} |")
    return lines


def markdown(results: KnobsResult) -> str:
    """The knobs' sections of docs/benchmarks.md."""
    out = ["## The disk's own knobs: readahead, and time to the first block", ""]
    shape = (
        f"{results.read_bps / 2**20:.0f} MiB/s, {results.read_iops} IOPS"
        if results.read_bps
        else "not made here"
    )
    out += [
        f"Model `{Path(results.model).name}`; {results.repeats} rounds of alternating "
        f"cold runs (the order rotates each round), medians. Throttled disk: {shape}. Each "
        "load is a `modelmon load --readahead` child that sets the device's value and puts it "
        "back.",
        "",
        "### Readahead 128 KiB against 4 MiB (throttled disk)",
        "",
    ]
    section = results.readahead
    if section.table:
        out += _table(section.table, with_readahead=True)
        same = section.before_kb == section.after_kb
        out += [
            "",
            f"Device `{section.device}` readahead: {section.before_kb} KiB before the "
            f"runs, {section.after_kb} KiB after"
            + (" (the same)." if same else " — NOT the same: see the runs' errors."),
        ]
    else:
        out.append(f"Not measured: {section.skipped or 'no readahead setting'}.")
    for found, title in (
        (results.stream_hdd, "throttled disk"),
        (results.stream_fuse, "FUSE mount"),
    ):
        out += ["", f"### stream against sequential ({title})", ""]
        if found is not None and found.rows:
            out += _table(found.rows, with_readahead=False)
        else:
            out.append(f"Not measured: {(found.skipped if found else None) or 'not run'}.")
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
        args.json.write_text(json.dumps(to_json(results), indent=1) + "\n")
    print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
