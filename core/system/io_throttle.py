"""The read throttle a cgroup puts on the disk that holds a file, for this process: cgroup v1's
``blkio.throttle.read_bps_device``/``read_iops_device``, or v2's ``io.max`` (``rbps``,
``riops``), as a container's I/O limits apply. On v2 every cgroup on the path up to the root
limits its subtree, so the lowest counts; on v1 blk-throttle's groups are flat (a parent's
limit does not reach its children's processes), so only the process's own cgroup counts.
A limit may name the disk the file system sits on, or one beneath it (device-mapper, md).

A throttle's accounting is per slice of time, not per byte as a disk's is: blk-throttle lets
a group read what its rate allows up to the end of the current slice (the time since the
slice began, rounded up to whole slices), and when it trims the slices used it keeps the
last one as leeway, so a group's reads can run up to two slices' bytes ahead of the rate. A
loader's deep queue can take that where plain reads do not (Run:ai's io_uring reads and the
safetensors library's, up to 1.09× the rate a plain reader gets, the start 0.15 s ahead, in
the block layer's own completions: ``benchmarks.throttle_trace``): a bound the throttle set
allows that much above it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.system.cgroups import cgroup_dirs
from modelmon.core.system.storage import (
    MOUNTINFO,
    SYS_BLOCK,
    parse_mountinfo,
    read_text,
    storage_facts,
)
from modelmon.core.units import rate_text

# A bound within this share of a throttle's byte rate is one the throttle set.
BINDS_WITHIN = 0.9
THROTTLE_COUNTS = "a throttle counts bytes by time slice, not as a disk serves them"
# blk-throttle's slice: HZ / 10 on a rotational disk (on every disk in recent kernels), HZ / 50
# on others in older ones: the longer one, which allows the most, is the one assumed.
THROTTLE_SLICE_S = 0.1
# How far ahead of the rate a group's reads may run: the slice in progress, and the one that
# trimming keeps (the kernel's "deviation that is less than two slices").
THROTTLE_AHEAD_S = 2 * THROTTLE_SLICE_S
THROTTLE_AHEAD = "a throttle lets a read run up to two slices (0.2 s) ahead of its rate"


@dataclass(frozen=True, slots=True)
class ReadThrottle:
    """The read limits on one disk for this process's reads (None: no such limit)."""

    bytes_per_s: int | None
    iops: int | None
    cgroup: str  # the directory that sets them (the byte limit's where both are set apart)

    def words(self) -> str:
        """ "reads throttled to 150 MiB/s (157 MB/s) and 200 IOPS by the cgroup …" """
        limits = []
        if self.bytes_per_s is not None:
            rate = self.bytes_per_s
            limits.append(f"{rate / 2**20:.4g} MiB/s ({rate_text(rate / 1e6)})")
        if self.iops is not None:
            limits.append(f"{self.iops} IOPS")
        return f"reads throttled to {' and '.join(limits)} by the cgroup {self.cgroup}"

    def binds(self, mbps: float) -> bool:
        """Whether reads at ``mbps`` are the throttle's doing: near its byte rate, or under an
        IOPS limit alone (whose byte rate follows the request size: not known here)."""
        if self.bytes_per_s is None:
            return self.iops is not None
        return mbps * 1e6 >= BINDS_WITHIN * self.bytes_per_s

    def slack(self, mbps: float, nbytes: int) -> float:
        """How far above ``mbps`` a read of ``nbytes`` may pass this throttle, as a share of
        it: two slices' bytes ahead of the rate, over the read's time (0 with no byte
        limit)."""
        if self.bytes_per_s is None or mbps <= 0 or nbytes <= 0:
            return 0.0
        return THROTTLE_AHEAD_S / (nbytes / (mbps * 1e6))


def _disk(name: str) -> tuple[int, int] | None:
    text = read_text(Path(SYS_BLOCK) / name / "dev")
    major, _, minor = (text or "").partition(":")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


