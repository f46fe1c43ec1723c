"""The object bench's sides beside recommend's search space, each one run → MB/s or
``Failed``: ``load`` with its defaults (its pace kept: what a throttling bucket made of it),
a fixed boto3 client (8 threads, 16 MiB ranged GETs, botocore's default retries and ten
tries), Run:ai Model Streamer's S3 backend at each concurrency (a fresh child timed by
itself, every tensor touched), and the same bucket through ``rclone mount`` read by
modelmon's file strategy from an evicted, verified-cold page cache."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

from modelmon.core.options import LoadOptions
from modelmon.core.runs import LoadRun, run_fresh

MiB = 1 << 20
RUNAI_CONCURRENCY = (4, 16, 64)
MOUNT_CONFIG = ("sequential", {"workers": 4, "threads": 1, "chunk": 16 * MiB})
MOUNT_LABEL = "mount: sequential ×4 (cold)"
DEFAULTS_LABEL = "load defaults: ranged 4×8 MiB"
# The fixed client: botocore's own retries (its default mode's 3 tries), and with 10.
FIXED_THREADS, FIXED_PART_MIB = 8, 16
FIXED_TRIES = (None, 10)

Run = Callable[[], float]


class Failed(Exception):
    """A side's run did not finish: the one line why (the bench records it, goes on)."""


def fixed_label(tries: int | None) -> str:
    retries = "default retries" if tries is None else f"{tries} tries"
    return f"boto3 fixed {FIXED_THREADS}×{FIXED_PART_MIB} MiB ({retries})"


def own_run(
    model: Any, strategy: str, options: LoadOptions, paced: list[dict] | None = None
) -> Run:
    """A load of modelmon's in its workers; ``paced`` gets each run's pace (throttles, the
    connections and part size it moved through)."""

    def run() -> float:
        result = LoadRun(model, strategy, options).run()
        if result.status != "ok":
            raise Failed(f"{strategy}: {result.status}: {result.error}")
        reads = result.object_reads
        if paced is not None and reads is not None:
            paced.append(
                {
                    "throttles": reads.throttles,
                    "requests": reads.requests,
                    "pace": [[p.at_s, p.connections, p.part] for p in reads.pace],
                }
            )
        return result.mbps

    return run


def _child(argv: list[str], env: dict[str, str], who: str) -> float:
    result = run_fresh(argv, [], "keep", env=env, time_limit_s=600, who=who)
    if result.status != "ok":  # its error names it already
        raise Failed(result.error or result.status)
    return result.mbps


def fixed_run(urls: list[str], tries: int | None) -> Run:
    """The fixed boto3 client in a fresh child (``benchmarks.fixed_s3``), timed by itself."""
    env = dict(os.environ)
    env.pop("AWS_MAX_ATTEMPTS", None)
    if tries is not None:
        env["AWS_MAX_ATTEMPTS"] = str(tries)
    argv = [sys.executable, "-m", "benchmarks.fixed_s3", str(FIXED_THREADS), str(FIXED_PART_MIB)]
    return lambda: _child([*argv, *urls], env, fixed_label(tries))


def runai_run(urls: list[str], concurrency: int) -> Run:
    """One load by Run:ai Model Streamer's S3 backend in a fresh child, timed by itself."""
    env = dict(os.environ)
    env["RUNAI_STREAMER_CONCURRENCY"] = str(concurrency)
    env["RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING"] = "0"
    argv = [sys.executable, "-m", "benchmarks.runai_s3", *urls]
    return lambda: _child(argv, env, f"runai concurrency={concurrency}")


def mount_run(mount_path: str) -> Run:
    strategy, knobs = MOUNT_CONFIG

    def run() -> float:
        result = LoadRun(mount_path, strategy, LoadOptions(cache="cold", **knobs)).run()
        if result.status != "ok" or not result.cache.cold:
            raise Failed(f"mount: {result.status}: {result.error or result.cache.note}")
        return result.mbps

    return run


def peer_runs(
    model: Any, urls: list[str], mount_path: str, paced: dict[str, list[dict]], say: Callable
) -> list[tuple[str, Run]]:
    """(label, run) of every side beside the search space."""
    paced[DEFAULTS_LABEL] = []
    runs = [(DEFAULTS_LABEL, own_run(model, "ranged", LoadOptions(), paced[DEFAULTS_LABEL]))]
    runs += [(fixed_label(tries), fixed_run(urls, tries)) for tries in FIXED_TRIES]
    if importlib.util.find_spec("runai_model_streamer_s3") is not None:
        for concurrency in RUNAI_CONCURRENCY:
            runs.append((f"runai concurrency={concurrency}", runai_run(urls, concurrency)))
    else:
        say("Run:ai Model Streamer's S3 backend is not installed (./dev bench installs it)")
    runs.append((MOUNT_LABEL, mount_run(mount_path)))
    return runs
