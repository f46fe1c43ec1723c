"""Results as JSON and CSV, written atomically. Qt-free.

Through the guard, ``modelmon.core.system.outputs``: never the open model's files under any
name, never a special file; then a temp file beside the target, fsync, rename. A failure (a
read-only folder, a full disk) leaves the previous file as it was and is one line.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any

from modelmon import __version__
from modelmon.core import ABResult, Ceilings, LoadResult
from modelmon.core.errors import ModelmonError
from modelmon.core.output import human_bytes, limit_text, rate_text
from modelmon.core.system import check_output
from modelmon.gui.state.records import RunRecord, ceiling_for

CSV_FIELDS = (
    "run",
    "label",
    "pair",
    "strategy",
    "spec",
    "status",
    "cache_requested",
    "cache_resident_before",
    "cache_verified",
    "seconds",
    "mbps",
    "bytes",
    "first_block_seconds",
    "half_blocks_seconds",
    "fraction_of_ceiling",
    "ceiling",
    "peak_rss_bytes",
    "process_tree_peak_rss_bytes",
    "checksum",
    "ab_session",
    "error",
    # A load from object storage: its GETs (empty for a file's)
    "requests",
    "first_byte_median_seconds",
    "first_byte_p99_seconds",
    "retries",
    "throttles",
)


class ExportError(ModelmonError):
    """An export that could not be written: one line naming the file."""


def check_export(path: str | os.PathLike[str], inputs: Iterable[str]) -> None:
    """The guard's answer for an export to ``path`` (``inputs``: the open model's files);
    a refusal raises ExportError."""
    check_output(path, inputs, ExportError)


def write_export(path: str | os.PathLike[str], payload: bytes, inputs: Iterable[str]) -> None:
    """Write ``payload`` through the guard, atomically; a failure raises ExportError."""
    check_output(path, inputs, ExportError).write(payload, ExportError)


def _number(value: float | None, digits: int = 6) -> float | None:
    """JSON has no NaN or infinity: a value that isn't finite becomes null."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def run_row(record: RunRecord, ceilings: Ceilings | None) -> dict[str, Any]:
    """One run as a flat row: the columns of the results table, as numbers."""
    result = record.result
    share = ceiling_for(record, ceilings)
    rss = record.peak_rss()
    cache = record.cache
    measured = record.measured
    watched = record.watched
    if record.is_watch:
        strategy = "watch"  # the spec is the watched command
    else:
        strategy = result.strategy if result is not None else record.spec.split()[0]
    return {
        "run": record.run_name,
        "label": record.label,
        "pair": None if record.pair is None else record.pair + 1,
        "strategy": strategy,
        "spec": record.spec,
        "status": record.status,
        "cache_requested": cache.requested if cache else None,
        "cache_resident_before": _number(cache.resident_before) if cache else None,
        "cache_verified": (
            cache.cold
            if cache.requested == "cold"
            else cache.warm
            if cache.requested == "warm"
            else None
        )
        if cache
        else None,
        "seconds": _number(record.seconds) if measured else None,
        "mbps": _number(record.mbps, 3) if measured else None,
        "bytes": watched.bytes_read if watched else result.bytes if result is not None else None,
        "first_block_seconds": _number(result.first_block_s) if measured and result else None,
        "half_blocks_seconds": _number(result.half_blocks_s) if measured and result else None,
        "fraction_of_ceiling": _number(share[0], 4) if share else None,
        "ceiling": share[1] if share else None,
        "peak_rss_bytes": rss[0] if rss else None,
        "process_tree_peak_rss_bytes": result.process_tree_peak_rss if result else None,
        "checksum": result.checksum if result is not None else None,
        "ab_session": record.session,
        "error": record.message,
        **request_columns(result),
    }


def request_columns(result: LoadResult | None) -> dict[str, Any]:
    """A bucket load's request figures as numbers; None each for a file's load."""
    reads = result.object_reads if result is not None else None
    return {
        "requests": reads.requests if reads else None,
        "first_byte_median_seconds": _number(reads.ttfb_median_s, 6) if reads else None,
        "first_byte_p99_seconds": _number(reads.ttfb_p99_s, 6) if reads else None,
        "retries": reads.retries if reads else None,
        "throttles": reads.throttles if reads else None,
    }


