"""What each metric plot shows: its title, axes, series and their styles. Qt-free: the live
plots (``gui/plots/metrics.py``) and the exported figures (``gui/figures``) draw the same."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

GiB = 1 << 30  # memory, as a limit is given and drawn beside it


@dataclass(frozen=True, slots=True)
class Trace:
    series: str  # a series name; "worker_rss.*" means one curve per worker
    # "solid" | "dashed" | "faint" lines, "dotted" for a bound, "area" filled down to zero
    style: str = "solid"
    scale: float = 1.0  # values × scale = what the axis shows
    right: bool = False  # on the right-hand axis

    @property
    def per_worker(self) -> bool:
        return self.series.endswith(".*")


@dataclass(frozen=True, slots=True)
class MetricView:
    title: str
    y_label: str
    traces: tuple[Trace, ...]
    key: str  # what solid, dashed and faint mean here
    right_label: str | None = None  # the right-hand axis' title, when a trace is on it
    requires: str | None = None  # the metric source without which the plot has no data
    # Words the key adds while their series is drawn (a memory limit's lines, only under
    # one): the key names no line that is not there, and so fits its plot's two lines.
    keys_when: tuple[tuple[str, str], ...] = ()
    # A shorter way to say the key, phrase by phrase, where the whole does not fit a small
    # window's plot (the live plot shows the first form that fits, the figure the whole).
    shorter: tuple[tuple[str, str], ...] = ()

    def key_forms(self, names: Iterable[str]) -> list[str]:
        """The key of a plot that draws ``names``, then shorter ways to say it."""
        key = self.key_for(names)
        short = key
        for long, brief in self.shorter:
            short = short.replace(long, brief)
        return [key, short] if short != key else [key]

    def key_for(self, names: Iterable[str]) -> str:
        """The key of a plot that draws the series ``names``."""
        drawn = set(names)
        return "; ".join([self.key, *(words for name, words in self.keys_when if name in drawn)])


X_LABEL = "time since load start (s)"
MAX_WORKER_CURVES = 16  # per run; more workers still count in the totals

IOWAIT = MetricView(
    "IO wait",
    "IO wait (% of all CPUs)",
    (Trace("iowait_pct"),),
    "share of all cores idle with IO pending",
)
CPU = MetricView(
    "Worker CPU",
    "CPU (% of one core)",
    (Trace("workers_cpu_pct"), Trace("worker_cpu_pct.*", "faint")),
    "solid: all workers, faint: each worker",
)
# Under a memory limit the run's cgroup is drawn too: the limit as a dotted line, and what
# the cgroup is charged as two areas, all of it (the lighter part above is page cache) and
# its anonymous memory (what reclaim cannot free). Without a limit those series are absent,
# and so are their words in the key.
MEMORY = MetricView(
    "Memory",
    "memory (GiB)",
    (
        Trace("cgroup_bytes", "area", scale=1 / GiB),
        Trace("cgroup_anon_bytes", "area", scale=1 / GiB),
        Trace("limit_bytes", "dotted", scale=1 / GiB),
        Trace("workers_rss", scale=1 / GiB),
        Trace("worker_rss.*", "faint", scale=1 / GiB),
        Trace("mem_available", "dashed", scale=1 / GiB, right=True),
    ),
    "solid: workers' RSS, faint: each worker, dashed: available (right)",
    right_label="available memory (GiB)",
    keys_when=(("limit_bytes", "dotted: limit, areas: anon (dark), cache (light)"),),
    shorter=(("workers' RSS", "RSS"), ("each worker", "each")),
)
DEVICE = MetricView(
    "Device reads",
    "read throughput (MB/s)",
    (Trace("device_read_mbps"), Trace("load_mbps", "dashed")),
    "solid: the block device, dashed: the load's own bytes",
    requires="device",
)
METRIC_VIEWS = {view.title: view for view in (IOWAIT, CPU, MEMORY, DEVICE)}


def worker_of(name: str) -> int:
    """The worker a per-worker series belongs to ("worker_rss.3" → 3)."""
    tail = name.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else 1 << 30


def series_names(trace: Trace, available: Iterable[str]) -> list[str]:
    """The series ``trace`` draws among ``available`` (names): itself, or up to
    MAX_WORKER_CURVES per-worker series in worker order."""
    names = list(available)
    if not trace.per_worker:
        return [trace.series] if trace.series in names else []
    prefix = trace.series[:-1]
    chosen = sorted((n for n in names if n.startswith(prefix)), key=worker_of)
    return chosen[:MAX_WORKER_CURVES]


PLACEMENT_TIP = (
    "A rate is drawn at the middle of the sample interval it covers; memory and other "
    "levels at the moment they were read."
)
