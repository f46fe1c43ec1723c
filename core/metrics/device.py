"""Reads of the block device(s) holding the model, from /proc/diskstats.

These count every reader of the device, not just the load: they show what the disk really
did (readahead, other processes), which the load's own throughput cannot. Files with no
block device under them (FUSE, NFS, tmpfs, overlay) have no such counters: the source then
says so instead of showing zeros that would read as "the disk was idle".
"""

from __future__ import annotations

from dataclasses import dataclass

from modelmon.core.metrics import procfs
from modelmon.core.metrics.base import (
    NAN,
    MetricSpec,
    MonitorTarget,
    Rate,
    Source,
    describe_error,
)
from modelmon.core.metrics.series import INTERVAL
from modelmon.core.system.storage import storage_facts

DISKSTATS = "/proc/diskstats"
SECTOR_BYTES = 512  # diskstats counts 512-byte sectors whatever the device's block size
# major minor name, then 11 counters (14 fields, before 4.18), 15 with discards (18 fields,
# 4.18+) or 17 with flushes (20 fields, 5.5+). Reads are the first counters in all three.
_MIN_FIELDS = 14


@dataclass(frozen=True, slots=True)
class DiskCounters:
    reads: int  # read requests completed (after merging)
    sectors_read: int  # 512-byte sectors


def parse_diskstats(text: str, names: frozenset[str] | None = None) -> dict[str, DiskCounters]:
    """Device name -> read counters; lines of another shape are skipped.

    ``names`` limits the parse to those devices (the file lists every loop and ram device).
    Kernels before 2.6.25 gave partitions a 7-field line without request counts; they are
    skipped like any other short line.
    """
    counters: dict[str, DiskCounters] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < _MIN_FIELDS or (names is not None and fields[2] not in names):
            continue
        try:
            counters[fields[2]] = DiskCounters(reads=int(fields[3]), sectors_read=int(fields[5]))
        except ValueError:
            continue
    return counters


def read_diskstats(names: frozenset[str] | None = None) -> dict[str, DiskCounters]:
    with open(DISKSTATS) as stats:
        return parse_diskstats(stats.read(), names)


@dataclass(frozen=True, slots=True)
class DeviceChoice:
    devices: tuple[str, ...]  # distinct diskstats names: the partition when there is one
    without_device: tuple[str, ...]  # "fuse.rclone on /mnt/x" for files with no block device
    problem: str | None  # why none can be measured


def choose_devices(paths: tuple[str, ...]) -> DeviceChoice:
    """The devices to count for ``paths``: the partition a filesystem sits on, else its disk.

    A partition's line counts only that partition's reads, so another partition of the same
    disk busy with something else does not show up as the load's reads.
    """
    devices: dict[str, None] = {}
    without: dict[str, None] = {}
    for path in paths:
        try:
            facts = storage_facts(path)
        except OSError as error:
            return DeviceChoice(
                (), (), f"cannot find the device of {path}: {describe_error(error)}"
            )
        device = facts.partition or facts.block_device
        if device is None:
            without[f"{facts.fs_type} on {facts.mount_point}"] = None
        else:
            devices[device] = None
    if not devices:
        where = ", ".join(without) or "no files"
        return DeviceChoice((), tuple(without), f"no block device: {where} — see load throughput")
    try:
        listed = read_diskstats(frozenset(devices))
    except OSError as error:
        return DeviceChoice((), tuple(without), f"cannot read {DISKSTATS}: {describe_error(error)}")
    missing = [name for name in devices if name not in listed]
    if missing:
        # A container can see the host's /proc/diskstats under other names, or none at all.
        return DeviceChoice((), tuple(without), f"{', '.join(missing)} not in {DISKSTATS}")
    return DeviceChoice(tuple(devices), tuple(without), None)


class DeviceSource(Source):
    name = "device"
    description = "Read MB/s and IOPS of the block device under the model, from /proc/diskstats."

    def __init__(self, target: MonitorTarget) -> None:
        super().__init__(target)
        self._choice = choose_devices(tuple(dict.fromkeys(target.paths)))
        self._names = frozenset(self._choice.devices)
        self._bytes = Rate()
        self._reads = Rate()
        self._stats = procfs.ProcFile(DISKSTATS)

    def specs(self) -> list[MetricSpec]:
        devices = " + ".join(self._choice.devices) or "the model's device"
        left_out = ""
        if self._choice.without_device:
            left_out = f"; files on {', '.join(self._choice.without_device)} are not counted"
        return [
            MetricSpec(
                "device_read_mbps",
                "MB/s",
                f"Bytes read from {devices} per second (MB = 10⁶ bytes) by every reader "
                f"of the device, readahead included{left_out}.",
                over=INTERVAL,
            ),
            MetricSpec(
                "device_read_iops",
                "IOPS",
                f"Read requests {devices} completed per second, after the block layer "
                f"merged adjacent ones{left_out}.",
                over=INTERVAL,
            ),
        ]

    def unavailable(self) -> str | None:
        return self._choice.problem

    def sample(self, now_ns: int) -> dict[str, float]:
        counters = parse_diskstats(self._stats.read().decode(), self._names)
        if len(counters) != len(self._names):  # a device went away (unplugged, dm removed)
            self._bytes.update(now_ns, NAN)
            self._reads.update(now_ns, NAN)
            return {}
        sectors = sum(c.sectors_read for c in counters.values())
        reads = sum(c.reads for c in counters.values())
        return {
            "device_read_mbps": self._bytes.update(now_ns, float(sectors * SECTOR_BYTES)) / 1e6,
            "device_read_iops": self._reads.update(now_ns, float(reads)),
        }

    def close(self) -> None:
        self._stats.close()
