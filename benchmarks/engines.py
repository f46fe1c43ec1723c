"""Users' own loaders: each engine as users run it, with the change ``recommend --engine``
chose, and modelmon's best, on the throttled disk and the FUSE mount.

    .venv/bin/python -m benchmarks.engines --jobs JOBS.json --out OUT.json   # one env's jobs

For each engine installed here (the safetensors library always; transformers and
llama-cpp-python where installed), one job per environment:

1. ``modelmon recommend MODEL --engine E --json`` in a child process (in the cgroup on hdd):
   its ``[loader]`` table names the engine as it is, the change it chose (if any) and the
   MB/s its measured snippet reported.
2. Rounds (``repeats``, and on to ``most_repeats`` while the median of the
   configuration recommend stands behind is known less finely than ``LOADER_MEDIAN_ERROR``,
   as in recommend's own rounds; the order rotated each round), every run cold, watched, in
   a fresh process: the engine as users run it, the engine with the change, and modelmon's best
   applied as a user applies it (``modelmon.core.load(path, config=FILE)`` with the file
   recommend wrote, run as a command), all judged the same way, by the bytes that arrived.
   On network storage each run starts once the mount has rested after the last
   (``rest_storage``), as recommend's own rounds do, and each program runs once uncounted
   first (``warm_each``), as in recommend's rounds: every counted run finds its code cached.

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
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.codec import from_json, to_json
from modelmon.core import open_model, run_program
from modelmon.core.configuration import parse_program
from modelmon.core.limits import LOADER_MEDIAN_ERROR
from modelmon.core.measuring import median_error
from modelmon.core.runs import engine_unavailable, stop_child, warm_each
from modelmon.core.system import rest_storage

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
    model_bytes: int = 0  # the weights' size (0: not known)
    model_name: str = ""  # its folder or file on the local disk (a mount's path names the mount)
    # Rounds past ``repeats`` while the applied configuration's median is known less finely
    # than ``LOADER_MEDIAN_ERROR`` (0: ``repeats`` exactly).
    most_repeats: int = 0


@dataclass(frozen=True)
class LoaderTable:
    """What the bench reads of ``recommend --engine --json``'s ``[loader]`` table (a figure
    it lacks was not measured)."""

    as_is: str
    modelmon: str
    change: str | None = None  # None: recommend keeps the loader as it is
    as_is_mbps: float | None = None
    change_mbps: float | None = None
    modelmon_mbps: float | None = None
    gain: float | None = None
    rounds: int = 0
    as_is_run_mbps: tuple[float, ...] = ()  # each run's, in the order run
    change_run_mbps: tuple[float, ...] = ()
    modelmon_run_mbps: tuple[float, ...] = ()

    @property
    def reported(self) -> tuple[str, float | None]:
        """The configuration recommend stands behind for the loader, and its MB/s."""
        if self.change is not None:
            return self.change, self.change_mbps
        return self.as_is, self.as_is_mbps

    @property
    def reported_runs(self) -> tuple[float, ...]:
        """The runs behind the reported MB/s."""
        return self.change_run_mbps if self.change is not None else self.as_is_run_mbps


@dataclass(frozen=True)
class EngineRun:
    """One cold, watched run of one configuration in a fresh process."""

    round: int
    status: str  # "ok" | "failed" | "cancelled"
    error: str | None
    mbps: float
    cold: bool


@dataclass(frozen=True)
class EngineEntry:
    """One configuration of an engine's job over its rounds."""

    spec: str  # as run: ``engine: ...`` or ``cmd: ...``
    runs: tuple[EngineRun, ...] = ()

    @property
    def median_mbps(self) -> float | None:
        return _median(self.ok_mbps)

    @property
    def ok_mbps(self) -> list[float]:
        return [r.mbps for r in self.runs if r.status == "ok"]


