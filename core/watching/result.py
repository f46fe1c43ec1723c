"""What a watch found: one record per concept (file, process, open file description, finding),
and the whole as ``WatchResult``, which ``--json`` prints (``to_dict``).

Times are seconds after the watch's t0: the command's start, or the moment of attaching.
Bytes are bytes; MB/s are decimal (10⁶ bytes), as everywhere in modelmon.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from modelmon.core.metrics.base import MetricSpec
from modelmon.core.metrics.series import PLACEMENT, floats, series_document
from modelmon.core.system.cache import CacheState
from modelmon.core.system.memory_limit import MemoryLimit
from modelmon.core.watching.cold_start import ColdStart
from modelmon.core.watching.connections import ConnectionReport
from modelmon.core.watching.loaders import Loader


@dataclass(frozen=True, slots=True)
class FileReport:
    index: int  # the read log's ``file`` column
    path: str
    size: int
    named: bool  # named before the program ran (--model or its arguments)
    resident_before: float  # fraction in the page cache when first seen
    resident_after: float  # at the end
    arrived_bytes: int  # pages that arrived in the page cache while watched, each arrival
    unique_arrived_bytes: int  # bytes of the file that arrived at least once
    evicted_bytes: int  # bytes that arrived and were dropped again while watched
    mapped: bool  # a process of the tree mapped it
    opened: bool  # a process of the tree had a descriptor on it
    mapped_rss_peak: int  # most bytes of it resident in one process's mappings at a look
    read_position_peak: int  # furthest offset of a description on it (read() progress)
    bytes_read: int  # max(arrived, the process-side evidence), see WatchResult.bytes_read
    storage: str  # where it lives, in one sentence
    fs_type: str
    slow_storage: str | None  # "FUSE" | "network" | "rotational" | None (local, fast)
    read_ahead_kb: int | None
    runs: int  # runs of arrived pages
    jumps: int  # of them, runs that started away from resident data


@dataclass(frozen=True, slots=True)
class ProcessReport:
    pid: int
    ppid: int
    slot: int  # the read log's ``worker`` column for pages only it held
    command: str
    started_s: float  # when the watch first saw it
    exited_s: float | None
    major_faults: int  # its own and its reaped children's, since it was first seen
    minor_faults: int
    cpu_seconds: float
    read_bytes: int  # /proc/PID/io read_bytes (block layer reads it caused), children's too
    read_chars: int  # rchar: bytes its read calls returned, cached or not
    peak_rss: int
    peak_anon_rss: int  # resident memory that is not file pages (its copies of the model)
    threads: int


@dataclass(frozen=True, slots=True)
class DescriptionReport:
    """One open file description on a model file, and every descriptor seen on it."""

    file: int
    path: str
    pids: tuple[int, ...]
    descriptors: tuple[tuple[int, int], ...]  # (pid, fd)
    threads: dict[int, int]  # pid -> its threads (which all share its descriptors)
    flags: str  # octal, as fdinfo shows them
    o_direct: bool
    position: int  # the description's offset at the last look
    max_position: int

    @property
    def shared(self) -> bool:
        return len(self.pids) > 1


@dataclass(frozen=True, slots=True)
class OtherReader:
    """A process outside the watched tree seen with model files open or mapped: its reads
    move the model's pages too."""

    pid: int
    name: str  # its command name (/proc/PID/comm)
    files: tuple[str, ...]  # the model files it was seen with
    mapped: bool  # it mapped one (else it had them open)


@dataclass(frozen=True, slots=True)
class Finding:
    code: str  # "shared-descriptor", "mmap-faults", "partial-read", ...
    text: str  # one or two sentences, with the figures
    evidence: dict[str, Any]  # the figures the text rests on
    fix: str  # what to change, in the detected loader's terms


@dataclass(frozen=True, slots=True)
class Reference:
    """A figure to hold the watched load against: a ceiling of this storage or modelmon's
    best load of the same model (measured by the caller, in the same session)."""

    name: str  # "parallel_read", "modelmon best"
    mbps: float
    spec: str  # how it was measured


@dataclass(frozen=True)
class WatchSamples:
    interval_s: float
    specs: dict[str, MetricSpec]
    series: dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (seconds after t0, values)
    unavailable: dict[str, str]
    arrivals: dict[str, np.ndarray]  # the read log: start/end (s), file, offset, length, worker
    sampler_cpu_seconds: float
    watch_cpu_seconds: float  # of the watching itself: the tree, descriptors, page scans
    # Each sample's interval (start, end seconds after t0): the series' rows, in order.
    spans: tuple[np.ndarray, np.ndarray] | None = None
    # The sampler's residency maps: (seconds after t0, {path: resident fraction per bin}).
    residency_maps: tuple[tuple[float, dict[str, np.ndarray]], ...] = ()


