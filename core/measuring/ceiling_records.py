"""What a ceiling is, and how a load is judged against one: ``Ceiling`` (a bound measured by
plain code, its runs and spread), ``Ceilings`` (one model's, and the bound that applies to a
load), ``Efficiency`` (a rate against its bound). ``ceilings`` measures them for files,
``object_ceilings`` for a model in object storage."""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.system.io_throttle import THROTTLE_AHEAD, THROTTLE_COUNTS
from modelmon.core.units import rate_text

CEILINGS = (
    "sequential_read",
    "parallel_read",
    "parallel_read_warm",
    "storage",
    "memory_fill",
    "memcpy",
    "keeping_read",
)
# A keeping read (plain reads into fresh memory) holds the whole model at once: measured only
# where that is this share of usable memory at most.
KEEPING_SHARE = 0.5
# The strategies whose loads keep no copy of the bytes (tensors are views of the mapping):
# the storage alone bounds them, as it bounds a load that discards.
VIEWS = ("mmap-view",)


@dataclass(frozen=True, slots=True)
class Ceiling:
    name: str
    mbps: float  # median of the repeats
    runs: tuple[float, ...]
    spec: str  # how it was measured, in one line
    verified: bool | None  # every run started in the cache state asked for (None: no cache)
    measured_at: float = 0.0  # time.time() when it was measured (0: unknown)
    wall_s: float = 0.0  # median wall time of one run, worker start-up included (0: unknown)
    # Of a bound found by a sweep: each setting and its MB/s (a file's: the median of its
    # runs, as the bound's is; a bucket's curve: one short read of each).
    curve: tuple[tuple[str, float], ...] = ()
    # Of a bucket's bound: the settings read whole, each with its median MB/s (the curve's
    # best, and its next where the best's whole reads fell short): the bound is the faster.
    whole: tuple[tuple[str, float], ...] = ()
    # The cgroup's read throttle that set this bound's rate, in words ("" none): a load's
    # reads can pass a throttle faster than the plain reads did.
    throttle: str = ""
    # How far above its runs a load may read by the storage's own accounting, as a share (a
    # throttle's two slices ahead of its rate, over one run's time; 0: none).
    slack: float = 0.0

    @property
    def best_setting(self) -> str | None:
        """The setting that gave its rate: the best of its whole reads, else of its curve
        (None: measured at one setting)."""
        points = self.whole or self.curve
        return max(points, key=lambda point: point[1])[0] if points else None

    @property
    def spec_setting(self) -> str:
        """ "1320 MB/s at 4 connection(s), 16 MiB GETs": its rate and the setting that gave
        it (the best of a curve's)."""
        setting = self.best_setting
        if setting is not None:
            return f"{rate_text(self.mbps)} at {setting}"
        return f"{rate_text(self.mbps)} ({self.spec})"

    def throttle_reason(self) -> str:
        """Why a load above this bound is, where a throttle set it ("" where none did)."""
        if not self.throttle:
            return ""
        return (
            f"the throttle on this disk ({self.throttle}) let it through faster than the "
            f"plain reads that measured the bound: {THROTTLE_COUNTS}"
        )

    @property
    def spread(self) -> float:
        """How far above it one run may land: half the range of its runs against their
        median, or the storage's slack where that is more."""
        return max(spread_of(self.runs), self.slack)

    @property
    def allowed(self) -> float:
        """The most a rate may be of this bound and still be an efficiency."""
        return allowed_ratio(self.runs, self.slack)


# A bound measured once, or whose runs agree, still allows this much above it: the timing of
# one run.
MIN_SPREAD = 0.02


def spread_of(runs: Sequence[float]) -> float:
    """Half the range of ``runs`` against their median (0 for fewer than two)."""
    median = statistics.median(runs) if runs else 0.0
    if len(runs) < 2 or median <= 0:
        return 0.0
    return (max(runs) - min(runs)) / 2 / median


