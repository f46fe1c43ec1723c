"""The read throttle a cgroup puts on the disk that holds a file, for this process: cgroup v1's
``blkio.throttle.read_bps_device``/``read_iops_device``, or v2's ``io.max`` (``rbps``,
``riops``), the lowest along the path from this process's cgroup up to the root, as a
container's I/O limits apply.

A throttle's accounting is per slice of time, not per byte as a disk's is: a loader's reads
can pass it faster than plain reads do (the safetensors library's, 1.05× the rate that a
plain reader gets, in the block layer's own completions: ``benchmarks.throttle_trace``). A
load above a storage bound measured through one is that, not a host's cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from modelmon.core.system.cgroups import cgroup_dirs
from modelmon.core.system.storage import MOUNTINFO, parse_mountinfo, read_text


@dataclass(frozen=True, slots=True)
class ReadThrottle:
    """The lowest read limits on one disk along this process's cgroups (None: no limit)."""

    bytes_per_s: int | None
    iops: int | None
    cgroup: str  # the directory that sets the lower of them (the bytes' where both are set)

    def words(self) -> str:
        """ "reads throttled to 150 MiB/s (157 MB/s) and 200 IOPS by the cgroup …" """
        limits = []
        if self.bytes_per_s is not None:
            rate = self.bytes_per_s
            limits.append(f"{rate / 2**20:.4g} MiB/s ({rate / 1e6:.0f} MB/s)")
        if self.iops is not None:
            limits.append(f"{self.iops} IOPS")
        return f"reads throttled to {' and '.join(limits)} by the cgroup {self.cgroup}"


def disk_number(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """(major, minor) of the whole disk that holds ``path`` (throttles name disks, not their
    partitions); None where no block device does (FUSE, NFS, tmpfs)."""
    device = os.stat(path).st_dev
    node = Path(f"/sys/dev/block/{os.major(device)}:{os.minor(device)}")
    if os.major(device) == 0 or not node.exists():
        return None
    node = node.resolve()
    text = read_text((node.parent if (node / "partition").exists() else node) / "dev")
    major, _, minor = (text or "").partition(":")
    return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None


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
        name, *pairs = line.split()
        if name != wanted:
            continue
        found = dict(pair.partition("=")[::2] for pair in pairs)
        rbps, riops = found.get("rbps", "max"), found.get("riops", "max")
        return (int(rbps) if rbps.isdigit() else None, int(riops) if riops.isdigit() else None)
    return None, None


def read_throttle(
    path: str | os.PathLike[str], mounts_text: str | None = None, cgroup_text: str | None = None
) -> ReadThrottle | None:
    """The read throttle on the disk that holds ``path`` for this process; None without one
    (or without a disk). ``mounts_text``/``cgroup_text``: this process's mountinfo and
    /proc/self/cgroup (read when not given)."""
    disk = disk_number(path)
    if disk is None:
        return None
    mounts = parse_mountinfo(mounts_text if mounts_text is not None else read_text(MOUNTINFO) or "")
    own = cgroup_text if cgroup_text is not None else read_text("/proc/self/cgroup") or ""
    best_bytes: tuple[int, Path] | None = None
    best_iops: tuple[int, Path] | None = None
    for directory, version in cgroup_dirs(mounts, own, controller="io"):
        if version == 1:
            rate = v1_limit(read_text(directory / "blkio.throttle.read_bps_device"), disk)
            iops = v1_limit(read_text(directory / "blkio.throttle.read_iops_device"), disk)
        else:
            rate, iops = v2_limits(read_text(directory / "io.max"), disk)
        if rate is not None and (best_bytes is None or rate < best_bytes[0]):
            best_bytes = (rate, directory)
        if iops is not None and (best_iops is None or iops < best_iops[0]):
            best_iops = (iops, directory)
    if best_bytes is None and best_iops is None:
        return None
    where = (best_bytes or best_iops or (0, Path("/")))[1]
    return ReadThrottle(
        best_bytes[0] if best_bytes else None, best_iops[0] if best_iops else None, str(where)
    )