def results_document(
    model: str,
    records: Sequence[RunRecord],
    ceilings: Ceilings | None,
    ab: ABResult | None,
    ab_session: str | None = None,
) -> dict[str, Any]:
    """Everything the results table shows, plus each run's full result and metric series
    (the access pattern is left out: it can hold millions of reads). ``ab`` is the last
    completed A/B (``ab_session`` names it, as its runs' ``ab_session`` do)."""
    runs = []
    for record in records:
        entry = run_row(record, ceilings)
        if record.result is not None:
            entry["result"] = record.result.to_dict()
        if record.sampled is not None:
            samples = record.sampled.to_dict()["samples"]
            samples.pop("access_pattern", None)
            entry["samples"] = samples
        if record.watched is not None:
            # The series, findings and files; not the arrivals (one row per page run).
            watch = record.watched.to_dict(samples=True)
            watch.get("samples", {}).pop("arrivals", None)
            entry["watch"] = watch
        runs.append(entry)
    return {
        "modelmon": __version__,
        "model": model,
        "ceilings": ceilings.to_dict()["ceilings"] if ceilings is not None else [],
        "ab": {**ab.to_dict(), "session": ab_session} if ab is not None else None,
        "runs": runs,
    }


def results_json(
    model: str,
    records: Sequence[RunRecord],
    ceilings: Ceilings | None,
    ab: ABResult | None,
    ab_session: str | None = None,
) -> bytes:
    document = _clean(results_document(model, records, ceilings, ab, ab_session))
    return (json.dumps(document, indent=1, allow_nan=False) + "\n").encode()


def _clean(value: Any) -> Any:
    """JSON-ready: NaN and infinity (a measurement that failed) become null, arrays lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _clean(value.tolist())
    return value


def results_csv(records: Sequence[RunRecord], ceilings: Ceilings | None) -> bytes:
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for record in records:
        row = run_row(record, ceilings)
        writer.writerow({key: "" if row[key] is None else row[key] for key in CSV_FIELDS})
    return text.getvalue().encode()


def run_words(record: RunRecord) -> str:
    """How a run on a plot ended, in a few words: "1,234 MB/s in 0.52 s", "CANCELLED after
    0.80 s (12 MB read)", "FAILED: …"."""
    status = record.status
    mbps, seconds = record.mbps, record.seconds
    if record.watched is not None and record.watched.bytes_read:
        done = f"{human_bytes(record.watched.bytes_read)} arrived"
    elif record.result is not None and record.result.bytes:
        done = f"{human_bytes(record.result.bytes)} read"
    else:
        done = ""
    if status == "ok":
        if mbps is not None and seconds is not None:
            return f"{rate_text(mbps, grouped=True)} in {seconds:.2f} s"
        return f"ok, {done}" if done else "ok"
    if status == "cancelled":
        if record.result is not None:
            seconds = record.result.seconds
        after = f" after {seconds:.2f} s" if seconds else ""
        return f"CANCELLED{after}" + (f" ({done})" if done else "")
    return "FAILED" + (f": {record.message}" if record.message else "")


def plot_heading(model: str, runs: Sequence[RunRecord], when: str) -> list[str]:
    """The lines above an exported plot: which model, when, and each run it shows with how
    that run ended (a cancelled run is never shown as a plain one)."""
    lines = [f"modelmon · {model} · exported {when}"]
    lines.extend(
        f"{record.run_name}: {record.spec}{_under_limit(record)} — {run_words(record)}"
        for record in runs
    )
    return lines


def _under_limit(record: RunRecord) -> str:
    """ " under a 4 GiB memory limit" for a run in a memory cgroup, else "": its memory plot
    and its rate are of that limit, and the heading says so."""
    limit = record.memory_limit
    return f" under a {limit_text(limit.limit_bytes)} memory limit" if limit is not None else ""
