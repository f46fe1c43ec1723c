"""Users' own loaders: each engine as users run it, with the change ``recommend --engine``
chose, and modelmon's best, on the throttled disk and the FUSE mount.

    .venv/bin/python -m benchmarks.engines --jobs JOBS.json --out OUT.json   # one env's jobs

For each engine installed here (the safetensors library always; transformers and
llama-cpp-python where installed), one job per environment:

1. ``modelmon recommend MODEL --engine E --json`` in a child process (in the cgroup on hdd):
   its ``[loader]`` table names the engine as it is, the change it chose (if any) and the
   MB/s its measured snippet reported.
2. Rounds (``repeats``, the order rotated each round), every run cold, watched, in a fresh
   process: the engine as users run it, the engine with the change, and modelmon's best
   applied as a user applies it (``modelmon.core.load(path, config=FILE)`` with the file
   recommend wrote, run as a command), all judged the same way, by the bytes that arrived.

The row says what each user gains by the change (the median of the rounds' paired ratios)
and by modelmon's best, and whether the change's MB/s, applied again in fresh processes, is
within ``TOLERANCE`` of what recommend reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from modelmon.core import engine_unavailable, open_model, parse_program, run_program, stop_child

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.10  # applied again, the reported MB/s holds within this
ENGINES_TRIED = ("safetensors", "transformers", "llamacpp")
RECOMMEND_TIMEOUT_S = 1800.0
Say = Callable[[str], None]


@dataclass(frozen=True)
class EngineJob:
    env: str
    engine: str
    path: str  # what {path} stands for: the model's folder (safetensors, transformers) or file
    budget_s: float
    repeats: int
    scratch: str  # where the config file goes


def _modelmon_best(config: Path) -> str:
    """modelmon's best as a user applies it: core.load with the config file, as a command."""
    code = "import sys, modelmon.core as m; m.load(sys.argv[1], config=sys.argv[2])"
    return f"cmd: {sys.executable} -c '{code}' {{path}} {config}"


def _recommend(job: EngineJob, config: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "modelmon", "recommend", job.path, "--engine", job.engine]
    argv += ["--budget", f"{job.budget_s:g}", "--json", "-o", str(config)]
    child = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(timeout=RECOMMEND_TIMEOUT_S)
    finally:
        stop_child(child)
    if child.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"recommend exited {child.returncode}")
    return dict(json.loads(out))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_job(job: EngineJob, say: Say) -> dict[str, Any]:
    config = Path(job.scratch) / f"{job.env}-{job.engine}.toml"
    say(f"engines: {job.env} · {job.engine}: recommend --engine {job.engine}")
    document = _recommend(job, config)
    loader = document["loader"]
    entries = {"as_is": loader["as_is"], "modelmon": _modelmon_best(config)}
    if "change" in loader:
        entries["change"] = loader["change"]
    reported_key = "change" if "change" in loader else "as_is"
    model = open_model(job.path)
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key in entries}
    keys = list(entries)
    for number in range(job.repeats):
        shift = number % len(keys)
        for key in keys[shift:] + keys[:shift]:
            outcome = run_program(model, parse_program(entries[key]), path=job.path).load
            runs[key].append(
                {
                    "round": number,
                    "status": outcome.status,
                    "error": outcome.error,
                    "mbps": outcome.mbps,
                    "cold": outcome.cache.cold,
                }
            )
            figure = f"{outcome.mbps:.0f} MB/s" if outcome.status == "ok" else outcome.error
            say(f"  {key}: {figure}")
    return {
        **asdict(job),
        "loader": loader,
        "entries": entries,
        "runs": runs,
        **_figures(runs, loader, reported_key),
    }


def _paired(runs: dict[str, list[dict[str, Any]]], top: str, bottom: str) -> list[float]:
    below = {r["round"]: r["mbps"] for r in runs.get(bottom, []) if r["status"] == "ok"}
    return [
        r["mbps"] / below[r["round"]]
        for r in runs.get(top, [])
        if r["status"] == "ok" and below.get(r["round"], 0) > 0
    ]


def _figures(
    runs: dict[str, list[dict[str, Any]]], loader: dict[str, Any], reported_key: str
) -> dict[str, Any]:
    medians = {
        key: _median([r["mbps"] for r in rows if r["status"] == "ok"]) for key, rows in runs.items()
    }
    reported = loader.get(f"{reported_key}_mbps")
    again = medians.get(reported_key)
    ratio = again / reported if again and reported else None
    return {
        "medians": medians,
        "gain": _median(_paired(runs, "change", "as_is")),
        "modelmon_gain": _median(_paired(runs, "modelmon", "as_is")),
        "reported": {"spec": loader.get(reported_key), "mbps": reported},
        "applied_again": again,
        "applied_ratio": ratio,
        "within": ratio is not None and abs(ratio - 1) <= TOLERANCE,
        "all_cold": all(r["cold"] for rows in runs.values() for r in rows if r["status"] == "ok"),
    }


