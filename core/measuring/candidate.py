"""One candidate of the recommendation search: a configuration (one of modelmon's strategies
with its options, or another loader with its knobs), its runs, and how its measurement ended.

A module of its own because both the search (``measuring.search``) and the sentences about
its outcome (``output.explain``) use it, and neither imports the other's way round.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from modelmon.core.configuration import Configuration, ProgramConfig, StrategyConfig
from modelmon.core.loading.result import LoadResult
from modelmon.core.loading.strategies import get_strategy
from modelmon.core.measuring.ab import Verdict
from modelmon.core.options import LoadOptions

# The standard error of a median of normal noise is this many times the mean's.
MEDIAN_OVER_MEAN_ERROR = math.sqrt(math.pi / 2)


def median_error(rates: Sequence[float]) -> float:
    """How finely the median of ``rates`` is known: its standard error over itself (one
    run's noise, their standard deviation, shrinks with the square root of the runs);
    infinite for fewer than two runs, which tell no noise."""
    if len(rates) < 2 or statistics.median(rates) <= 0:
        return math.inf
    spread = statistics.stdev(rates) / math.sqrt(len(rates))
    return MEDIAN_OVER_MEAN_ERROR * spread / statistics.median(rates)


# How a candidate's measurement ended:
# finished      every run it was given completed
# cut early     stopped on course for far longer than the leader's load (``cutoff``), or at
#               the time the budget left it
# ruled out     the storage facts rule it out (shared descriptor on FUSE/NFS): measured once,
#               as the failure mode, and never recommended
# failed        a run failed (the error is the reason)
# not measured  the budget ran out before its turn
Ending = Literal["finished", "cut early", "ruled out", "failed", "not measured"]

# Strategies from the simplest to the most delicate (the last step of ``robustness``): the
# library is what a user does today, plain reads next, mapping depends on the kernel's
# readahead and fault path, a warm-up doubles the traffic, O_DIRECT may fall back or fail,
# and one shared descriptor is the FUSE/NFS failure mode.
SIMPLICITY = (
    "library",
    "sequential",
    "pread",
    "mmap",
    "mmap-view",
    "warmup",
    "direct",
    "mmap-shared-fd",
)


@dataclass
class Candidate:
    config: Configuration  # modelmon's strategy and options, or another loader's run
    role: str = ""  # "baseline" (the library), "failure mode", "peer" (another loader)
    results: list[LoadResult] = field(default_factory=list)  # completed cold runs, in order
    stopped_below_mbps: float | None = None  # cut short: the rate it stayed under
    ended: Ending = "finished"
    reason: str = ""  # why it ended so (cut early, ruled out, failed, not measured)
    verdict: Verdict | None = None  # its duel's pairs: B/A = this / the one it lost to
    wall_seconds: list[float] = field(default_factory=list)  # each run incl. start-up, eviction

    @classmethod
    def of(
        cls,
        strategy: str,
        options: LoadOptions,
        role: str = "",
        results: list[LoadResult] | None = None,
    ) -> Candidate:
        """One of modelmon's strategies as a candidate."""
        return cls(StrategyConfig(strategy, options), role, list(results or []))

    @property
    def spec(self) -> str:
        return self.config.spec

    @property
    def own(self) -> StrategyConfig | None:
        """The configuration when it is one of modelmon's (a config file can hold it)."""
        return self.config if isinstance(self.config, StrategyConfig) else None

    @property
    def program(self) -> ProgramConfig | None:
        """The configuration when it is another loader's (or the user's) run."""
        return self.config if isinstance(self.config, ProgramConfig) else None

    @property
    def strategy(self) -> str:
        """modelmon's strategy; for another loader, "" (no strategy of modelmon's)."""
        return self.config.strategy if isinstance(self.config, StrategyConfig) else ""

    @property
    def options(self) -> LoadOptions:
        """modelmon's options; another loader has none of them (the defaults)."""
        return self.config.options if isinstance(self.config, StrategyConfig) else LoadOptions()

    @property
    def readahead(self) -> int | None:
        """KiB of device readahead its runs set (None: the device as it is)."""
        if isinstance(self.config, ProgramConfig):
            return self.config.readahead
        return self.config.options.readahead

    @property
    def median_mbps(self) -> float:
        """Median of the completed runs; for a run cut short, the bound it stayed under."""
        if self.results:
            return statistics.median(r.mbps for r in self.results)
        return self.stopped_below_mbps or 0.0

    @property
    def median_error(self) -> float:
        """How finely ``median_mbps`` is known (``median_error``)."""
        return median_error([r.mbps for r in self.results])

    @property
    def spread_mbps(self) -> tuple[float, float] | None:
        """(min, max) of the completed runs."""
        if not self.results:
            return None
        rates = [r.mbps for r in self.results]
        return min(rates), max(rates)

    @property
    def readers(self) -> int:
        """Concurrent readers: workers × threads, or another loader's concurrency setting."""
        if isinstance(self.config, ProgramConfig):
            concurrency = self.config.settings.get("RUNAI_STREAMER_CONCURRENCY", "1")
            return int(concurrency) if concurrency.isdigit() else 1
        return self.options.workers * self.options.threads

    def robustness(self) -> tuple[int, ...]:
        """Lower is simpler and more robust; between two within noise, the lower is picked.

        In order: own descriptors before a shared one (the FUSE/NFS failure mode); buffered
        reads before O_DIRECT (falls back, or fails, where the filesystem lacks it); modelmon
        before a peer library (no new dependency, and the config file applies it); the
        device's readahead as it is before a changed one (a change of the machine); planned
        reads before reads through a mapping (``Strategy.maps_file``: page-fault reads, and
        a copy out of a mapping holds the mapped pages and the copies at once, peak RSS 2.1×
        the model measured for ``library``, 1.02× for pread); fewer
        concurrent readers (less memory and fewer descriptors, kinder to neighbours); no hints
        or warm-up pass; then ``SIMPLICITY``.
        """
        order = SIMPLICITY.index(self.strategy) if self.strategy in SIMPLICITY else len(SIMPLICITY)
        hints = (self.options.fadvise != "none") + (self.options.madvise != "none")
        own = self.own
        return (
            int(self.strategy == "mmap-shared-fd"),
            int(self.strategy == "direct"),
            int(own is None),
            int(self.readahead is not None),
            int(own is not None and get_strategy(own.strategy).maps_file),
            self.readers,
            hints + int(self.strategy == "warmup"),
            order,
        )
