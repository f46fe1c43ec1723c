"""From what the observer saw to a ``WatchResult``: per-file, per-process and per-description
reports, the arrival span, the loader, then the findings."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from modelmon.core.metrics.sampler import Sampler
from modelmon.core.system.cache import CacheState, hidden_reason
from modelmon.core.system.memory_cgroup import MemoryCgroup
from modelmon.core.system.oom import oom_victims
from modelmon.core.system.residency import PAGE_SIZE
from modelmon.core.system.storage import StorageFacts, storage_facts
from modelmon.core.watching.cold_start import build_cold_start
from modelmon.core.watching.connections import BucketArrivals
from modelmon.core.watching.findings import findings
from modelmon.core.watching.loaders import detect
from modelmon.core.watching.observer import Observer
from modelmon.core.watching.ready import ReadyWatch
from modelmon.core.watching.result import (
    DescriptionReport,
    FileReport,
    ProcessReport,
    Reference,
    WatchResult,
    WatchSamples,
)
from modelmon.core.watching.server_lines import ServerLine

QUIET_AT_END_S = 1.0  # quiet this long at the end makes its start "when it went quiet"


@dataclass(frozen=True)
class Ending:
    """How the watched program and the watch ended."""

    status: str
    ended_by: str
    exit_code: int | None
    signal: str | None
    wall_ns: int  # t0 to the exit (or to the end of the watch)
    end_ns: int


def slow_storage(facts: StorageFacts | None) -> str | None:
    if facts is None:
        return None
    if facts.is_fuse:
        return "FUSE"
    if facts.is_network:
        return "network"
    return "rotational" if facts.rotational else None


def arrival_span(windows: Sequence[tuple[int, int, int]]) -> tuple[int, int] | None:
    """(first, last) byte's arrival, in ns, from the scan windows that saw arrivals.

    The first byte came within its window; at the rate of the window after it, its bytes
    took bytes/rate, so it came that long before the window's end. The last byte likewise,
    at the rate of the window before. One window: its bounds (the load fit in one scan).
    """
    if not windows:
        return None
    ordered = sorted(windows, key=lambda w: w[1])
    start, end, count = ordered[0]
    first = start
    if len(ordered) > 1:
        next_start, next_end, next_count = ordered[1]
        rate = next_count / max(1, next_end - next_start)
        first = max(start, end - round(count / rate)) if rate > 0 else start
    start, end, count = ordered[-1]
    last = end
    if len(ordered) > 1:
        prev_start, prev_end, prev_count = ordered[-2]
        rate = prev_count / max(1, prev_end - prev_start)
        last = min(end, start + round(count / rate)) if rate > 0 else end
    return first, max(first, last)


def _storage(path: str) -> StorageFacts | None:
    try:
        return storage_facts(path)
    except OSError:
        return None


def assemble(
    observer: Observer,
    sampler: Sampler | None,
    *,
    command: tuple[str, ...] | None,
    pid: int,
    attached: bool,
    t0_ns: int,
    ending: Ending,
    cache: CacheState | None,
    swap: tuple[int | None, int | None],
    notes: Sequence[str],
    references: Sequence[Reference],
    changed_files: Sequence[str] = (),
    memory: MemoryCgroup | None = None,
    ready: ReadyWatch | None = None,
    lines: Sequence[ServerLine] = (),
) -> WatchResult:
    def seconds(ns: int | None) -> float | None:
        return None if ns is None else (ns - t0_ns) / 1e9

    tree = observer.tree
    files: list[FileReport] = []
    # The kernel hides these files' page cache from this user: no fraction of it is known.
    hidden = {f.index: hidden_reason(f.path) for f in observer.files.files}
    for model_file in observer.files.files:
        tracked = observer.arrivals.files.get(model_file.index)
        known = tracked if tracked and not hidden[model_file.index] else None
        use = observer.uses.get(model_file.index)
        facts = _storage(model_file.path)
        position = max(
            (g.max_position for g in observer.groups.groups if g.file == model_file.index),
            default=0,
        )
        mapped_peak = use.mapped_rss_peak if use else 0
        arrived = tracked.arrived_bytes if tracked else 0
        seen = min(model_file.size, max(mapped_peak, position))
        files.append(
            FileReport(
                index=model_file.index,
                path=model_file.path,
                size=model_file.size,
                named=model_file.named,
                resident_before=known.resident_before if known else math.nan,
                resident_after=known.resident_fraction() if known else math.nan,
                arrived_bytes=arrived,
                unique_arrived_bytes=tracked.unique_arrived_bytes() if tracked else 0,
                evicted_bytes=(tracked.evicted_arrived_pages * PAGE_SIZE if tracked else 0),
                mapped=bool(use and use.mapped),
                opened=bool(use and use.opened),
                mapped_rss_peak=mapped_peak,
                read_position_peak=position,
                bytes_read=max(arrived, seen),
                storage=facts.description if facts else "unknown",
                fs_type=facts.fs_type if facts else "unknown",
                slow_storage=slow_storage(facts),
                read_ahead_kb=facts.read_ahead_kb if facts else None,
                runs=tracked.runs if tracked else 0,
                jumps=tracked.jumps if tracked else 0,
            )
        )
    if observer.bucket is not None:
        files.append(bucket_file(observer.bucket))
    processes = []
    if tree is not None:
        for member in tree.members.values():
            counters = member.last.minus(member.baseline)
            processes.append(
                ProcessReport(
                    pid=member.pid,
                    ppid=member.ppid,
                    slot=member.slot,
                    command=" ".join(member.command)[:500],
                    started_s=seconds(member.first_seen_ns) or 0.0,
                    exited_s=seconds(member.died_ns),
                    major_faults=counters.major_faults,
                    minor_faults=counters.minor_faults,
                    cpu_seconds=round(counters.cpu_seconds, 3),
                    read_bytes=counters.read_bytes,
                    read_chars=counters.read_chars,
                    peak_rss=member.peak_rss,
                    peak_anon_rss=member.peak_anon_rss,
                    threads=member.threads,
                )
            )
    paths = {f.index: f.path for f in observer.files.files}
    descriptions = tuple(
        DescriptionReport(
            file=group.file,
            path=paths.get(group.file, ""),
            pids=tuple(group.pids),
            descriptors=tuple(sorted(group.members)),
            threads=dict(sorted(group.threads.items())),
            flags=oct(group.flags),
            o_direct=group.o_direct,
            position=group.position,
            max_position=group.max_position,
        )
        for group in observer.groups.groups
    )
    # Nothing of the watched program arrived before it started (or before the attach).
    arrivals = observer.bucket.windows if observer.bucket else observer.arrivals.windows
    windows = [(max(t0_ns, s), max(t0_ns, e), n) for s, e, n in arrivals]
    # A phase holds the model's bytes that first arrived in it (re-reads are the memory
    # record's): the phases' bytes add up to what arrived of the model, once each.
    firsts = observer.bucket.windows if observer.bucket else observer.arrivals.first_windows
    first_windows = [(max(t0_ns, s), max(t0_ns, e), n) for s, e, n in firsts]
    span = arrival_span(windows)
    first_s = seconds(span[0]) if span else None
    last_s = seconds(span[1]) if span else None
    quiet_ns = observer.last_active_ns
    quiet_at_end = quiet_ns is not None and (
        ending.ended_by == "quiet" or ending.end_ns - quiet_ns >= QUIET_AT_END_S * 1e9
    )
    quiet_s = seconds(quiet_ns) if quiet_at_end else None
    commands = [m.command for m in tree.members.values() if m.command] if tree is not None else []
    if not commands and command:  # ended before the first look: named by what was started
        commands = [tuple(command)]
    totals = observer.totals
    all_notes = [*notes, *sorted(observer.denied)]
    if observer.bucket is not None:
        all_notes += observer.bucket.notes()
    if tree is not None:
        all_notes += sorted(tree.denied)
    if observer.groups.unavailable:
        all_notes.append(f"descriptor sharing unknown: {observer.groups.unavailable}")
    all_notes += sorted(observer.arrivals.failed.values())
    unseen = sum(t.unseen_arrived_pages for t in observer.arrivals.files.values()) * PAGE_SIZE
    if unseen:  # the file's pages went as fast as they came: a cgroup limit, proactive reclaim
        all_notes.append(
            f"{unseen / 1e6:.0f} MB arrived and were reclaimed before the next look: counted "
            "from the page cache's shadow entries, in the bytes and the rate but with no place "
            "in the access pattern"
        )
    for reason in hidden.values():
        if reason:  # its pages would look absent: no arrival can be seen
            all_notes.append(f"{reason}: only what the processes mapped or read is counted")
    if cache is not None and files and not cache.nothing_local and not cache.unseen:
        size = sum(f.size for f in files)
        after = sum(f.resident_after * f.size for f in files if math.isfinite(f.resident_after))
        cache = dataclasses.replace(cache, resident_after=after / size if size else 0.0)
    result = WatchResult(
        command=command,
        pid=pid,
        attached=attached,
        status=ending.status,
        exit_code=ending.exit_code,
        signal=ending.signal,
        ended_by=ending.ended_by,
        wall_seconds=ending.wall_ns / 1e9,
        interval_s=observer.interval_ns / 1e9,
        seconds=(last_s - first_s) if first_s is not None and last_s is not None else None,
        first_byte_s=first_s,
        last_byte_s=last_s,
        quiet_s=quiet_s,
        bytes_read=sum(f.bytes_read for f in files),
        arrived_bytes=sum(f.arrived_bytes for f in files),
        process_bytes=sum(min(f.size, max(f.mapped_rss_peak, f.read_position_peak)) for f in files),
        model_bytes=sum(f.size for f in files),
        files=tuple(files),
        processes=tuple(processes),
        descriptions=descriptions,
        major_faults=totals.major_faults,
        minor_faults=totals.minor_faults,
        cpu_seconds=totals.cpu_seconds,
        read_bytes=totals.read_bytes,
        read_chars=totals.read_chars,
        peak_rss=observer.peak_rss,
        peak_anon_rss=observer.peak_anon_rss,
        swap_in_bytes=swap[0],
        swap_out_bytes=swap[1],
        cache=cache,
        loader=detect(commands, observer.libraries),
        notes=tuple(all_notes),
        references=tuple(references),
        samples=_samples(observer, sampler, t0_ns),
        changed_files=tuple(changed_files),
        other_readers=observer.others.report(observer.files.files),
        # Bytes that arrived again after reclaim dropped them count as re-read, beside the
        # kernel's refaults (one may see what the other missed).
        memory_limit=memory.record(sum(f.arrived_bytes - f.unique_arrived_bytes for f in files))
        if memory is not None
        else None,
        connections=observer.bucket.report(t0_ns) if observer.bucket is not None else None,
        oom_victims=_oom_victims(memory, processes),
    )
    if ready is not None and not attached:
        result = dataclasses.replace(
            result,
            cold_start=build_cold_start(
                observer.evidence,
                t0_ns=t0_ns,
                end_ns=ending.end_ns,
                windows=first_windows,
                span=span,
                model_bytes=result.model_bytes,
                ready=ready.seen,
                asked=ready.condition.asked,
                early=ready.early,
                url_failure=ready.url_failure,
                commands={p.pid: p.command for p in processes},
                memory=(memory.limit, list(memory.samples)) if memory is not None else None,
                lines=lines,
            ),
        )
    return dataclasses.replace(result, findings=findings(result))


def _oom_victims(
    memory: MemoryCgroup | None, processes: Sequence[ProcessReport]
) -> tuple[tuple[int, str], ...]:
    """The tree's processes the OOM killer killed, by the kernel's log, where its cgroup
    counted a kill (no look at the log otherwise)."""
    if memory is None or not memory.oom_kills():
        return ()
    victims = oom_victims(p.pid for p in processes)
    return tuple(sorted(victims.items()))


def bucket_file(bucket: BucketArrivals) -> FileReport:
    """A model in a bucket as one file of the report: its bytes as they arrived over the
    connections (which object each connection read is not seen from outside)."""
    arrived = bucket.received
    return FileReport(
        index=0,
        path=bucket.url,
        size=bucket.size,
        named=True,
        resident_before=math.nan,
        resident_after=math.nan,
        arrived_bytes=arrived,
        unique_arrived_bytes=min(arrived, bucket.size),
        evicted_bytes=0,
        mapped=False,
        opened=False,
        mapped_rss_peak=0,
        read_position_peak=0,
        bytes_read=arrived,
        storage=(
            f"{bucket.objects} objects in a bucket at {bucket.endpoint}, read over the network"
            if bucket.objects > 1
            else f"a bucket at {bucket.endpoint}, read over the network"
        ),
        fs_type="object-storage",
        slow_storage="network",
        read_ahead_kb=None,
        runs=0,
        jumps=0,
    )


def _samples(observer: Observer, sampler: Sampler | None, t0_ns: int) -> WatchSamples:
    columns = observer.log.columns()
    arrivals = {
        "start": (columns["start"] - t0_ns) / 1e9,
        "end": (columns["end"] - t0_ns) / 1e9,
        "file": columns["file"],
        "offset": columns["offset"],
        "length": columns["length"],
        "worker": columns["worker"],
    }
    watching_s = (observer.cpu_ns + observer.mapped_reads.cpu_ns) / 1e9
    if sampler is None:
        return WatchSamples(0.0, {}, {}, {}, arrivals, 0.0, watching_s)
    sampled = sampler.sampled()
    series = {name: ((t - t0_ns) / 1e9, v) for name, (t, v) in sampled.placed(sampler.over).items()}
    return WatchSamples(
        sampler.interval_s,
        dict(sampler.specs),
        series,
        dict(sampler.unavailable),
        arrivals,
        sampler.cpu_seconds,
        watching_s,
        ((sampled.starts - t0_ns) / 1e9, (sampled.ends - t0_ns) / 1e9),
        tuple(((t - t0_ns) / 1e9, files) for t, files in sampler.residency_maps()),
    )
