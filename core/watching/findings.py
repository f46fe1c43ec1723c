"""What a watch found, in words: one small rule per finding, each with the figures it rests on
and what to change in the detected loader's terms.

Every rule reads a ``WatchResult`` (without findings) and gives a ``Finding`` or None. The
thresholds are here, named, so the words and the test agree on them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict

from modelmon.core.system.cache import COLD_THRESHOLD
from modelmon.core.units import human_bytes
from modelmon.core.watching.bucket_findings import BUCKET_RULES
from modelmon.core.watching.cold_findings import COLD_START_RULES
from modelmon.core.watching.loaders import fix
from modelmon.core.watching.memory_findings import cache_charged, oom_killed, re_read
from modelmon.core.watching.result import FileReport, Finding, OtherReader, WatchResult
from modelmon.core.watching.server_findings import SERVER_RULES

PARTIAL_BELOW = 0.9  # of a mapped file read: under this, the load touched only part of it
MAPPED_MIN_BYTES = 16 << 20  # arrivals through a mapping worth a word
MAPPED_SHARE = 0.5  # of the mapped files' arrivals, by faults rather than read calls
READAHEAD_WORTH_RAISING_KB = 1024  # a readahead below this is worth raising for faults
RANDOM_MIN_BYTES = 8 << 20  # arrivals worth judging for order
RANDOM_MIN_JUMPS = 32
RANDOM_BYTES_PER_JUMP = 8 << 20  # less than this between jumps: out of order
EVICTED_SHARE = 0.05  # of the bytes that arrived, dropped again before the load ended
DOUBLE_COPY = 2.0  # private memory at least this many times the model


def _name(path: str) -> str:
    return os.path.basename(path) or path


def _pids(pids: tuple[int, ...] | list[int]) -> str:
    return ", ".join(str(p) for p in pids)


def shared_descriptor(result: WatchResult) -> Finding | None:
    shared = [d for d in result.descriptions if d.shared]
    if not shared:
        return None
    worst = max(shared, key=lambda d: len(d.pids))
    storage = next((f.storage for f in result.files if f.index == worst.file), "")
    slow = next((f.slow_storage for f in result.files if f.index == worst.file), None)
    consequence = (
        f"on {slow} storage the filesystem sees one stream jumping between their offsets, "
        "so its sequential readahead breaks"
        if slow
        else "their reads share one file offset and, on FUSE or network storage, one "
        "handle: the reads of one look scattered to the filesystem"
    )
    text = (
        f"{len(worst.pids)} processes (pids {_pids(worst.pids)}) share one open file "
        f"description of {_name(worst.path)} (inherited across fork): {consequence}."
    )
    evidence = {
        "path": worst.path,
        "pids": list(worst.pids),
        "descriptors": [list(pair) for pair in worst.descriptors],
        "storage": storage,
        "shared_descriptions": len(shared),
    }
    return Finding("shared-descriptor", text, evidence, fix("shared", result.loader))


def mmap_faults(result: WatchResult) -> Finding | None:
    """Most of a mapped model's bytes on slow storage arrived through page faults: bytes that
    arrived beyond what the tree's read calls returned (rchar). Major faults alone undercount
    them: a fault on a page that readahead is still bringing in waits without counting."""
    mapped = [f for f in result.files if f.mapped and f.slow_storage]
    arrived = sum(f.arrived_bytes for f in mapped)
    by_faults = max(0, arrived - result.read_chars)
    if arrived < MAPPED_MIN_BYTES or by_faults < arrived * MAPPED_SHARE:
        return None
    readahead = mapped[0].read_ahead_kb
    where = f"{mapped[0].slow_storage} storage ({mapped[0].storage})"
    faults = result.major_faults + result.minor_faults
    text = (
        f"{result.loader.label} mapped {_name(mapped[0].path)} and {human_bytes(by_faults)} of "
        f"it arrived through page faults on {where}"
        + (f", each fault reading ahead {readahead} KiB at most" if readahead else "")
        + f" ({result.major_faults:,} major, {faults:,} faults in all): faults come one "
        "mapping window at a time, each waiting for its own round trip."
    )
    evidence = {
        "bytes_by_faults": by_faults,
        "arrived_bytes": arrived,
        "read_chars": result.read_chars,
        "major_faults": result.major_faults,
        "minor_faults": result.minor_faults,
        "read_ahead_kb": readahead,
        "storage": mapped[0].storage,
    }
    words = fix("mmap", result.loader)
    if readahead is not None and readahead < READAHEAD_WORTH_RAISING_KB:
        words += "; or " + fix("readahead", result.loader)
    return Finding("mmap-faults", text, evidence, words)


def _partial(result: WatchResult) -> list[FileReport]:
    """The files the program mapped or opened, cold, of which under ``PARTIAL_BELOW`` arrived
    or was touched. Only where the file started cold: every page read then arrived, and the
    arrivals tell all. From a warm cache the process-side evidence is a lower bound (a look
    may come after the program closed the file)."""
    return [
        f
        for f in result.files
        if (f.mapped or f.opened)
        and f.size
        and f.resident_before <= COLD_THRESHOLD
        and f.bytes_read < f.size * PARTIAL_BELOW
    ]


def partial_read(result: WatchResult) -> Finding | None:
    partial = _partial(result)
    if not partial or result.model_bytes <= 0:
        return None
    held = {path for reader in result.other_readers for path in reader.files}
    if any(f.path in held for f in partial):
        return None  # another reader's eviction can take pages unseen: other_readers says so
    read = sum(min(f.bytes_read, f.size) for f in partial)
    size = sum(f.size for f in partial)
    fraction = read / size
    how = "mapped" if any(f.mapped for f in partial) else "opened"
    text = (
        f"{result.loader.label} {how} {_name(partial[0].path)}"
        + (f" and {len(partial) - 1} more" if len(partial) > 1 else "")
        + f" ({human_bytes(size)}) but only {fraction:.1%} of it arrived or was touched: "
        "a lazy load; its time says nothing about the rest, which will be read on first use."
    )
    evidence = {
        "fraction": round(fraction, 6),
        "bytes_read": read,
        "size": size,
        "files": [f.path for f in partial],
        "mapped": how == "mapped",
    }
    return Finding("partial-read", text, evidence, fix("partial", result.loader))


def random_order(result: WatchResult) -> Finding | None:
    arrived = sum(f.arrived_bytes for f in result.files)
    jumps = sum(f.jumps for f in result.files)
    if arrived < RANDOM_MIN_BYTES or jumps < RANDOM_MIN_JUMPS:
        return None
    per_jump = arrived / jumps
    if per_jump >= RANDOM_BYTES_PER_JUMP:
        return None
    text = (
        f"The model arrived out of order: {jumps:,} jumps to pages away from what was "
        f"already in memory, {human_bytes(int(per_jump))} between jumps on average; on a "
        "disk each jump is a seek, on FUSE or a network mount a round trip."
    )
    evidence = {
        "jumps": jumps,
        "runs": sum(f.runs for f in result.files),
        "arrived_bytes": arrived,
        "bytes_per_jump": round(per_jump),
    }
    return Finding("random-order", text, evidence, fix("random", result.loader))


def _dropped(result: WatchResult) -> tuple[int, int] | None:
    """(dropped, arrived) bytes when enough of what arrived was dropped again to tell."""
    dropped = sum(f.evicted_bytes for f in result.files)
    arrived = sum(f.arrived_bytes for f in result.files)
    return (dropped, arrived) if arrived and dropped >= arrived * EVICTED_SHARE else None


def evicted(result: WatchResult) -> Finding | None:
    found = _dropped(result)
    if found is None or result.other_readers:  # another reader's pages come and go too
        return None
    dropped, arrived = found
    text = (
        f"{human_bytes(dropped)} of the model were dropped from the page cache after they "
        f"arrived, before the load ended ({dropped / arrived:.0%} of what arrived): memory "
        "was too short to keep the model's pages next to the program's memory."
    )
    evidence = {"evicted_bytes": dropped, "arrived_bytes": arrived}
    return Finding("evicted", text, evidence, fix("evicted", result.loader))


def double_copy(result: WatchResult) -> Finding | None:
    cold = result.cold_start
    if cold is not None and len(cold.ranks) >= 2:
        return None  # several ranks: copies are judged rank by rank (copies-per-rank)
    if result.model_bytes <= 0 or result.peak_anon_rss < DOUBLE_COPY * result.model_bytes:
        return None
    times = result.peak_anon_rss / result.model_bytes
    text = (
        f"The program's private memory peaked at {human_bytes(result.peak_anon_rss)}, "
        f"{times:.1f}× the model ({human_bytes(result.model_bytes)}): the weights were "
        "copied at least twice."
    )
    evidence = {"peak_anon_rss": result.peak_anon_rss, "model_bytes": result.model_bytes}
    return Finding("double-copy", text, evidence, fix("double", result.loader))


def swap(result: WatchResult) -> Finding | None:
    swapped = (result.swap_in_bytes or 0) + (result.swap_out_bytes or 0)
    if not swapped:
        return None
    text = (
        f"The system swapped while the program ran ({human_bytes(result.swap_out_bytes or 0)} "
        f"out, {human_bytes(result.swap_in_bytes or 0)} in): the load did not fit in memory."
    )
    evidence = {"swap_in_bytes": result.swap_in_bytes, "swap_out_bytes": result.swap_out_bytes}
    return Finding("swap", text, evidence, fix("swap", result.loader))


def _resident_before(result: WatchResult, also: Collection[str] = ()) -> float | None:
    """The share of the files the program used (and of the files at ``also``) that was
    cached before it read them; None when it was seen with none."""
    seen = [f for f in result.files if f.mapped or f.opened or f.arrived_bytes or f.path in also]
    size = sum(f.size for f in seen)
    if not seen:
        return None
    return sum(f.resident_before * f.size for f in seen) / size if size else 0.0


def not_cold(result: WatchResult) -> Finding | None:
    if result.cache is not None and result.cache.nothing_local:
        return None  # a bucket's bytes: no page cache on this machine to be cold or not
    seen = [f for f in result.files if f.mapped or f.opened or f.arrived_bytes]
    before = _resident_before(result)
    if before is None:
        return None
    cache = result.cache
    if result.other_readers and (before > COLD_THRESHOLD or cache is not None):
        return None  # another reader kept or brought its pages: other_readers says so
    verified = cache is not None and cache.cold and all(f.named for f in seen)
    if verified and before <= COLD_THRESHOLD:
        return None
    if before > COLD_THRESHOLD:
        text = (
            f"{before:.1%} of the model was in the page cache before the load: what was "
            "resident came from memory, not storage, so the MB/s is not the storage's."
        )
    else:
        why = (cache.note if cache is not None and cache.note else "") or (
            "the model was not named before the program ran (--model, or a model path in "
            "its arguments), so it could not be made cold, and was first seen already open"
        )
        text = f"The load did not start from a verified cold cache: {why}."
    evidence = {
        "resident_before": round(before, 6),
        "requested": cache.requested if cache is not None else None,
        "verified_cold": verified,
    }
    return Finding("not-cold", text, evidence, fix("not-cold", result.loader))


def model_written(result: WatchResult) -> Finding | None:
    """The model's files changed (size or modification time) while the program ran."""
    if not result.changed_files:
        return None
    names = ", ".join(os.path.basename(path) for path in result.changed_files[:3])
    text = (
        f"The model's files changed while the program ran ({names}): something wrote into "
        "them, so what arrived is not a load of the model, and its MB/s is no load's."
    )
    fix = "Load a copy that nothing writes to, or find the writer (lsof on the file)."
    return Finding("model-written", text, {"changed_files": list(result.changed_files)}, fix)