def disk_numbers(path: str | os.PathLike[str]) -> list[tuple[int, int]]:
    """(major, minor) of the whole disk that holds ``path`` (throttles name disks, not their
    partitions) and of the disks beneath it (a device-mapper or md device's slaves); none
    where no block device does (FUSE, NFS, tmpfs, overlay) or ``path`` cannot be read."""
    try:
        disk = storage_facts(path).block_device
    except OSError:
        return []
    names, found = [disk] if disk else [], []
    while names:
        name = names.pop()
        number = _disk(name)
        if number is not None and number not in found:
            found.append(number)
        slaves = Path(SYS_BLOCK) / name / "slaves"
        with_slaves = sorted(os.listdir(slaves)) if slaves.is_dir() else []
        for slave in with_slaves:  # a partition's disk: where its own dev number is
            parent = Path(os.path.realpath(slaves / slave)).parent.name
            names.append(parent if (slaves / slave / "partition").exists() else slave)
    return found


def v1_limit(text: str | None, disk: tuple[int, int]) -> int | None:
    """The limit a ``blkio.throttle.*_device`` file sets on ``disk`` ("MAJ:MIN VALUE" lines)."""
    wanted = f"{disk[0]}:{disk[1]}"
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == wanted and value.strip().isdigit() and int(value) > 0:
            return int(value)
    return None


def v2_limits(text: str | None, disk: tuple[int, int]) -> tuple[int | None, int | None]:
    """(rbps, riops) that an ``io.max`` file sets on ``disk`` ("MAJ:MIN rbps=N riops=max ...")."""
    wanted = f"{disk[0]}:{disk[1]}"
    for line in (text or "").splitlines():
        words = line.split()
        if not words or words[0] != wanted:
            continue
        found = dict(pair.partition("=")[::2] for pair in words[1:])
        rbps, riops = found.get("rbps", "max"), found.get("riops", "max")
        return (int(rbps) if rbps.isdigit() else None, int(riops) if riops.isdigit() else None)
    return None, None


def _lowest(found: list[tuple[int, Path]]) -> tuple[int, Path] | None:
    return min(found, key=lambda limit: limit[0]) if found else None


def read_throttle(
    path: str | os.PathLike[str], mounts_text: str | None = None, cgroup_text: str | None = None
) -> ReadThrottle | None:
    """The read throttle on the disk that holds ``path`` for this process; None without one
    (or without a disk). ``mounts_text``/``cgroup_text``: this process's mountinfo and
    /proc/self/cgroup (read when not given). Never raises: a file it cannot read sets none."""
    disks = disk_numbers(path)
    if not disks:
        return None
    mounts = parse_mountinfo(mounts_text if mounts_text is not None else read_text(MOUNTINFO) or "")
    own = cgroup_text if cgroup_text is not None else read_text("/proc/self/cgroup") or ""
    dirs = cgroup_dirs(mounts, own, controller="io")
    if dirs and dirs[0][1] == 1:
        dirs = dirs[:1]  # v1: flat groups, only the process's own limits it
    rates: list[tuple[int, Path]] = []
    counts: list[tuple[int, Path]] = []
    for directory, version in dirs:
        for disk in disks:
            if version == 1:
                rate = v1_limit(read_text(directory / "blkio.throttle.read_bps_device"), disk)
                iops = v1_limit(read_text(directory / "blkio.throttle.read_iops_device"), disk)
            else:
                rate, iops = v2_limits(read_text(directory / "io.max"), disk)
            rates += [(rate, directory)] if rate is not None else []
            counts += [(iops, directory)] if iops is not None else []
    rate_limit, count_limit = _lowest(rates), _lowest(counts)
    where = rate_limit or count_limit
    if where is None:
        return None
    return ReadThrottle(
        rate_limit[0] if rate_limit else None,
        count_limit[0] if count_limit else None,
        str(where[1]),
    )