def jobs(
    env: str,
    paths: dict[str, Path],
    scratch: Path,
    budget_s: float,
    repeats: int,
    engines: tuple[str, ...] = ENGINES_TRIED,
) -> tuple[list[EngineJob], dict[str, str]]:
    """The jobs for ``env`` (``paths``: engine -> what its {path} is), and the engines left
    out with why."""
    chosen, skipped = [], {}
    for engine in engines:
        why = engine_unavailable(engine)
        if why is not None or engine not in paths:
            skipped[engine] = why or "no model for it in this run"
            continue
        chosen.append(EngineJob(env, engine, str(paths[engine]), budget_s, repeats, str(scratch)))
    return chosen, skipped


def run_jobs(jobs_: list[EngineJob], say: Say) -> list[dict[str, Any]]:
    out = []
    for job in jobs_:
        try:
            out.append(run_job(job, say))
        except Exception as exc:  # one engine's failure is its row, not the section's end
            out.append({**asdict(job), "failed": f"{type(exc).__name__}: {exc}"})
    return out


def in_child(
    jobs_: list[EngineJob], wrap: Callable[[list[str]], list[str]], scratch: Path, say: Say
) -> list[dict[str, Any]]:
    """The jobs in a child process started through ``wrap`` (inside the hdd cgroup)."""
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        job_file, out_file = Path(folder) / "jobs.json", Path(folder) / "out.json"
        job_file.write_text(json.dumps([asdict(j) for j in jobs_]))
        argv = wrap(
            [
                sys.executable,
                "-m",
                "benchmarks.engines",
                "--jobs",
                str(job_file),
                "--out",
                str(out_file),
            ]
        )
        child = subprocess.Popen(argv, cwd=ROOT, stdout=sys.stderr)
        try:
            code = child.wait()
        finally:
            stop_child(child, grace_s=10)
        if code != 0:
            raise RuntimeError(f"the engines child process exited with code {code}")
        return list(json.loads(out_file.read_text()))


def run_section(
    envs: list[str],
    paths: dict[str, Path],
    scratch: Path,
    say: Say,
    *,
    budget_s: float,
    repeats: int,
    engines: tuple[str, ...] = ENGINES_TRIED,
) -> dict[str, Any]:
    """Every job of ``envs`` (``local``, ``hdd``: in the throttled disk's cgroup, ``fuse``: on
    a mount of each model's folder); ``paths``: engine -> its {path} on the local disk."""
    from benchmarks.envs import EnvUnavailable, fuse_mount, throttled_disk

    section: dict[str, Any] = {"repeats": repeats, "rows": [], "not_here": {}, "skipped_envs": {}}
    for env in envs:
        found, skipped = jobs(env, paths, scratch, budget_s, repeats, engines)
        section["not_here"].update(skipped)
        try:
            if env == "local":
                section["rows"] += run_jobs(found, say)
            elif env == "hdd":
                with throttled_disk(scratch) as throttle:
                    section["rows"] += in_child(found, throttle.command, scratch, say)
            elif env == "fuse":
                for job in found:
                    source = Path(job.path)
                    folder = source if source.is_dir() else source.parent
                    with fuse_mount(folder, scratch / "mnt-engines") as mounted:
                        moved = mounted if source.is_dir() else mounted / source.name
                        job_there = EngineJob(**{**asdict(job), "path": str(moved)})
                        section["rows"] += run_jobs([job_there], say)
        except EnvUnavailable as exc:
            section["skipped_envs"][env] = str(exc)
            say(f"engines: {env} skipped: {exc}")
    return section


def _cell(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def markdown(section: dict[str, Any]) -> list[str]:
    """The section of docs/benchmarks.md."""
    out = [
        "Each engine as its users run it, with the change `modelmon recommend --engine` "
        "chose, and modelmon's best applied as a user applies it (`modelmon.core.load(path, "
        "config=FILE)`); every run cold, watched, in a fresh process, judged by the bytes that "
        f"arrived; {section.get('repeats', '?')} rounds, the order rotated each round, medians. "
        "Gain: the median of the rounds' paired ratios against the engine as users run it. "
        f"Applied again: the change's MB/s in these fresh processes against what recommend "
        f"reported (target: within {TOLERANCE:.0%}).",
        "",
        "| env | engine | as users run it | recommend's change | with the change | gain "
        "| modelmon's best | × as users run it | reported → applied again | within 10 % |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in section.get("rows", []):
        if "failed" in row:
            out.append(f"| {row['env']} | {row['engine']} | failed: {row['failed']} |")
            continue
        medians, reported = row["medians"], row["reported"]
        change = row["loader"].get("change", "none (keep it as it is)")
        out.append(
            f"| {row['env']} | {row['engine']} | {_cell(medians['as_is'], ' MB/s')} | "
            f"`{change}` | {_cell(medians.get('change'), ' MB/s')} | "
            f"{_cell(row['gain'], '×', 2)} | {_cell(medians['modelmon'], ' MB/s')} | "
            f"{_cell(row['modelmon_gain'], '×', 2)} | {_cell(reported['mbps'])} → "
            f"{_cell(row['applied_again'])} MB/s | {'yes' if row['within'] else 'NO'} |"
        )
    for engine, why in section.get("not_here", {}).items():
        out.append(f"\n{engine}: not measured: {why}.")
    for env, why in section.get("skipped_envs", {}).items():
        out.append(f"\n{env}: not run: {why}.")
    return [*out, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    found = [EngineJob(**job) for job in json.loads(args.jobs.read_text())]

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    args.out.write_text(json.dumps(run_jobs(found, say), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