@dataclass(frozen=True)
class WatchResult:
    command: tuple[str, ...] | None  # None when attached with --pid
    pid: int  # the root of the tree
    attached: bool
    status: str  # "exited" | "killed" | "stopped" | "detached" | "cancelled" | "gone"
    # The command's exit status, or minus the signal that ended it (-9), as subprocess gives
    # it; None when attached or when it did not end.
    exit_code: int | None
    signal: str | None  # the signal that ended it ("SIGKILL"), if one did
    ended_by: str  # "exit" | "quiet" | "cancel" | "exit-of-attached"
    wall_seconds: float
    interval_s: float  # how often the tree was sampled
    seconds: float | None
    first_byte_s: float | None
    last_byte_s: float | None
    quiet_s: float | None
    bytes_read: int
    arrived_bytes: int
    process_bytes: int
    model_bytes: int
    files: tuple[FileReport, ...]
    processes: tuple[ProcessReport, ...]
    descriptions: tuple[DescriptionReport, ...]
    major_faults: int
    minor_faults: int
    cpu_seconds: float
    read_bytes: int
    read_chars: int
    peak_rss: int
    peak_anon_rss: int
    swap_in_bytes: int | None
    swap_out_bytes: int | None
    cache: CacheState | None
    loader: Loader
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()
    references: tuple[Reference, ...] = ()
    samples: WatchSamples | None = field(default=None, repr=False)
    # Model files whose size or modification time changed while the program ran: written
    # into, so what arrived is not a load of the model as it was.
    changed_files: tuple[str, ...] = ()
    # Processes outside the tree seen with the model's files open or mapped while watched.
    other_readers: tuple[OtherReader, ...] = ()
    # The memory cgroup the command ran in under a memory limit: peak, split, re-reads, OOM
    # kills; None without one.
    memory_limit: MemoryLimit | None = None
    # A model in a bucket: the tree's connections to its endpoint, and what arrived over them.
    connections: ConnectionReport | None = None
    # A started command's cold start: ready, its phases, its ranks (None when attached).
    cold_start: ColdStart | None = None
    # The processes of the tree the kernel's log says its OOM killer killed: (pid, name).
    oom_victims: tuple[tuple[int, str], ...] = ()

    def oom_victims_text(self) -> str:
        """'pid 4242 (python)', the OOM killer's victims; '' where none is known."""
        return ", ".join(f"pid {pid} ({name})" for pid, name in self.oom_victims)

    @property
    def mbps(self) -> float | None:
        if not self.seconds or self.seconds <= 0 or not self.bytes_read:
            return None
        return self.bytes_read / self.seconds / 1e6

    @property
    def ended_before_first_sample(self) -> bool:
        """The program exited before the watch's first regular sample: what arrived is
        known (a final scan), when it arrived is not."""
        return self.ended_by == "exit" and self.wall_seconds < self.interval_s

    @property
    def saw_model(self) -> bool:
        return bool(self.files) and (
            self.bytes_read > 0 or any(f.mapped or f.opened for f in self.files)
        )

    @property
    def killed_text(self) -> str:
        """How the signal ended it: 'killed by SIGTERM', or the OOM kill at its memory limit
        (where the OOM killer ended the command itself, or the log names no victim)."""
        limited = self.memory_limit
        own = not self.oom_victims or any(pid == self.pid for pid, _ in self.oom_victims)
        if limited is not None and limited.oom_killed and own:
            return limited.oom_text()
        return f"killed by {self.signal}"

    def with_references(self, references: tuple[Reference, ...]) -> WatchResult:
        """This result with figures to hold it against (``modelmon.core.storage_references``)."""
        return dataclasses.replace(self, references=references)

    def to_dict(self, samples: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "command": list(self.command) if self.command is not None else None,
            "pid": self.pid,
            "attached": self.attached,
            "status": self.status,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "ended_by": self.ended_by,
            "loader": asdict(self.loader),
            "wall_seconds": _round(self.wall_seconds),
            "interval_s": self.interval_s,
            "ended_before_first_sample": self.ended_before_first_sample,
            "seconds": _round(self.seconds),
            "first_byte_s": _round(self.first_byte_s),
            "last_byte_s": _round(self.last_byte_s),
            "quiet_s": _round(self.quiet_s),
            "bytes_read": self.bytes_read,
            "mbps": _round(self.mbps),
            "arrived_bytes": self.arrived_bytes,
            "process_bytes": self.process_bytes,
            "model_bytes": self.model_bytes,
            "files": [asdict(f) for f in self.files],
            "processes": [asdict(p) for p in self.processes],
            "descriptors": [
                {
                    **asdict(d),
                    "threads": {str(k): v for k, v in d.threads.items()},
                    "shared": d.shared,
                }
                for d in self.descriptions
            ],
            "major_faults": self.major_faults,
            "minor_faults": self.minor_faults,
            "cpu_seconds": _round(self.cpu_seconds),
            "read_bytes": self.read_bytes,
            "read_chars": self.read_chars,
            "peak_rss": self.peak_rss,
            "peak_anon_rss": self.peak_anon_rss,
            "swap_in_bytes": self.swap_in_bytes,
            "swap_out_bytes": self.swap_out_bytes,
            "changed_files": list(self.changed_files),
            "other_readers": [asdict(reader) for reader in self.other_readers],
            "cache": asdict(self.cache) if self.cache is not None else None,
            "findings": [asdict(f) for f in self.findings],
            "references": [asdict(r) for r in self.references],
            "notes": list(self.notes),
            "memory_limit": self.memory_limit.to_dict() if self.memory_limit else None,
            "connections": asdict(self.connections) if self.connections else None,
            "cold_start": self.cold_start.to_dict() if self.cold_start else None,
            "oom_victims": [{"pid": pid, "name": name} for pid, name in self.oom_victims],
        }
        if samples and self.samples is not None:
            data["samples"] = _samples_dict(self.samples)
        return data


def _round(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _samples_dict(samples: WatchSamples) -> dict[str, Any]:
    return {
        "interval_s": samples.interval_s,
        "sampler_cpu_seconds": _round(samples.sampler_cpu_seconds),
        "watch_cpu_seconds": _round(samples.watch_cpu_seconds),
        "unavailable": samples.unavailable,
        "placement": PLACEMENT.replace("the load started", "the watch began"),
        "series": series_document(samples.specs, samples.series, samples.spans),
        "arrivals": {
            key: floats(column) if column.dtype.kind == "f" else column.tolist()
            for key, column in samples.arrivals.items()
        },
        "residency_maps": [
            {"t": t, "files": {p: floats(m) for p, m in maps.items()}}
            for t, maps in samples.residency_maps
        ],
    }