@dataclass(frozen=True)
class EngineRow:
    """One engine in one environment: the loader as users run it, with recommend's change,
    and modelmon's best; or why the job failed."""

    job: EngineJob
    failed: str | None = None
    loader: LoaderTable | None = None
    as_is: EngineEntry | None = None
    change: EngineEntry | None = None
    modelmon: EngineEntry | None = None
    gain: float | None = None  # the change over as users run it: median of paired ratios
    modelmon_gain: float | None = None
    reported_spec: str | None = None
    reported_mbps: float | None = None  # what recommend reported for that configuration
    applied_again: float | None = None  # its median MB/s in these fresh processes
    applied_ratio: float | None = None
    within: bool = False  # applied again within TOLERANCE of what recommend reported
    all_cold: bool = False

    @property
    def applied_runs(self) -> list[float]:
        """The runs behind ``applied_again``: the change's, else the engine's as it is."""
        applied = self.change if self.change is not None else self.as_is
        return applied.ok_mbps if applied is not None else []


@dataclass
class EnginesSection:
    repeats: int
    most_repeats: int = 0
    rows: list[EngineRow] = field(default_factory=list)
    not_here: dict[str, str] = field(default_factory=dict)  # engine → why not measured
    skipped_envs: dict[str, str] = field(default_factory=dict)  # environment → why


def _modelmon_best(config: Path) -> str:
    """modelmon's best as a user applies it: core.load with the config file, as a command
    that reports its own clock as the engines' harness does (a direct read of a small model
    may open, read and close between two of the watch's looks, and leaves no page behind).
    Its clock, as the harness's, starts after the imports (``m.load`` imports on first use)
    and ends once every byte it loaded has been touched."""
    code = (
        "import sys, json, time, modelmon.core as m; "
        "from modelmon.core.loaders.child_touch import touch_array; load = m.load; "
        "t = time.perf_counter(); arrays = load(sys.argv[1], config=sys.argv[2]); "
        "n = sum(touch_array(a) for a in arrays.values()); "
        'print(json.dumps({"engine": "modelmon", "seconds": time.perf_counter() - t, '
        '"bytes": n}))'
    )
    return f"cmd: {sys.executable} -c '{code}' {{path}} {config}"


def _recommend(job: EngineJob, config: Path) -> LoaderTable:
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
    return from_json(LoaderTable, json.loads(out)["loader"])  # the CLI's own JSON


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def run_job(job: EngineJob, say: Say) -> EngineRow:
    config = Path(job.scratch) / f"{job.env}-{job.engine}.toml"
    say(f"engines: {job.env} · {job.engine}: recommend --engine {job.engine}")
    loader = _recommend(job, config)
    specs = {"as_is": loader.as_is, "modelmon": _modelmon_best(config)}
    if loader.change is not None:
        specs["change"] = loader.change
    model = open_model(job.path)
    files = [f.path for f in model.files]
    runs: dict[str, list[EngineRun]] = {key: [] for key in specs}
    keys = list(specs)
    programs = {key: parse_program(spec) for key, spec in specs.items()}
    warm_each(model, programs.values(), path=job.path)
    applied = "change" if "change" in specs else "as_is"
    number = 0
    while number < job.repeats or (
        number < job.most_repeats
        and median_error([r.mbps for r in runs[applied] if r.status == "ok"]) > LOADER_MEDIAN_ERROR
    ):
        shift = number % len(keys)
        for key in keys[shift:] + keys[:shift]:
            rest_storage(files)  # as recommend's rounds: no run timed with the last one's help
            outcome = run_program(model, programs[key], path=job.path).result
            runs[key].append(
                EngineRun(number, outcome.status, outcome.error, outcome.mbps, outcome.cache.cold)
            )
            figure = f"{outcome.mbps:.0f} MB/s" if outcome.status == "ok" else outcome.error
            say(f"  {key}: {figure}")
        number += 1
    entries = {key: EngineEntry(specs[key], tuple(runs[key])) for key in specs}
    return _row(job, loader, entries)


def _paired(top: EngineEntry | None, bottom: EngineEntry) -> list[float]:
    below = {r.round: r.mbps for r in bottom.runs if r.status == "ok"}
    return [
        r.mbps / below[r.round]
        for r in (top.runs if top is not None else ())
        if r.status == "ok" and below.get(r.round, 0) > 0
    ]