def readers_line(readers: Sequence[OtherReader], limit: int = 5) -> str:
    """``pid 4242 (cat) had model.safetensors open; pid 77 (python3) mapped 2 model files``."""
    said = [
        f"pid {r.pid} ({r.name}) "
        + ("mapped " if r.mapped else "had ")
        + (_name(r.files[0]) if len(r.files) == 1 else f"{len(r.files)} model files")
        + ("" if r.mapped else " open")
        for r in readers[:limit]
    ]
    more = len(readers) - limit
    return "; ".join(said) + (f" and {more} more" if more > 0 else "")


def other_readers(result: WatchResult) -> Finding | None:
    """Processes outside the tree had the model's files open or mapped: what the cache held
    before, what was dropped again and what arrived are not the watched program's alone."""
    if not result.other_readers:
        return None
    text = (
        "Another process was reading the model's files during the watch: "
        f"{readers_line(result.other_readers)}."
    )
    held = {path for reader in result.other_readers for path in reader.files}
    before = _resident_before(result, held)
    if before is not None and before > COLD_THRESHOLD:
        start = result.cache.resident_before if result.cache is not None else None
        since = (
            f" (at the start {start:.1%} was: the other reader brought the rest in between)"
            if start is not None and before - start > COLD_THRESHOLD
            else ""
        )
        text += (
            f" {before:.1%} of the files it read were in the page cache when the program first "
            f"read them{since}: what another reader keeps there is no warm start of the "
            "program's."
        )
    dropped = _dropped(result)
    if dropped is not None:
        text += (
            f" {human_bytes(dropped[0])} of the model were dropped from the page cache after "
            "they arrived: the other reader's pages come and go too, so this does not say that "
            "memory was too short for the program."
        )
    unseen = [f for f in _partial(result) if f.path in held]
    if unseen:
        size = sum(f.size for f in unseen)
        seen = sum(min(f.bytes_read, f.size) for f in unseen) / size
        text += (
            f" Only {seen:.1%} of the {human_bytes(size)} the program read of them was seen "
            "arriving: pages the other reader dropped between two looks arrive unseen, so this "
            "does not say the load was lazy."
        )
    text += " What arrived, and how fast, may be partly its reads."
    evidence = {
        "readers": [asdict(reader) for reader in result.other_readers],
        "resident_before": round(before, 6) if before is not None else None,
        "evicted_bytes": dropped[0] if dropped is not None else 0,
    }
    words = "Watch again when nothing else reads the model (stop the other process or let it end)."
    return Finding("other-reader", text, evidence, words)


RULES: tuple[Callable[[WatchResult], Finding | None], ...] = (
    model_written,
    other_readers,
    not_cold,
    shared_descriptor,
    mmap_faults,
    partial_read,
    random_order,
    evicted,
    double_copy,
    swap,
    oom_killed,
    re_read,
    cache_charged,
    *BUCKET_RULES,
    *COLD_START_RULES,
    *SERVER_RULES,
)


def findings(result: WatchResult) -> tuple[Finding, ...]:
    return tuple(found for rule in RULES if (found := rule(result)) is not None)
