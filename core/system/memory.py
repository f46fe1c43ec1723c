"""How much RAM there is, and how much a load may fill: /proc/meminfo and our memory cgroup.

Like the storage facts, everything reads /proc and /sys only; a missing entry gives ``None``.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

import psutil

from modelmon.core.errors import OptionsError
from modelmon.core.limits import MIN_MEMORY_LIMIT
from modelmon.core.options import MiB
from modelmon.core.system.cgroups import cgroup_dirs
from modelmon.core.system.host_memory import reports_free_pages
from modelmon.core.system.proactive_reclaim import proactive_reclaim
from modelmon.core.system.storage import MOUNTINFO, MountEntry, parse_mountinfo, read_int, read_text
from modelmon.core.units import gib_text

_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a huge number


@dataclass(frozen=True, slots=True)
class MemoryFacts:
    """Bytes of RAM. ``usable`` is what a load can fill before something must be evicted."""

    total: int
    available: int  # MemAvailable: free plus cheaply reclaimable (page cache included)
    page_cache: int  # Cached
    cgroup_limit: int | None  # memory limit of our cgroup (smallest up the tree); None: none
    cgroup_used: int | None  # working set of the cgroup (usage minus inactive file cache)
    usable: int  # min(available, cgroup_limit - cgroup_used, address-space room)
    # RLIMIT_AS (ulimit -v) when set: a worker inherits it, and a load it cannot map or
    # allocate fails with ENOMEM however much RAM is free.
    address_space_limit: int | None = None
    swap_total: int = 0  # SwapTotal (zram included); 0: no swap
    swap_used: int = 0  # SwapTotal - SwapFree
    hugepages: str | None = None  # transparent hugepage mode: "always", "madvise", "never"
    free: int = 0  # MemFree: pages no one uses, what a load's page cache and arrays take first
    # A VM's host takes free pages back (virtio-balloon free page reporting): see host_memory.
    returns_free_memory: bool = False
    # What our memory cgroup can still charge before it must reclaim (limit minus usage, page
    # cache included; the tightest up the tree); None: no limit.
    cgroup_free: int | None = None
    # How the host pages out idle memory under no pressure (proactive_reclaim); None: it
    # does not, as far as this kernel says.
    proactive_reclaim: str | None = None

    def fits_with_cache(self, model_bytes: int) -> bool:
        """The model's arrays and its page cache both fit in usable RAM (a read-based keep
        load holds both until the kernel drops the cache)."""
        return 2 * model_bytes <= self.usable


THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"


def swap_warning(model_bytes: int, facts: MemoryFacts, discard: bool = False) -> str | None:
    """One line when keeping ``model_bytes`` in RAM would likely push the machine into swap,
    else None. The arrays are anonymous memory; the file's page cache fills as it is read. When
    both do not fit, the kernel reclaims, and with swap configured it balances that between the
    page cache and other programs' anonymous pages (swappiness): they go to swap."""
    if discard or facts.swap_total == 0 or facts.fits_with_cache(model_bytes):
        return None
    in_use = f"; {gib_text(facts.swap_used)} of swap already in use" if facts.swap_used else ""
    return (
        f"loading keeps {gib_text(model_bytes)} in RAM and reads as much through the page "
        f"cache, more than the {gib_text(facts.usable)} usable: the machine may start "
        f"swapping{in_use} (with discard on, a load is measured without keeping)"
    )


def max_memory_limit() -> int:
    """The most RAM a limit may allow: the machine's, or its memory cgroup's when smaller."""
    facts = memory_facts()
    return min(facts.total, facts.cgroup_limit or facts.total)


def memory_limit_range() -> str:
    """'from 1 MiB to 23.4 GiB (this machine's RAM)'."""
    low = f"{MIN_MEMORY_LIMIT // MiB} MiB"
    return f"from {low} to {gib_text(max_memory_limit())} (this machine's RAM)"


def check_memory_limit(limit: object) -> int:
    """A RAM limit in bytes, from ``limits.MIN_MEMORY_LIMIT`` to ``max_memory_limit()``: below
    a MiB it is a slip of the unit, above the machine's RAM it would call a model that cannot
    fit "fitting"."""
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not MIN_MEMORY_LIMIT <= limit <= max_memory_limit()
    ):
        raise OptionsError(f"the memory limit must be {memory_limit_range()}, not {limit!r} bytes")
    return limit


