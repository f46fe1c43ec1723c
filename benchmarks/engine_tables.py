"""The engines section of docs/benchmarks.md (``engines.py`` measures it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from benchmarks.engines import TOLERANCE, EngineJob, EnginesSection
from modelmon.core.limits import LOADER_MEDIAN_ERROR, STORAGE_REST_S


def _cell(value: float | None, unit: str = "", digits: int = 0) -> str:
    return "–" if value is None else f"{value:.{digits}f}{unit}"


def _spread(runs: Sequence[float]) -> str:
    """The range of a figure's runs and how many: what its median stands on."""
    return f"{min(runs):.0f}–{max(runs):.0f} ({len(runs)})" if runs else "–"


def _model_cell(job: EngineJob) -> str:
    """The model's name (its folder, or its file) and its weights' size."""
    name = job.model_name or Path(job.path).name
    return f"{name} ({job.model_bytes / 1e9:.2f} GB)" if job.model_bytes else name


def _rounds(section: EnginesSection) -> str:
    rounds = f"{section.repeats} round{'s' if section.repeats != 1 else ''}"
    if section.most_repeats <= section.repeats:
        return rounds
    return (
        f"{rounds} and on, to {section.most_repeats}, while the applied configuration's median "
        f"is known less finely than ±{LOADER_MEDIAN_ERROR:.0%} (its standard error), as in "
        "recommend's rounds"
    )


def markdown(section: EnginesSection) -> list[str]:
    """The section of docs/benchmarks.md."""
    out = [
        "Each engine as its users run it, with the change `modelmon recommend --engine` "
        "chose, and modelmon's best applied as a user applies it (`modelmon.core.load(path, "
        "config=FILE)`); every run cold, watched, in a fresh process, judged by the bytes that "
        f"arrived; {_rounds(section)}; the order rotated each round, medians. On FUSE each "
        f"run starts {STORAGE_REST_S:g} s after the last ended, as in recommend's rounds (a "
        "mount's client keeps what a run left it for seconds), and the server holds the "
        "model's files in memory, so the mount, not the local disk behind the server, sets "
        "the pace. "
        "Gain: the median of the rounds' paired ratios against the engine as users run it. "
        f"Applied again: the change's MB/s in these fresh processes against what recommend "
        f"reported (target: within {TOLERANCE:.0%}); its runs' range (and count) in recommend and "
        "here.",
        "",
        "| env | engine | model | as users run it | recommend's change | with the change | gain "
        f"| modelmon's best | × as users run it | reported → applied again "
        f"| runs reported; applied again | within {TOLERANCE:.0%} |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in section.rows:
        where = f"| {row.job.env} | {row.job.engine} | {_model_cell(row.job)} |"
        if row.failed is not None or row.as_is is None or row.modelmon is None:
            out.append(f"{where} failed: {row.failed or 'no runs'} |")
            continue
        change = row.change.spec if row.change is not None else "none (keep it as it is)"
        out.append(
            f"{where} {_cell(row.as_is.median_mbps, ' MB/s')} | `{change}` | "
            f"{_cell(row.change.median_mbps if row.change else None, ' MB/s')} | "
            f"{_cell(row.gain, '×', 2)} | {_cell(row.modelmon.median_mbps, ' MB/s')} | "
            f"{_cell(row.modelmon_gain, '×', 2)} | {_cell(row.reported_mbps)} → "
            f"{_cell(row.applied_again)} MB/s | "
            f"{_spread(row.loader.reported_runs if row.loader else ())}; "
            f"{_spread(row.applied_runs)} | {'yes' if row.within else 'NO'} |"
        )
    for row in section.rows:
        if row.failed is None and not row.all_cold:
            out.append(
                f"\n{row.job.env} · {row.job.engine}: some runs did not start verified cold."
            )
    for engine, why in section.not_here.items():
        out.append(f"\n{engine}: not measured: {why}.")
    for env, why in section.skipped_envs.items():
        out.append(f"\n{env}: not run: {why}.")
    return [*out, ""]
