"""A server's cold start as ``watch`` sees it, against the server's own clock:
``python -m benchmarks.cold_start [--model PATH] [--ranks 4] [--rounds 3] [--out F]``.

The server is the suite's test bed (``tests/serve_bed.py``: imports, the weights, a CPU-bound
step, then it listens), on the bench's 2.2 GB TinyLlama-shaped model unless ``--model`` names
another, in three shapes: one rank; ``--ranks`` ranks that each read the whole model and keep
a copy until all have (``whole``, as engines that narrow tensors after reading them); the same
ranks each reading only its rows (``slice``). Each run is watched from a verified cold cache
(``watch``'s own default) and ends at ready; the shapes alternate round by round.

Reported per shape, medians over the rounds: ready as the watch saw it against the time the
server printed it listened (target: within 5 % or 0.3 s), the weights phase's start and end
against the server's first and last model byte (within 10 % of the phase or 0.3 s), what
each rank read against the model, the ranks' copies against N × the model (``whole``: within
15 %), and the findings the watch named.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.models import TINYLLAMA, ensure_model
from modelmon.core import Watch, WatchResult, open_model

BED = Path(__file__).resolve().parent.parent / "tests" / "serve_bed.py"
SHAPES = ("1 rank", "whole", "slice")


@dataclass
class Shape:
    name: str
    ready_gap: list[float] = field(default_factory=list)  # watch's ready - the server's, s
    ready_s: list[float] = field(default_factory=list)  # the server's own
    weights_start_gap: list[float] = field(default_factory=list)
    weights_end_gap: list[float] = field(default_factory=list)
    weights_s: list[float] = field(default_factory=list)  # the server's first to last byte
    read_share: list[float] = field(default_factory=list)  # a rank's model bytes / the model
    held_ratio: list[float] = field(default_factory=list)  # the ranks' copies / the model
    findings: list[list[str]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def server_events(log: Path) -> dict[str, list[float]]:
    """The server's timeline: event → seconds since it started, each time it said it."""
    found: dict[str, list[float]] = {}
    for line in log.read_text().splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "serve_bed:" and words[1] != "listening":
            found.setdefault(words[1], []).append(float(words[2]))
    return found


def watch_once(model: Path, args: list[str], folder: Path) -> tuple[WatchResult, dict]:
    log = folder / "bed.log"
    log.unlink(missing_ok=True)
    with open(log, "ab") as output:
        result = Watch(
            [sys.executable, str(BED), str(model), "--import-s", "1", "--post-s", "1", *args],
            model=str(model),
            stdout=output.fileno(),
            stderr=output.fileno(),
        ).run()
    return result, server_events(log)


def record(shape: Shape, result: WatchResult, events: dict[str, list[float]]) -> None:
    cold = result.cold_start
    if cold is None or cold.ready_s is None or "ready" not in events:
        shape.failures.append(f"{result.status}: {result.error or 'never ready'}")
        return
    ready = min(events["ready"])
    shape.ready_s.append(ready)
    shape.ready_gap.append(cold.ready_s - ready)
    weights = next(p for p in cold.phases if p.name == "weights")
    began, ended = min(events["first-byte"]), max(events["last-byte"])
    shape.weights_s.append(ended - began)
    shape.weights_start_gap.append(weights.start_s - began)
    shape.weights_end_gap.append(weights.end_s - ended)
    size = result.model_bytes or 1
    shape.read_share.append(statistics.median(r.model_bytes / size for r in cold.ranks))
    shape.held_ratio.append(sum(r.held_bytes for r in cold.ranks) / size)
    shape.findings.append(sorted(f.code for f in result.findings))


def measure(model: Path, ranks: int, rounds: int) -> dict[str, Any]:
    shapes = {name: Shape(name) for name in SHAPES}
    argv = {
        "1 rank": [],
        "whole": ["--ranks", str(ranks), "--mode", "whole"],
        "slice": ["--ranks", str(ranks), "--mode", "slice"],
    }
    with tempfile.TemporaryDirectory(prefix="modelmon-cold-start-") as scratch:
        for index in range(rounds):
            order = SHAPES[index % 3 :] + SHAPES[: index % 3]
            for name in order:
                result, events = watch_once(model, argv[name], Path(scratch))
                record(shapes[name], result, events)
                print(f"round {index + 1} {name}: {summary_line(shapes[name])}", flush=True)
    return {
        "model": str(model),
        "model_bytes": open_model(model).total_bytes,
        "ranks": ranks,
        "rounds": rounds,
        "shapes": {name: asdict(shape) for name, shape in shapes.items()},
    }


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summary_line(shape: Shape) -> str:
    if not shape.ready_s:
        return f"failed: {shape.failures[-1] if shape.failures else '?'}"
    return (
        f"ready {_median(shape.ready_s):.2f} s (watch {_median(shape.ready_gap):+.2f} s), "
        f"weights {_median(shape.weights_s):.2f} s (start {_median(shape.weights_start_gap):+.2f}, "
        f"end {_median(shape.weights_end_gap):+.2f}), a rank read "
        f"{_median(shape.read_share):.2f}× the model, copies {_median(shape.held_ratio):.2f}×"
    )


def table(data: dict[str, Any]) -> str:
    """The markdown table of ``measure``'s data."""
    lines = [
        f"N = {data['ranks']} ranks, {data['rounds']} rounds, medians; gaps are the watch's "
        "figure less the server's own.",
        "",
        "| shape | ready (server) | ready gap | weights (server) | start gap | end gap "
        "| a rank read | copies held | findings | failed |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, raw in data["shapes"].items():
        shape = Shape(**raw)
        codes = sorted(set().union(*map(set, shape.findings))) if shape.findings else []
        ready = _median(shape.ready_s)
        lines.append(
            f"| {name} | {ready:.2f} s | {_median(shape.ready_gap):+.2f} s "
            f"({abs(_median(shape.ready_gap)) / ready * 100:.1f} %) | "
            f"{_median(shape.weights_s):.2f} s | {_median(shape.weights_start_gap):+.2f} s | "
            f"{_median(shape.weights_end_gap):+.2f} s | {_median(shape.read_share):.2f}× | "
            f"{_median(shape.held_ratio):.2f}× | {', '.join(codes) or '–'} | "
            f"{len(shape.failures)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="modelmon-cold-start-model-") as scratch:
        model = args.model or ensure_model(TINYLLAMA, Path(scratch))[0]
        data = measure(model, args.ranks, args.rounds)
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=1))
    print(table(data))


if __name__ == "__main__":
    main()