def parse_bracketed(text: str) -> str:
    """The selected word of a sysfs choice list: ``always [madvise] never`` → ``madvise``."""
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else text.split()[0]


def parse_meminfo(text: str) -> dict[str, int]:
    """/proc/meminfo as bytes by key ("MemTotal", "MemAvailable", "Cached"...)."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            scale = 1024 if len(parts) > 1 and parts[1] == "kB" else 1
            values[key.strip()] = int(parts[0]) * scale
    return values


def _parse_limit(text: str | None) -> int | None:
    if text is None or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value < _UNLIMITED else None


def _stat_value(text: str | None, key: str) -> int:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _limit_and_usage(directory: Path, version: int) -> tuple[int | None, int | None]:
    if version == 2:
        return (
            _parse_limit(read_text(directory / "memory.max")),
            read_int(directory / "memory.current"),
        )
    return (
        _parse_limit(read_text(directory / "memory.limit_in_bytes")),
        read_int(directory / "memory.usage_in_bytes"),
    )


def cgroup_memory(mounts: list[MountEntry], cgroup_text: str) -> tuple[int | None, int | None]:
    """(limit, working set) of the tightest memory cgroup we are in; (None, None) if none."""
    best: tuple[int, int] | None = None
    for directory, version in cgroup_dirs(mounts, cgroup_text):
        limit, usage = _limit_and_usage(directory, version)
        key = "inactive_file" if version == 2 else "total_inactive_file"
        inactive = _stat_value(read_text(directory / "memory.stat"), key)
        if limit is None or usage is None:
            continue
        # Usage counts page cache, most of which the kernel reclaims before it OOM-kills;
        # usage minus inactive file pages is the working set that really uses the limit up.
        working_set = max(0, usage - inactive)
        if best is None or limit - working_set < best[0] - best[1]:
            best = (limit, working_set)
    return best if best is not None else (None, None)


def cgroup_free(mounts: list[MountEntry], cgroup_text: str) -> int | None:
    """What the tightest memory cgroup we are in can still charge before it reclaims (limit
    minus usage, page cache included: a charge past it evicts its members' cache first, or
    swaps them); None without a limit."""
    rooms = [
        max(0, limit - usage)
        for directory, version in cgroup_dirs(mounts, cgroup_text)
        for limit, usage in [_limit_and_usage(directory, version)]
        if limit is not None and usage is not None
    ]
    return min(rooms, default=None)


def memory_facts() -> MemoryFacts:
    meminfo = parse_meminfo(read_text("/proc/meminfo") or "")
    total = meminfo.get("MemTotal", 0)
    available = meminfo.get("MemAvailable", meminfo.get("MemFree", 0))
    page_cache = meminfo.get("Cached", 0)
    if total == 0:  # no /proc/meminfo (odd sandboxes): ask psutil
        memory = psutil.virtual_memory()
        total, available = memory.total, memory.available
        page_cache = int(getattr(memory, "cached", 0))
    mounts = parse_mountinfo(read_text(MOUNTINFO) or "")
    cgroup_text = read_text("/proc/self/cgroup") or ""
    limit, used = cgroup_memory(mounts, cgroup_text)
    usable = available if limit is None or used is None else min(available, limit - used)
    address_space = address_space_limit()
    if address_space is not None:  # what is left of it once an interpreter like ours runs
        usable = min(usable, address_space - psutil.Process().memory_info().vms)
    swap_total = meminfo.get("SwapTotal", 0)
    thp = read_text(THP_ENABLED)
    return MemoryFacts(
        swap_total=swap_total,
        swap_used=max(0, swap_total - meminfo.get("SwapFree", swap_total)),
        hugepages=parse_bracketed(thp) if thp else None,
        free=meminfo.get("MemFree", available),
        returns_free_memory=reports_free_pages(),
        proactive_reclaim=proactive_reclaim(),
        cgroup_free=cgroup_free(mounts, cgroup_text) if limit is not None else None,
        total=total,
        available=available,
        page_cache=page_cache,
        cgroup_limit=limit,
        cgroup_used=used,
        usable=max(0, usable),
        address_space_limit=address_space,
    )


def address_space_limit() -> int | None:
    """This process's RLIMIT_AS soft limit in bytes; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft
