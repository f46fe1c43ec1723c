"""A real serving engine's cold start, end to end, as a user runs modelmon on it: vLLM's CPU
build (``./dev bench`` installs it into ``.venv-vllm``) serving a Llama-shaped checkpoint
written here, ready when its ``/health`` answers:
``python -m benchmarks.servers [--rounds 3] [--budget 1500] [--out F.json]``.

1. watched (``modelmon watch --ready-url``), from a verified cold page cache, ``--rounds``
   times: ready, the phases the bytes cut, vLLM's own lines placed on them, its "Loading
   weights took" beside the weights phase, the time in no line;
2. two load formats A/B'd (``modelmon bench``, ``--rounds`` pairs): the default loader
   against ``--load-format runai_streamer`` (``--safetensors-load-strategy eager`` where
   Run:ai's streamer is not installed beside vLLM);
3. its compile caches (torch.compile on: no ``--enforce-eager``), fresh against kept;
4. ``modelmon recommend --server`` within ``--budget``.

Every command is modelmon's CLI, run as a user runs it, and its JSON kept whole.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.models import ModelSpec, ensure_model

ROOT = Path(__file__).resolve().parent.parent
MODELMON = [sys.executable, "-m", "modelmon"]
# Llama-shaped, the TinyLlama vocabulary, 1.06 GB in fp16: weights that take seconds to
# arrive from a cold disk, beside vLLM's minute of imports and set-up on 2 cores.
MODEL = ModelSpec(
    "vllm-llama-f16",
    "Llama-shaped, 36 layers, hidden 1024, TinyLlama vocabulary, fp16, with its config.json",
    "safetensors",
    layers=36,
    hidden=1024,
    intermediate=2816,
    vocab=32000,
    transformers_config=True,
)
# The compile-cache experiment's: torch.compile on 2 cores takes minutes a layer stack, and
# what it compiles does not depend on the weights' values: two layers.
COMPILE_MODEL = ModelSpec(
    "vllm-llama-2-layers",
    "Llama-shaped, 2 layers, hidden 256, vocabulary 1,000, fp16, with its config.json",
    "safetensors",
    layers=2,
    hidden=256,
    intermediate=512,
    vocab=1000,
    transformers_config=True,
)
SERVE_WORDS = "--skip-tokenizer-init --dtype bfloat16 --max-model-len 256"
ENVIRONMENT = "VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1"
READY_TIMEOUT_S = 1200  # torch.compile on 2 cores takes minutes
Say = Callable[[str], None]


def vllm_executable() -> Path | None:
    """vLLM's ``vllm`` command: ``$MODELMON_VLLM``, else ``.venv-vllm``'s."""
    given = os.environ.get("MODELMON_VLLM")
    found = Path(given) if given else ROOT / ".venv-vllm" / "bin" / "vllm"
    return found if found.exists() else None


def unavailable() -> str | None:
    """Why vLLM cannot run here, or None."""
    vllm = vllm_executable()
    if vllm is None:
        return "vLLM's CPU build is not installed (./dev bench installs it into .venv-vllm)"
    try:
        done = subprocess.run(
            [str(vllm), "--version"], capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"vllm --version did not answer: {exc}"
    if done.returncode != 0:
        return f"vllm --version failed: {(done.stderr or done.stdout).strip()[-200:]}"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_spec(vllm: Path, port: int, *extra: str, eager: bool = True) -> str:
    words = [ENVIRONMENT, str(vllm), "serve", "{path}", SERVE_WORDS, f"--port {port}"]
    return " ".join([*words, *(["--enforce-eager"] if eager else []), *extra])


def modelmon(*args: str, timeout: float) -> dict[str, Any]:
    """A modelmon command's JSON (its exit code and last error line where it failed)."""
    done = subprocess.run(
        [*MODELMON, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"failed": f"exit {done.returncode}: {last}"}
    return dict(json.loads(done.stdout))


def _watched(report: dict[str, Any]) -> dict[str, Any]:
    """What a watch's JSON says of the cold start, for the table."""
    cold = report["cold_start"]
    phases = {p["name"]: p for p in cold["phases"]}
    lines = {line["name"]: line for line in cold["lines"]}
    weights = lines.get("Loading weights")
    return {
        "ready_s": cold["ready_s"],
        "phases": {name: p["seconds"] for name, p in phases.items()},
        "weights_mbps": (
            phases["weights"]["model_bytes"] / phases["weights"]["seconds"] / 1e6
            if "weights" in phases and phases["weights"]["seconds"] > 0
            else None
        ),
        "lines": {name: line["stated_s"] for name, line in lines.items()},
        "weights_line_s": weights["stated_s"] if weights else None,
        "weights_line_gap_s": (
            (
                weights["start_s"] - phases["weights"]["start_s"],
                weights["end_s"] - phases["weights"]["end_s"],
            )
            if weights and "weights" in phases
            else None
        ),
        "gaps": [
            {"s": round(g["seconds"], 2), "after": g["after"], "before": g["before"]}
            for g in cold["gaps"]
        ],
        "findings": sorted(f["code"] for f in report["findings"]),
        "cold": report["cache"]["cold"],
    }


def run(model: Path, small: Path, rounds: int, budget_s: float, say: Say) -> dict[str, Any]:
    """``model`` watched, A/B'd and recommended; ``small``'s compile caches fresh and kept."""
    vllm = vllm_executable()
    assert vllm is not None
    found: dict[str, Any] = {
        "model": str(model),
        "compile_model": str(small),
        "rounds": rounds,
        "vllm": str(vllm),
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}/health"
    ready = ["--ready-url", url, "--ready-timeout", str(READY_TIMEOUT_S)]
    command = serve_spec(vllm, port).replace("{path}", str(model.parent))
    watched = []
    for index in range(rounds):
        say(f"servers: vLLM watched, cold, round {index + 1} of {rounds}")
        report = modelmon(
            "watch",
            "--json",
            *ready,
            "--model",
            str(model),
            "--",
            *command.split(),
            timeout=READY_TIMEOUT_S + 120,
        )
        watched.append(report if "failed" in report else _watched(report))
    found["watched"] = watched
    runai = _runai_beside(vllm)
    change = "--load-format runai_streamer" if runai else "--safetensors-load-strategy eager"
    say(f"servers: A/B of the default loader against {change}, {rounds} pairs")
    found["formats"] = modelmon(
        "bench",
        str(model.parent),
        "--a",
        f"cmd: {serve_spec(vllm, port)}",
        "--b",
        f"cmd: {serve_spec(vllm, port, change)}",
        "-n",
        str(rounds),
        *ready,
        "--json",
        timeout=rounds * 2 * 600 + 1200,
    )
    found["formats_change"] = change
    say(f"servers: compile caches fresh against kept, {rounds} pairs (torch.compile on)")
    compiled = serve_spec(vllm, port, eager=False)
    found["compile"] = modelmon(
        "bench",
        str(small.parent),
        "--a",
        f"cmd: compile_cache=fresh {compiled}",
        "--b",
        f"cmd: compile_cache=kept {compiled}",
        "-n",
        str(rounds),
        *ready,
        "--json",
        timeout=rounds * 2 * 1200 + 2400,
    )
    say(f"servers: recommend --server, budget {budget_s:.0f} s")
    began = time.monotonic()
    found["recommend"] = modelmon(
        "recommend",
        str(model.parent),
        "--server",
        f"cmd: {serve_spec(vllm, port)}",
        "--budget",
        str(budget_s),
        *ready,
        "--json",
        timeout=budget_s * 1.5 + 1200,
    )
    found["recommend_wall_s"] = time.monotonic() - began
    return found


def _runai_beside(vllm: Path) -> bool:
    python = vllm.parent / "python"
    probe = "import runai_model_streamer"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, check=False)
    return done.returncode == 0


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def markdown(data: dict[str, Any]) -> str:
    """The section of docs/benchmarks.md."""
    out = [
        "## A real server: vLLM (CPU build), its cold start watched, A/B'd and recommended\n",
        "vLLM 0.32's CPU build (`./dev bench` installs it into `.venv-vllm`) serving "
        f"`{MODEL.key}` ({MODEL.description}) with `{SERVE_WORDS}` and `--enforce-eager` "
        "(torch.compile only where said: it takes minutes on 2 cores), ready when "
        "`/health` answers (`--ready-url`), every start from a verified cold page cache, "
        "nothing else running. Every figure is modelmon's CLI as a user runs it: "
        "`python -m benchmarks.servers --rounds 3` (raw: docs/benchmarks/servers.json).\n",
    ]
    watched = [w for w in data.get("watched", []) if "failed" not in w]
    if watched:
        median = {
            key: _median([w["phases"].get(key, 0.0) for w in watched])
            for key in ("before", "weights", "after")
        }
        ready = _median([w["ready_s"] for w in watched]) or 0.0
        line = _median([w["weights_line_s"] for w in watched if w["weights_line_s"] is not None])
        gaps = [g for w in watched for g in w["gaps"]]
        out += [
            "### Watched: ready, its phases by the bytes and by its own lines\n",
            "| round | ready | before | weights (bytes) | 'Loading weights took' | after | "
            "'init engine ... took' | in no line | findings |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for index, w in enumerate(watched, start=1):
            nothing = "; ".join(f"{g['s']:.1f} s {g['after']} → {g['before']}" for g in w["gaps"])
            engine = w["lines"].get("init engine")
            out.append(
                f"| {index} | {w['ready_s']:.1f} s | {w['phases'].get('before', 0):.1f} s | "
                f"{w['phases'].get('weights', 0):.2f} s | "
                f"{w['weights_line_s'] if w['weights_line_s'] is not None else '–'} s | "
                f"{w['phases'].get('after', 0):.1f} s | "
                f"{f'{engine:.2f} s' if engine is not None else '–'} | {nothing or '–'} | "
                f"{', '.join(w['findings'])} |"
            )
        out.append("")
        out.append(
            f"Medians: ready {ready:.1f} s; before the weights {median['before'] or 0:.1f} s "
            f"({(median['before'] or 0) / ready:.0%}), the weights {median['weights'] or 0:.2f} s "
            f"by the bytes against {line if line is not None else '–'} s by vLLM's own line, "
            f"after them {median['after'] or 0:.1f} s. Time in no line: "
            f"{len(gaps)} stretch(es) over the rounds.\n"
        )
    out += _ab_section(
        "### Two load formats, A/B'd by time to ready\n",
        data.get("formats", {}),
        f"A: the default loader; B: `{data.get('formats_change', '?')}`.",
    )
    out += _ab_section(
        "### Its compile caches: fresh against kept (torch.compile on)\n",
        data.get("compile", {}),
        f"`{COMPILE_MODEL.key}` ({COMPILE_MODEL.description}: what torch.compile compiles "
        "does not depend on the weights' values, and on 2 cores it takes minutes a layer "
        "stack), without `--enforce-eager`. A: `compile_cache=fresh` (a new pod's); B: "
        "`compile_cache=kept` (a persisted volume), its cache filled by its uncounted first "
        "start.",
    )
    rec = data.get("recommend", {})
    out.append("### recommend --server\n")
    if "failed" in rec or not rec:
        out.append(f"Failed: {rec.get('failed', 'not run')}.\n")
    else:
        out.append("```")
        out += rec.get("answer", [])
        out.append("```\n")
    return "\n".join(out)


def _ab_section(title: str, ab: dict[str, Any], sides: str) -> list[str]:
    out = [title, sides + "\n"]
    if "failed" in ab or not ab:
        return [*out, f"Failed: {ab.get('failed', 'not run')}.\n"]
    a, b, verdict = ab["a"], ab["b"], ab["verdict"]
    # A server's own line that some run did not print is no phase of the pairs (Run:ai's
    # streamer prints no 'Loading weights'): as modelmon compares them.
    printed = [set(run.get("phases") or {}) for run in ab.get("runs", [])]
    phases = "; ".join(
        f"{s['name']} {s['a_s']:.1f} → {s['b_s']:.1f} s{' (differs)' if s['differs'] else ''}"
        for s in ab["phases"]
        if not s["name"].startswith("line: ") or all(s["name"] in seen for seen in printed)
    )
    out += [
        "| side | ready (median) | min–max | runs |",
        "| --- | ---: | ---: | ---: |",
        f"| A | {a['median_ready_s']:.1f} s | {a['min_ready_s']:.1f}–{a['max_ready_s']:.1f} s | "
        f"{a['runs']} |",
        f"| B | {b['median_ready_s']:.1f} s | {b['min_ready_s']:.1f}–{b['max_ready_s']:.1f} s | "
        f"{b['runs']} |",
        "",
        f"Verdict: {verdict['text']}, A's time to ready over B's {verdict['median_ratio']:.2f} "
        f"(pairs {verdict['min_ratio']:.2f}–{verdict['max_ratio']:.2f}). Phases: {phases}.\n",
    ]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=1500.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--scratch", type=Path, default=ROOT / "tmp" / "bench")
    args = parser.parse_args(argv)
    why = unavailable()
    if why is not None:
        sys.exit(f"servers: {why}")
    model, _ = ensure_model(MODEL, args.scratch)
    small, _ = ensure_model(COMPILE_MODEL, args.scratch)
    data = run(model, small, args.rounds, args.budget, lambda line: print(line, flush=True))
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=1))
    print(markdown(data))


if __name__ == "__main__":
    main()
