"""What one bench run measured, as typed records: a job's runs and recommendation, the side
sections, and the whole run (``BenchResults``, written as results.json through ``codec``).
Every table, target and plot of the report reads these."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from benchmarks.engines import EnginesSection
from benchmarks.jobs import Cache, Entry, Kind
from benchmarks.knobs import KnobsResult
from benchmarks.watch import WatchReport
from modelmon.core import LoadResult
from modelmon.core.options import LoadOptions
from modelmon.core.runs import FreshResult

MiB = 1 << 20


@dataclass(frozen=True)
class Run:
    """One timed run of an entry in a job's rounds (or in its confirmation pairs)."""

    label: str  # the entry's
    kind: Kind
    name: str
    role: str
    repeat: int  # the round, from 0
    status: str  # "ok" | "failed" | "cancelled"
    error: str | None
    bytes: int
    seconds: float
    mbps: float
    cold: bool  # started verified cold
    warm: bool
    resident_before: float
    resident_after: float | None = None
    peak_rss: int = 0  # the workers' peaks summed, or the child's own VmHWM
    rss_ready: int = 0  # a child's RSS when it said ready (peers, core.load)
    worker_seconds: tuple[float, ...] = ()
    worker_peak_rss: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    host_reported: int | None = None  # free memory reported to the VM's host while it ran
    bound_mbps: float | None = None  # stopped at the time limit: the rate it stayed under


def entry_run(
    entry: Entry,
    result: FreshResult | LoadResult,
    *,
    peak_rss: int,
    rss_ready: int = 0,
    worker_seconds: tuple[float, ...] = (),
    worker_peak_rss: tuple[int, ...] = (),
    notes: tuple[str, ...] = (),
) -> Run:
    """An entry's load, in its workers or in a fresh process, as the round's run."""
    start = result.cache if isinstance(result, LoadResult) else result  # the page cache around it
    return Run(
        entry.label,
        entry.kind,
        entry.name,
        entry.role,
        0,
        result.status,
        result.error,
        result.bytes,
        result.seconds,
        result.mbps,
        start.cold,
        start.warm,
        start.resident_before,
        start.resident_after,
        peak_rss=peak_rss,
        rss_ready=rss_ready,
        worker_seconds=worker_seconds,
        worker_peak_rss=worker_peak_rss,
        notes=notes,
        host_reported=result.host_reported,
    )


def fresh_run(entry: Entry, result: FreshResult) -> Run:
    """An entry's load in a fresh process (a peer's, or ``core.load``'s in a child), timed by
    the child, as the round's run: its one process is the whole load."""
    return entry_run(entry, result, peak_rss=result.peak_rss, rss_ready=result.rss_ready)


@dataclass(frozen=True)
class CeilingRuns:
    mbps: float  # median of the rounds
    runs: tuple[float, ...]
    spec: str
    verified: bool  # every run started verified cold
    throttle: str = ""  # the cgroup's read throttle its plain reads passed, in words ("" none)
    slack: float = 0.0  # the share a load may read above it by the throttle's slice (0: none)


@dataclass(frozen=True)
class CandidateRow:
    """One of recommend()'s candidates as its search left it."""

    spec: str
    role: str
    peer: bool
    runs: int
    median_mbps: float  # of its runs; for one cut short, the bound it stayed under
    low: float | None
    high: float | None
    ended: str
    reason: str


@dataclass(frozen=True)
class RecommendationRecord:
    """What the report needs of recommend(): its pick, the config it wrote, its evidence."""

    spec: str  # the configuration the written config holds
    pick: str  # what to use: that configuration, or a peer that beat it
    pick_is_peer: bool
    config: str  # the path of the config file it wrote
    budget_s: float
    elapsed_s: float
    evidence_runs: int
    tie: bool
    explanation: tuple[str, ...]
    candidates: tuple[CandidateRow, ...]  # the measured ones fastest first, then the rest

    @property
    def measured(self) -> tuple[CandidateRow, ...]:
        return tuple(c for c in self.candidates if c.runs)

    def evidence_mbps(self) -> float | None:
        """The median MB/s recommend() rested its pick on."""
        row = next((c for c in self.candidates if c.spec == self.pick and c.runs), None)
        return row.median_mbps if row is not None and row.median_mbps else None


@dataclass(frozen=True)
class RankRound:
    status: str
    error: str | None
    mbps: float  # every rank's bytes over the wall time from the first go to the last end
    seconds: float
    cold: bool
    rank_mbps: tuple[float, ...]
    straggler: float | None  # the slowest rank's seconds over the median's


@dataclass(frozen=True)
class RanksSide:
    rounds: tuple[RankRound, ...]
    ok: int
    median_mbps: float | None
    median_straggler: float | None
    all_cold: bool


@dataclass(frozen=True)
class RanksRecord:
    spec: str
    replicas: int
    one: RanksSide
    many: RanksSide


@dataclass(frozen=True)
class SeriesMedians:
    """Medians of the monitored series over a load (None: the series was not available)."""

    device_read_mbps: float | None = None
    device_read_iops: float | None = None
    cpu_pct: float | None = None
    iowait_pct: float | None = None
    workers_cpu_pct: float | None = None
    load_mbps: float | None = None


@dataclass(frozen=True)
class MonitoredRun:
    status: str
    mbps: float
    seconds: float
    cold: bool
    warm: bool
    worker_seconds: tuple[float, ...]
    worker_peak_rss: tuple[int, ...]
    medians: SeriesMedians
    unavailable: dict[str, str]  # series → why it was not measured


