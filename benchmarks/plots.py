"""PNG bar charts, one per environment and cache state, one panel per model (matplotlib)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.records import BenchResults, JobResult
from benchmarks.summary import ceiling_of, rows_of

COLOURS = {"strategy": "#4C72B0", "load": "#8172B3", "peer": "#DD8452", "recommended": "#55A868"}


def matplotlib_missing() -> str | None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install -e .[bench])"
    return None


def plot_all(results: BenchResults, folder: Path) -> dict[str, str]:
    """Write the PNGs into ``folder``; returns {"env-cache": file name}."""
    if matplotlib_missing():
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, str] = {}
    groups: dict[str, list[JobResult]] = {}
    for job in results.jobs:
        groups.setdefault(f"{job.env}-{job.cache}", []).append(job)
    for key, jobs in groups.items():
        heights = [max(2.0, 0.38 * len(rows_of(j)) + 1.2) for j in jobs]
        figure, axes = plt.subplots(
            len(jobs),
            1,
            figsize=(9, sum(heights)),
            layout="constrained",
            gridspec_kw={"height_ratios": heights},
            squeeze=False,
        )
        for axis, job in zip(axes[:, 0], jobs, strict=True):
            _panel(axis, job)
        name = f"{key}.png"
        figure.savefig(folder / name, dpi=90)
        plt.close(figure)
        written[key] = name
    return written


def _panel(axis: Any, job: JobResult) -> None:
    rows = [r for r in rows_of(job) if r.kind != "ceiling" and r.ok]
    rows.reverse()  # fastest at the top
    labels = [r.label for r in rows]
    medians = [r.median for r in rows]
    errors = [[r.median - r.low for r in rows], [r.high - r.median for r in rows]]
    colours = [COLOURS["recommended" if r.role == "recommended" else r.kind] for r in rows]
    axis.barh(range(len(rows)), medians, xerr=errors, color=colours, capsize=3)
    axis.set_yticks(range(len(rows)), labels, fontsize=7)
    ceiling = ceiling_of(job)
    if ceiling:
        axis.axvline(ceiling, color="black", linestyle="--", linewidth=1)
        axis.text(ceiling, len(rows) - 0.4, " parallel-read ceiling", fontsize=7, va="top")
    axis.set_xlabel("MB/s (median, min–max bars)", fontsize=8)
    axis.set_title(f"{job.env} · {job.model_key} · {job.cache}", fontsize=9)
    axis.tick_params(axis="x", labelsize=7)