def allowed_ratio(runs: Sequence[float], slack: float = 0.0) -> float:
    """The most a rate may be of a bound with these ``runs`` and still be an efficiency: one
    plus their spread (``MIN_SPREAD`` at least), or plus the storage's ``slack`` (a
    throttle's two slices) where that is more."""
    return 1 + max(spread_of(runs), MIN_SPREAD, slack)


def beyond_spread(ratio: float, bound: Ceiling) -> bool:
    """Whether a rate ``ratio`` times ``bound`` is above it by more than the bound's own
    spread: then it is no efficiency."""
    return ratio > bound.allowed


@dataclass(frozen=True, slots=True)
class Efficiency:
    """A load's rate against the bound that applies to it."""

    fraction: float
    bound: Ceiling
    keeps: bool  # the load keeps its bytes (bounded by the memory fill too)

    @property
    def above(self) -> bool:
        """Above its bound by more than the bound's own spread: not an efficiency but a sign
        that something below the guest (a host's cache that cold cannot drop) served it, or
        that a throttle on the disk let it through faster than the bound's plain reads."""
        return beyond_spread(self.fraction, self.bound)

    def words(self) -> str:
        """ "87 % of the storage bound" or, above it, what that means."""
        name = BOUND_WORDS.get(self.bound.name, self.bound.name.replace("_", " "))
        if self.above and self.bound.verified is None:  # a bucket's: no cache to blame
            return (
                f"{self.fraction:.0%} of the {name}: above it, so the plain GETs that measured "
                "it fell short of what this endpoint gives: not an efficiency"
            )
        if self.above and self.bound.name == "memory_fill":  # no read of it to blame
            return (
                f"{self.fraction:.0%} of the {name}: above it, so the fill that measured it "
                "(threads filling fresh memory) fell short of what the load's processes got: "
                "not an efficiency"
            )
        if self.above and self.bound.throttle:
            reason = self.bound.throttle_reason()
            return f"{self.fraction:.0%} of the {name}: above it, so {reason}; not an efficiency"
        if self.above:
            return (
                f"{self.fraction:.0%} of the {name}: above it, so a cache this machine cannot "
                "drop (the host's, below the guest) served some reads: not an efficiency"
            )
        if round(self.fraction, 2) > 1:  # reads as above 100 %: say it is the bound's noise
            return f"{self.fraction:.0%} of the {name}, within its spread ({self._spread_words()})"
        return f"{self.fraction:.0%} of the {name}"

    def _spread_words(self) -> str:
        """ "±10%: a throttle lets a read run up to two slices (0.2 s) ahead of its rate" where
        the throttle's slices set the spread, else the spread alone."""
        bound = self.bound
        words = f"±{bound.allowed - 1:.0%}"
        if bound.allowed > allowed_ratio(bound.runs):
            words += f": {THROTTLE_AHEAD}"
        return words


BOUND_WORDS = {
    "storage": "storage bound",
    "memory_fill": "memory-fill bound",
    "parallel_read": "parallel-read ceiling",
    "parallel_read_warm": "warm parallel-read ceiling",
}


def keeps_bytes(strategy: str, discard: bool) -> bool:
    """Whether a load keeps a copy of the bytes in fresh memory (and pays to fill it)."""
    return not discard and strategy not in VIEWS