def _row(job: EngineJob, loader: LoaderTable, entries: dict[str, EngineEntry]) -> EngineRow:
    as_is, change, best = entries["as_is"], entries.get("change"), entries["modelmon"]
    spec, reported = loader.reported
    again = (change if change is not None else as_is).median_mbps
    ratio = again / reported if again and reported else None
    ok = [r for entry in entries.values() for r in entry.runs if r.status == "ok"]
    return EngineRow(
        job,
        loader=loader,
        as_is=as_is,
        change=change,
        modelmon=best,
        gain=_median(_paired(change, as_is)),
        modelmon_gain=_median(_paired(best, as_is)),
        reported_spec=spec,
        reported_mbps=reported,
        applied_again=again,
        applied_ratio=ratio,
        within=ratio is not None and abs(ratio - 1) <= TOLERANCE,
        all_cold=all(r.cold for r in ok),
    )


def jobs(
    env: str,
    paths: dict[str, Path],
    scratch: Path,
    budget_s: float,
    repeats: int,
    engines: tuple[str, ...] = ENGINES_TRIED,
    most_repeats: int = 0,
) -> tuple[list[EngineJob], dict[str, str]]:
    """The jobs for ``env`` (``paths``: engine -> what its {path} is), and the engines left
    out with why."""
    chosen, skipped = [], {}
    for engine in engines:
        why = engine_unavailable(engine)
        if why is not None or engine not in paths:
            skipped[engine] = why or "no model for it in this run"
            continue
        path = str(paths[engine])
        size = open_model(path).total_bytes
        chosen.append(
            EngineJob(
                env,
                engine,
                path,
                budget_s,
                repeats,
                str(scratch),
                size,
                Path(path).name,
                most_repeats,
            )
        )
    return chosen, skipped


def run_jobs(jobs_: list[EngineJob], say: Say) -> list[EngineRow]:
    out = []
    for job in jobs_:
        try:
            out.append(run_job(job, say))
        except Exception as exc:  # one engine's failure is its row, not the section's end
            out.append(EngineRow(job, failed=f"{type(exc).__name__}: {exc}"))
    return out


def in_child(
    jobs_: list[EngineJob], wrap: Callable[[list[str]], list[str]], scratch: Path, say: Say
) -> list[EngineRow]:
    """The jobs in a child process started through ``wrap`` (inside the hdd cgroup)."""
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        job_file, out_file = Path(folder) / "jobs.json", Path(folder) / "out.json"
        job_file.write_text(json.dumps(to_json(jobs_)))
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
        return [from_json(EngineRow, row) for row in json.loads(out_file.read_text())]


def run_section(
    paths: dict[str, dict[str, Path]],
    scratch: Path,
    say: Say,
    *,
    budget_s: float,
    repeats: int,
    engines: tuple[str, ...] = ENGINES_TRIED,
    most_repeats: int = 0,
) -> EnginesSection:
    """Every job of each environment of ``paths`` (``local``, ``hdd``: in the throttled disk's
    cgroup, ``fuse``: on a mount of each model's folder); ``paths``: environment -> engine ->
    its {path} on the local disk."""
    from benchmarks.envs import EnvUnavailable, fuse_mount, throttled_disk

    section = EnginesSection(repeats, most_repeats)
    for env, models in paths.items():
        found, skipped = jobs(env, models, scratch, budget_s, repeats, engines, most_repeats)
        section.not_here.update(skipped)
        try:
            if env == "local":
                section.rows += run_jobs(found, say)
            elif env == "hdd":
                with throttled_disk(scratch) as throttle:
                    section.rows += in_child(found, throttle.command, scratch, say)
            elif env == "fuse":
                for job in found:
                    source = Path(job.path)
                    folder = source if source.is_dir() else source.parent
                    # The server holds the files: the runs compared vary with the mount,
                    # not with the local disk behind the server (``fuse_mount``).
                    with fuse_mount(folder, scratch / "mnt-engines", hold=True) as mounted:
                        moved = mounted if source.is_dir() else mounted / source.name
                        section.rows += run_jobs([replace(job, path=str(moved))], say)
        except EnvUnavailable as exc:
            section.skipped_envs[env] = str(exc)
            say(f"engines: {env} skipped: {exc}")
    return section


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    found = [from_json(EngineJob, job) for job in json.loads(args.jobs.read_text())]

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    args.out.write_text(json.dumps(to_json(run_jobs(found, say)), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