@dataclass(frozen=True)
class Diagnosis:
    """Two monitored loads of a job's best configuration: kept, and in discard mode."""

    strategy: str
    options: LoadOptions
    cache: str
    kept: MonitoredRun
    discard: MonitoredRun
    worker_spread: float | None  # the slowest worker's seconds over the fastest's


@dataclass(frozen=True)
class Blkio:
    """What the hdd throttle let through during a job."""

    reads: int
    bytes: int
    bytes_per_read: float | None


@dataclass
class JobResult:
    env: str
    model_key: str
    cache: Cache
    model_bytes: int
    repeats: int
    entries: list[Entry] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    ceilings: dict[str, CeilingRuns] = field(default_factory=dict)
    recommendation: RecommendationRecord | None = None
    confirm_runs: list[Run] = field(default_factory=list)  # read by the regret only
    bounded: list[str] = field(default_factory=list)  # labels stopped at the time limit
    time_limit_s: float | None = None
    ranks: RanksRecord | None = None
    diagnosis: Diagnosis | None = None
    elapsed_s: float = 0.0
    loadavg: tuple[float, float] | None = None  # 1-minute load average at start and end
    blkio: Blkio | None = None

    def runs_of(self, label: str) -> list[Run]:
        return [r for r in self.runs if r.label == label]


# --- the side sections -------------------------------------------------------------------


@dataclass(frozen=True)
class OverheadResult:
    """``monitor_overhead.measure``: the sampler on and off, alternating, cold, discard."""

    model: str
    strategy: str
    workers: int
    pairs: int
    seconds: float
    median_mbps_monitored: float
    median_mbps_unmonitored: float
    ratios: tuple[float, ...]
    median_ratio: float
    overhead: float  # 1 − the median ratio: measured, noisy
    sampler_core_share_median: float  # the bound the target is judged on
    sampler_core_shares: tuple[float, ...]
    sampler_thread_share_median: float
    source_cpu_us_per_sample: dict[str, float]
    overhead_target: float
    sampler_target: float
    target_met: bool
    model_key: str = ""


@dataclass(frozen=True)
class RamLoad:
    strategy: str
    workers: int
    status: str
    mbps: float
    cold: bool
    bytes: int
    worker_peak_rss: tuple[int, ...]
    peak_rss: int
    sampled_peak_rss: float | None
    ratio: float | None  # peak RSS over bytes loaded


@dataclass(frozen=True)
class DiscardLoad:
    workers: int
    status: str
    mbps: float
    cold: bool
    bytes: int
    worker_peak_rss: tuple[int, ...]
    sampled_peak_rss: float | None


@dataclass(frozen=True)
class DiscardSection:
    memory_limit: int
    runs: tuple[DiscardLoad, ...]
    max_worker_peak_rss: int
    target_met: bool


@dataclass(frozen=True)
class PeerMemory:
    label: str
    bytes: int
    peak_rss: float
    ratio: float


@dataclass(frozen=True)
class MemoryReport:
    """``memory.measure`` in a fresh process, with the peers' own peaks beside it."""

    model_bytes: int
    parent_peak_rss: int
    load_to_ram: tuple[RamLoad, ...]
    discard: DiscardSection
    model_key: str = ""
    peers: tuple[PeerMemory, ...] = ()


@dataclass(frozen=True)
class WholeLoad:
    status: str
    wall_s: float
    load_s: float
    bytes: int


@dataclass(frozen=True)
class PlanResult:
    """Planning a load of many tensors: in memory, and from a real file's header."""

    tensors: int
    workers: int
    chunk: int
    in_memory_s: float
    open_model_s: float
    json_decode_s: float
    plan_after_open_s: float
    open_and_plan_s: float
    header_bytes: int
    whole_load: WholeLoad | None
    target_met: bool
    open_target_met: bool


@dataclass(frozen=True)
class ModelInfo:
    key: str
    description: str
    format: str
    bytes: int
    files: int
    tensors: int
    path: str


@dataclass(frozen=True)
class Machine:
    date: str
    cpu: str
    cores: int
    ram_gib: float
    kernel: str
    os: str
    python: str
    filesystem: str
    disk: str
    disk_size: str | None
    libraries: dict[str, str]
    free_memory: str
    idle_memory: str = "not recorded"


@dataclass
class BenchResults:
    command: str
    reproduce: str
    machine: Machine
    jobs: list[JobResult] = field(default_factory=list)
    skipped_envs: dict[str, str] = field(default_factory=dict)  # environment → why
    skipped: dict[str, str] = field(default_factory=dict)  # side section → why it did not run
    notes: list[str] = field(default_factory=list)
    peers: dict[str, str | None] = field(default_factory=dict)  # peer → why not, None: ran
    models: dict[str, ModelInfo] = field(default_factory=dict)
    overhead: OverheadResult | None = None
    memory: MemoryReport | None = None
    plan: PlanResult | None = None
    gui_tick: dict[str, Any] | None = None  # the JSON gui_tick.py prints, shown as it is
    knobs: KnobsResult | None = None
    engines: EnginesSection | None = None  # users' own loaders (benchmarks/engines.py)
    watch: WatchReport | None = None  # other loaders watched (benchmarks/watch.py)
    # Object storage (benchmarks/objects.py): each network profile's figures, as it wrote them.
    objects: list[dict[str, Any]] = field(default_factory=list)
    # Loads under memory limits (benchmarks/limits.py), as it wrote them.
    limits: dict[str, Any] | None = None
    # A real server, vLLM's CPU build (benchmarks/servers.py), as it wrote its figures.
    servers: dict[str, Any] | None = None
    wall_s: float = 0.0
    plots: dict[str, str] = field(default_factory=dict)  # "env-cache" → PNG file name
    rendered_again: str | None = None  # the command that rendered this file again
