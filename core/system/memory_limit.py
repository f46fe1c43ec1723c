"""What a run did under a memory limit it really ran under: the record of one memory cgroup
(``system.memory_cgroup`` makes it), and its words.

The cgroup charges what its processes allocate (anonymous memory: a load's arrays) and the
page cache their reads and faults bring in (file pages), as a container's limit does. The
page cache is reclaimable, so a load whose cache fills the limit goes on (it reclaims and may
read the same pages again); anonymous memory is not, so a load whose arrays outgrow the limit
is OOM-killed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from modelmon.core.options import MiB
from modelmon.core.units import gib_text

GiB = 1 << 30
# A run that read this share of its model's bytes again after reclaim dropped them thrashes:
# its time is the limit's, not the loader's (a recommendation under a limit leaves it out).
THRASH_SHARE = 0.10


def ram_text(count: int) -> str:
    """Bytes of RAM: '0.9 GiB' from a GiB up, '312 MiB' below (a small limit's figures)."""
    return gib_text(count) if count >= GiB else f"{count / MiB:.0f} MiB"


def size_text(count: int) -> str:
    """A limit as it was most likely given: '16 GiB', '1500 MiB', else '1.4 GiB'."""
    if count and count % GiB == 0:
        return f"{count // GiB} GiB"
    if count and count % MiB == 0 and count < 64 * GiB:
        return f"{count // MiB} MiB"
    return gib_text(count)


@dataclass(frozen=True, slots=True)
class MemoryLimit:
    """A run's memory cgroup, measured. Peaks of the split are sampled (``SAMPLE_S``); the
    whole peak is the kernel's own where it keeps one."""

    limit_bytes: int
    peak_bytes: int  # the most the cgroup was charged at once, page cache included
    anon_peak_bytes: int  # anonymous memory (arrays, interpreters), sampled peak
    cache_peak_bytes: int  # page cache charged to it, sampled peak
    mapped_peak_bytes: int  # of the page cache, mapped into its processes, sampled peak
    # What held the charge at its highest sample: anonymous memory and page cache then.
    anon_at_peak_bytes: int
    cache_at_peak_bytes: int
    # Bytes read again after reclaim dropped them: the kernel's refaults of file pages, or
    # bytes of the model that arrived beyond its size, whichever is more.
    reread_bytes: int
    oom_killed: bool  # the kernel's OOM killer killed a process of the run in this cgroup
    oom_kills: int
    limit_hits: int | None  # times the charge met the limit and had to reclaim (v2 only)
    pressure_stall_s: float | None  # seconds some task stalled on memory (PSI, cgroup v2)
    cgroup: str  # its directory
    version: int  # cgroup v1 or v2
    # Anonymous and shared memory at once, sampled peak: what reclaim could not free.
    held_peak_bytes: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def cache_share(self) -> float:
        """The page cache's share of the limit at its peak."""
        return self.cache_peak_bytes / self.limit_bytes if self.limit_bytes else 0.0

    def thrashed(self, model_bytes: int) -> bool:
        """Read ``THRASH_SHARE`` or more of the model again after reclaim."""
        return model_bytes > 0 and self.reread_bytes >= THRASH_SHARE * model_bytes

    def held_text(self) -> str:
        """What held the memory at the peak: 'peak 1.0 GiB: 0.9 GiB anonymous and 0.1 GiB
        page cache then; page cache at most 0.6 GiB (0.1 GiB mapped)'."""
        mapped_mib = self.mapped_peak_bytes >= MiB
        mapped = f" ({ram_text(self.mapped_peak_bytes)} mapped)" if mapped_mib else ""
        return (
            f"peak {ram_text(self.peak_bytes)}: {ram_text(self.anon_at_peak_bytes)} anonymous "
            f"and {ram_text(self.cache_at_peak_bytes)} page cache then; page cache at most "
            f"{ram_text(self.cache_peak_bytes)}{mapped}"
        )

    def oom_text(self) -> str:
        """The OOM kill in one clause: 'the kernel's OOM killer ended it at the memory limit of
        1 GiB (peak ...)'."""
        return (
            f"the kernel's OOM killer ended it at the memory limit of "
            f"{size_text(self.limit_bytes)} ({self.held_text()})"
        )

    def line(self) -> str:
        """One line for a report: 'memory limit 1 GiB: peak 0.9 GiB: ...; re-read 12 MB'."""
        words = [f"memory limit {size_text(self.limit_bytes)} ({self.cgroup})", self.held_text()]
        if self.reread_bytes >= MiB:
            words.append(f"re-read {ram_text(self.reread_bytes)} after reclaim")
        if self.limit_hits:
            words.append(f"reached the limit {self.limit_hits:,} times")
        if self.pressure_stall_s:
            words.append(f"stalled on memory {self.pressure_stall_s:.2f} s")
        if self.oom_killed:
            words.append(f"OOM-killed ({self.oom_kills})")
        return "; ".join(words)


def oom_failure(failure: str | None, record: MemoryLimit | None) -> str | None:
    """A run's failure, with the OOM kill named with the limit when the cgroup's OOM killer
    ended a process of it."""
    if record is None or not record.oom_killed:
        return failure
    said = record.oom_text()
    if failure and "OOM killer" in failure:  # named already: add the limit and what held it
        limit = size_text(record.limit_bytes)
        return f"{failure}, at the memory limit of {limit} ({record.held_text()})"
    return f"{failure}; {said}" if failure else f"a process of the run: {said}"


def planned_only(reason: str, limit: int) -> str:
    """The one line said when a limit cannot be run under."""
    return (
        f"cannot run under a memory limit here ({reason}): planning with "
        f"{size_text(limit)} only, as a number"
    )


# What a worker's interpreter and libraries hold beside the model's bytes (measured: 40-60 MiB
# of anonymous memory for a worker of modelmon's, more for a framework's): a way of loading
# that needs the model plus this fits; within it, it is tight.
PROCESS_BYTES = 64 * MiB


def ways_under(model_bytes: int, limit: int) -> list[dict[str, Any]]:
    """Whether each way of loading ``model_bytes`` fits a memory limit of ``limit``, before
    loading: a copy (its arrays are anonymous: they must fit, or it is OOM-killed), a copy with
    its page cache kept beside it (a read-based copy holds both until the kernel reclaims the
    cache: past the limit it reclaims, and may read again), a mapping (page cache only:
    reclaimable, so past the limit it re-reads instead of dying), a stream (bounded)."""
    ways = (
        ("copy", "the arrays (a keep load's copy)", model_bytes + PROCESS_BYTES, "OOM-killed"),
        (
            "copy+cache",
            "the arrays and the page cache beside them",
            2 * model_bytes + PROCESS_BYTES,
            "reclaims the cache, and may read pages again",
        ),
        ("mapped", "a mapping (page cache only)", model_bytes + PROCESS_BYTES, "re-reads pages"),
        ("streamed", "a stream (discard on: bounded buffers)", PROCESS_BYTES, "cannot run"),
    )
    return [
        {
            "way": way,
            "what": what,
            "needs_bytes": needs,
            "fits": needs <= limit,
            "otherwise": otherwise,
        }
        for way, what, needs, otherwise in ways
    ]


def ways_text(model_bytes: int, limit: int) -> list[str]:
    """``ways_under`` in lines: 'copy       fits: the arrays (...), 1.2 GiB of 16 GiB'."""
    return [
        f"{way['way']:<10} {'fits' if way['fits'] else 'does NOT fit'}: {way['what']}, "
        f"{ram_text(way['needs_bytes'])} of {size_text(limit)}"
        + ("" if way["fits"] else f" (past it, the load {way['otherwise']})")
        for way in ways_under(model_bytes, limit)
    ]