@dataclass(frozen=True, slots=True)
class Ceilings:
    model: str
    items: tuple[Ceiling, ...]

    def get(self, name: str) -> Ceiling | None:
        return next((c for c in self.items if c.name == name), None)

    def has(self, names: Sequence[str]) -> bool:
        return all(self.get(name) is not None for name in names)

    def merged(self, newer: Ceilings) -> Ceilings:
        """These ceilings with ``newer``'s in place of the same names (one set per model)."""
        kept = tuple(c for c in self.items if newer.get(c.name) is None)
        return Ceilings(newer.model or self.model, (*kept, *newer.items))

    def fraction(self, mbps: float, name: str) -> float | None:
        ceiling = self.get(name)
        return mbps / ceiling.mbps if ceiling and ceiling.mbps > 0 else None

    def bound(self, keeps: bool, warm: bool = False) -> Ceiling | None:
        """The bound of a load: from a warm cache, the warm parallel read; else the storage
        (the plain parallel read where the sweep was not measured), and for a load that keeps
        its bytes the memory fill too, whichever is lower."""
        if warm and self.get("parallel_read_warm") is not None:
            return self.get("parallel_read_warm")
        storage = self.get("storage") or self.get("parallel_read")
        fill = self.get("memory_fill") if keeps else None
        found = [c for c in (storage, fill) if c is not None and c.mbps > 0]
        return min(found, key=lambda c: c.mbps) if found else None

    def efficiency(self, mbps: float, keeps: bool, warm: bool = False) -> Efficiency | None:
        bound = self.bound(keeps, warm)
        if bound is None or mbps <= 0:
            return None
        return Efficiency(mbps / bound.mbps, bound, keeps)

    def binding_words(self) -> str:
        """Which bound binds a load that keeps its bytes, in one sentence ("" unmeasured)."""
        storage, fill = self.get("storage"), self.get("memory_fill")
        if storage is None or fill is None:
            return ""
        if fill.mbps < storage.mbps:
            return (
                f"A load that keeps its bytes is limited here by filling fresh memory, not by "
                f"the storage: {rate_text(fill.mbps)} to fill against {rate_text(storage.mbps)} to "
                "read."
            )
        beside = fill_beside_mbps(fill)
        if beside is not None and beside < storage.mbps:
            # The fill beside reads is no bound: a load reads into the memory it fills, so
            # it may outrun both; it is why such a load can fall short of the storage's.
            return (
                f"A load that keeps its bytes is bound here by the storage, "
                f"{rate_text(storage.mbps)} to read; filling fresh memory takes "
                f"{rate_text(fill.mbps)} alone but {rate_text(beside)} while plain reads run "
                "beside it (they share the CPUs), so such a load may fall short of the storage "
                "bound."
            )
        return (
            f"A load that keeps its bytes is limited here by the storage, not by filling "
            f"fresh memory: {rate_text(storage.mbps)} to read against {rate_text(fill.mbps)} "
            "to fill."
        )

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "ceilings": [asdict(c) for c in self.items]}


def make_ceiling(
    name: str,
    runs: list[float],
    spec: str,
    verified: bool | None,
    walls: Sequence[float] = (),
    curve: tuple[tuple[str, float], ...] = (),
    throttle: str = "",
    slack: float = 0.0,
    whole: tuple[tuple[str, float], ...] = (),
) -> Ceiling:
    """A ceiling measured now: the median of ``runs``, and how it was measured."""
    return Ceiling(
        name,
        statistics.median(runs),
        tuple(runs),
        spec,
        verified,
        measured_at=time.time(),
        wall_s=statistics.median(walls) if walls else 0.0,
        curve=curve,
        throttle=throttle,
        slack=slack,
        whole=whole,
    )


FILL_ALONE = "alone"  # the memory fill's curve: its rate alone (the bound), then beside reads


def fill_ceiling(
    alone: list[float],
    beside: list[float],
    size: int,
    threads: int,
    reads: str,
    verified: bool | None,
) -> Ceiling:
    """The memory fill: fresh memory filled with nothing else running (the bound a load that
    keeps its bytes cannot pass), and with ``reads`` of the model beside it, sharing the CPUs
    as a load's own reads do (what says which bound binds)."""
    spec = (
        f"threads filling {size >> 20} MiB of fresh memory from /dev/zero alone; "
        f"{threads} threads beside {reads} of the model: "
        f"{rate_text(statistics.median(beside))}"
    )
    curve = (
        (FILL_ALONE, statistics.median(alone)),
        (f"beside {reads}", statistics.median(beside)),
    )
    return make_ceiling("memory_fill", alone, spec, verified, curve=curve)


def fill_beside_mbps(fill: Ceiling) -> float | None:
    """The memory fill's rate while the storage's reads ran beside it (None: not measured)."""
    return next((mbps for name, mbps in fill.curve if name != FILL_ALONE), None)
