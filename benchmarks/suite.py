"""What runs where: the run matrix (profiles) and the environments that host it.

``local`` jobs run in this process; ``hdd`` jobs run in a child process placed in a blkio
cgroup (its spawned workers and peers inherit it); ``fuse`` jobs run in this process against a
fresh rclone mount. The cgroup is removed and the mount unmounted whatever happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.applied import STANDARD_LOADS
from benchmarks.codec import from_json, to_json
from benchmarks.envs import EnvUnavailable, fuse_mount, throttled_disk
from benchmarks.jobs import Cache, Entry, Job
from benchmarks.matrix import run_job, with_recommended
from benchmarks.models import GGUF_Q4K, GGUF_Q4K_LARGE, MEDIUM, SMALL, TINY, TINYLLAMA, ModelSpec
from benchmarks.records import BenchResults, JobResult, RecommendationRecord
from modelmon.core import STRATEGIES
from modelmon.core.options import LoadOptions, MiB, parse_spec
from modelmon.core.runs import stop_child

ROOT = Path(__file__).resolve().parents[1]
Say = Callable[[str], None]


@dataclass(frozen=True)
class Plan:
    env: str
    model: str  # ModelSpec.key
    caches: tuple[Cache, ...]
    recommend_budget_s: float
    strategies: tuple[str, ...] | None = None  # measured (worker processes); None: all
    loads: bool = True  # also core.load (in-process, fresh process) of the standard configs
    time_limit_s: float | None = None  # bound on one run (pathologically slow loaders)
    ranks: int = 0  # > 1: N replica ranks vs 1 (cold job only)
    repeats: int | None = None  # rounds, when not the profile's
    # Measured in both forms (worker processes and core.load) in every cache state of the plan.
    both_forms: tuple[tuple[str, LoadOptions], ...] = ()


@dataclass(frozen=True)
class Profile:
    models: tuple[ModelSpec, ...]
    plans: tuple[Plan, ...]
    peers: dict[str, tuple[str, ...]]  # model format → peers that read it
    repeats: int = 3
    memory_model: str = TINYLLAMA.key
    overhead_pairs: int = 7  # about a minute on the 2.5 GB model locally
    discard_repeats: int = 3
    plan_tensors: int = 100_000
    # Watching other loaders (benchmarks/watch.py): alternating pairs watched and not (as many
    # again with neither watched), and the bound on one watched program: 4 forked readers
    # mapping one descriptor crawl on FUSE (~100 s for a 1.26 GB shard at 12 MB/s). Pairs of
    # 2-second loads on FUSE spread ±10 % each: the median of 16 narrows that more than 8 do
    # (the overhead pairs are read-whole runs: about 4 minutes with the control's).
    watch_pairs: int = 16
    watch_time_limit_s: float = 240.0
    notes: tuple[str, ...] = field(default_factory=tuple)


SMOKE_STRATEGIES = ("library", "sequential", "pread")
# Measured in worker processes beside the standard four (sequential / pread / direct with 4
# workers, sequential with 1 worker of 4 threads): the library as baseline, and mmap.
LOCAL_STRATEGIES = ("library", "mmap")
# On FUSE: mmap with a shared descriptor as the failure mode (bounded); the library crawls
# there (page faults through FUSE): the safetensors peer stands for it, bounded too.
FUSE_STRATEGIES = ("mmap-shared-fd",)
# On the throttled disk every load takes seconds: the baseline, the mmap family.
SLOW_STRATEGIES = ("library", "mmap", "mmap-shared-fd")
WARM_STRATEGIES: tuple[str, ...] = ()  # warm: the standard four and the cold pick only
# Zero copy: tensors as views of the page cache, cold and warm on the local disk, cold on
# FUSE; in both forms, with the standard four's concurrency.
MMAP_VIEW = ("mmap-view", LoadOptions(workers=4, threads=1))
SAFETENSORS_PEERS = ("safetensors", "runai", "fastsafetensors", "cattensors", "instanttensor")
FUSE_TIME_LIMIT_S = 20.0  # ≥ 4× a 2.5 GB load at the FUSE ceiling; crawlers stop there


def full_profile() -> Profile:
    return Profile(
        models=(TINYLLAMA, GGUF_Q4K, SMALL, MEDIUM, GGUF_Q4K_LARGE),
        plans=(
            # Budgets: room for the ceilings, an entry run of each candidate and a duel that
            # leaves the pick on ≥ 3 runs (2.5 GB: 2-3 s a load locally, 4-6 s on FUSE, 3.5 s
            # on hdd), each run 3-5 s more where free memory for its arrays is primed first
            # (core/system/host_memory.py): on hdd 5-6 s a run, so a minute for the ceilings,
            # the entries and the duel; the safetensors model 75 s, so that a peer (8-16 s a
            # run: a process start and torch imports through the throttle) also fits. The
            # virtual disk's runs of one configuration spread up to 2×: five rounds there.
            Plan(
                "local",
                TINYLLAMA.key,
                ("cold", "warm"),
                90.0,
                LOCAL_STRATEGIES,
                both_forms=(MMAP_VIEW,),
                repeats=5,
            ),
            Plan("hdd", GGUF_Q4K.key, ("cold",), 60.0, SLOW_STRATEGIES),
            Plan("hdd", SMALL.key, ("cold",), 75.0, SLOW_STRATEGIES),
            Plan(
                "fuse",
                TINYLLAMA.key,
                ("cold",),
                120.0,  # 9 s of ceilings, 8-12 s a run with process start, eviction, priming
                FUSE_STRATEGIES,
                time_limit_s=FUSE_TIME_LIMIT_S,
                ranks=4,
                both_forms=(MMAP_VIEW,),
            ),
        ),
        peers={"safetensors": SAFETENSORS_PEERS, "gguf": ("gguf-reader",)},
        notes=(
            "hdd uses smaller models so that every configuration gets three cold runs within "
            "the budget: a 6-layer Q4_K GGUF (0.36 GB) and a 322 MB fp16 model (the 2.5 GB "
            "one would take 17 s or more a load at 150 MiB/s). local and fuse use the 2.5 GB "
            "TinyLlama-shaped model.",
            f"On fuse every run is bounded by a {FUSE_TIME_LIMIT_S:g} s time limit: a loader "
            "stopped there (mmap with a shared descriptor, and peers that crawl on FUSE) is "
            "reported as bounded (below model bytes / limit) and not run again in later "
            "rounds.",
            "Warm runs (local) reuse the configuration recommend() picked for the cold runs; "
            "recommend() itself measures cold loads. The GGUF model is measured on hdd only.",
            "One set of rounds feeds several tables: the environment table, core.load against "
            "measure, and the regret of recommend()'s pick are the same runs.",
        ),
    )


def smoke_profile() -> Profile:
    return Profile(
        models=(TINY,),
        plans=(
            Plan("local", TINY.key, ("cold", "warm"), 2.0, SMOKE_STRATEGIES),
            Plan("hdd", TINY.key, ("cold",), 2.0, SMOKE_STRATEGIES),
            Plan(
                "fuse",
                TINY.key,
                ("cold",),
                2.0,
                (*SMOKE_STRATEGIES, "mmap-shared-fd"),
                time_limit_s=FUSE_TIME_LIMIT_S,
                ranks=2,
            ),
        ),
        peers={"safetensors": ("safetensors",)},
        repeats=1,
        memory_model=TINY.key,
        overhead_pairs=1,
        discard_repeats=1,
        plan_tensors=2_000,
        watch_pairs=1,
        watch_time_limit_s=60.0,
        notes=("Smoke run: tiny model, one repeat, local only.",),
    )


def strategy_entries(names: tuple[str, ...] | None, workers: int = 4) -> list[Entry]:
    """Measured in worker processes: ``names`` and the standard four (one reader per worker:
    4 workers is the same concurrency as 1 worker of 4 threads)."""
    entries = []
    for name in tuple(STRATEGIES) if names is None else names:
        if name == "library":  # the library as users call it: one process
            entries.append(Entry("strategy", name, LoadOptions(workers=1)))
        elif name in ("sequential", "direct"):
            chosen = LoadOptions(workers=workers, threads=1, chunk=16 * MiB)
            entries.append(Entry("strategy", name, chosen))
        else:
            entries.append(Entry("strategy", name, LoadOptions(workers=workers, threads=1)))
    for name, options in STANDARD_LOADS:
        entry = Entry("strategy", name, options)
        if all(e.spec != entry.spec for e in entries):
            entries.append(entry)
    return entries


def load_entries(cache: str) -> list[Entry]:
    """core.load (what a user applies) of the standard configurations."""
    chosen = STANDARD_LOADS if cache == "cold" else STANDARD_LOADS[:2]
    return [Entry("load", name, options) for name, options in chosen]


def _recommended(pick: RecommendationRecord | None) -> list[Entry]:
    if pick is None:
        return []
    strategy, options = parse_spec(pick.spec)
    return [Entry(kind, strategy, options, role="recommended") for kind in ("strategy", "load")]


def jobs_for(profile: Profile, plan: Plan, path: Path, fmt: str, available: set[str]) -> list[Job]:
    """One job per cache state of ``plan`` (only cold jobs run recommend() and peers)."""
    peers = [Entry("peer", p) for p in profile.peers.get(fmt, ()) if p in available]
    jobs = []
    for cache in plan.caches:
        cold = cache == "cold"
        if cold:
            entries = strategy_entries(plan.strategies) + peers
        else:
            entries = strategy_entries(WARM_STRATEGIES)[:2]
        if plan.loads:
            entries += load_entries(cache)
        for name, options in plan.both_forms:
            for kind in ("strategy", "load"):
                entry = Entry(kind, name, options)
                if all(e.kind != kind or e.spec != entry.spec for e in entries):
                    entries.append(entry)
        names = (
            ["sequential_read", "parallel_read", "storage", "memory_fill"]
            if cold
            else ["parallel_read_warm"]
        )
        budget = plan.recommend_budget_s if cold else 0.0
        repeats = plan.repeats or profile.repeats
        job = Job(plan.env, plan.model, str(path), cache, repeats, entries, names, budget)
        job.time_limit_s = plan.time_limit_s
        job.ranks = plan.ranks if cold else 0
        jobs.append(job)
    return jobs


def _run_local(jobs: list[Job], results: BenchResults, say: Say) -> None:
    pick: list[Entry] = []
    for job in jobs:
        if job.cache == "warm" and pick:  # the cold job's pick, measured warm in both forms
            entries = job.entries
            for entry in pick:
                entries = with_recommended(entries, entry)
            job = replace(job, entries=entries)
        say(f"{job.env} · {job.model_key} · {job.cache}")
        out = run_job(job, say)
        results.jobs.append(out)
        pick = _recommended(out.recommendation) if job.cache == "cold" else pick


def _run_in_cgroup(
    jobs: list[Job], command: Callable[[list[str]], list[str]], scratch: Path, say: Say
) -> list[JobResult]:
    """The jobs in a child process started inside the cgroup; its results."""
    with tempfile.TemporaryDirectory(dir=scratch) as folder:
        job_file, out_file = Path(folder) / "jobs.json", Path(folder) / "out.json"
        job_file.write_text(json.dumps(to_json(jobs)))
        argv = command([sys.executable, "-m", "benchmarks.matrix", str(job_file), str(out_file)])
        child = subprocess.Popen(argv, cwd=ROOT, stdout=sys.stderr)
        try:
            code = child.wait()
        finally:  # Ctrl+C or an error here: end it by pid, then wait
            stop_child(child, grace_s=10)
        if code != 0:
            raise RuntimeError(f"the hdd child process exited with code {code}")
        return [from_json(JobResult, data) for data in json.loads(out_file.read_text())]


def run_environments(
    profile: Profile,
    envs: list[str],
    paths: dict[str, Path],
    available: set[str],
    scratch: Path,
    results: BenchResults,
    say: Say,
) -> None:
    formats = {spec.key: spec.format for spec in profile.models}

    def jobs(env: str) -> list[Job]:
        return [
            job
            for plan in profile.plans
            if plan.env == env
            for job in jobs_for(profile, plan, paths[plan.model], formats[plan.model], available)
        ]

    if "local" in envs:
        _run_local(jobs("local"), results, say)
    if "hdd" in envs and jobs("hdd"):
        try:
            with throttled_disk(scratch) as throttle:
                say(f"hdd: blkio cgroup {throttle.cgroup} on {throttle.device}")
                results.jobs += _run_in_cgroup(jobs("hdd"), throttle.command, scratch, say)
        except EnvUnavailable as exc:
            results.skipped_envs["hdd"] = str(exc)
            say(f"hdd skipped: {exc}")
    if "fuse" in envs and jobs("fuse"):
        for job in jobs("fuse"):
            source = Path(job.model_path)
            try:
                with fuse_mount(source.parent, scratch / "mnt") as mounted:
                    say(f"fuse: {source.parent} mounted at {mounted}")
                    job = replace(job, model_path=str(mounted / source.name))
                    say(f"{job.env} · {job.model_key} · {job.cache}")
                    results.jobs.append(run_job(job, say))
            except EnvUnavailable as exc:
                results.skipped_envs["fuse"] = str(exc)
                say(f"fuse skipped: {exc}")
                break
