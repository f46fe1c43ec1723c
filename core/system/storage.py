"""Facts about where a file lives: mount, filesystem, block device, readahead, scheduler.

Everything here reads /proc and /sys only. A missing or unreadable entry gives ``None``, never
an exception: containers, VMs and exotic filesystems hide parts of /sys, and a report that
says "unknown" is more useful than one that crashes.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

MOUNTINFO = "/proc/self/mountinfo"
SYS_DEV_BLOCK = "/sys/dev/block"
SYS_BLOCK = "/sys/block"
SYS_BDI = "/sys/class/bdi"

# Filesystems whose data comes over a network (or from another machine: 9p is a host share).
NETWORK_FS_TYPES = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "ceph",
        "glusterfs",
        "lustre",
        "9p",
        "afs",
        "gpfs",
        "beegfs",
        "orangefs",
        "pvfs2",
        "ocfs2",
        "gfs2",
        "ncpfs",
        "davfs",
        "coda",
    }
)
# FUSE filesystems known to serve local data. Every other fuse.* may be a network client
# (rclone, gcsfuse, s3fs, sshfs, goofys, blobfuse...), so it counts as network.
LOCAL_FUSE_TYPES = frozenset(
    {
        "fuseblk",
        "fuse.lxcfs",
        "fuse.fuse-overlayfs",
        "fuse.squashfuse",
        "fuse.squashfuse_ll",
        "fuse.portal",
        "fuse.ntfs-3g",
        "fuse.exfat",
        "fuse.bindfs",
        "fuse.gocryptfs",
        "fuse.encfs",
        "fuse.appimagelauncherfs",
        "fuse.mergerfs",
        "fuse.vmhgfs-fuse",
    }
)
RAM_FS_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs"})

# cgroup v1 writes "no limit" as PAGE_COUNTER_MAX pages, a number near 2**63.
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class MountEntry:
    """One line of /proc/<pid>/mountinfo, escapes decoded."""

    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str  # the directory of the filesystem that is mounted here (bind mounts)
    mount_point: str
    fs_type: str  # "ext4", "nfs4", "fuse.rclone"...
    source: str  # "/dev/vda", "server:/export", "remote:"
    options: str  # per-mount options ("rw,relatime")
    super_options: str  # per-filesystem options ("rw,discard")


@dataclass(frozen=True, slots=True)
class StorageFacts:
    path: str  # the resolved path the facts are about
    mount_point: str
    fs_type: str
    source: str
    block_device: str | None  # whole disk: "vda", "nvme0n1", "dm-0"; None for NFS/FUSE/tmpfs
    partition: str | None  # "nvme0n1p2" when the filesystem sits on a partition
    transport: str | None  # "virtio", "nvme", "sata", "usb", "scsi", "mmc", "virtual"
    rotational: bool | None
    read_ahead_kb: int | None
    scheduler: str | None
    is_network: bool
    is_fuse: bool
    description: str  # one human sentence

    @property
    def remote(self) -> bool:
        """A client stands between the reader and the bytes (FUSE or a network filesystem):
        it may keep what the last run left it, ignore fadvise, and serialise one descriptor."""
        return self.is_fuse or self.is_network


# --- mountinfo ---------------------------------------------------------------------------------


def decode_mount_field(text: str) -> str:
    """Undo the kernel's octal escapes (space is \\040, tab \\011, newline \\012, \\ is \\134)."""
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), text)


def parse_mountinfo(text: str) -> list[MountEntry]:
    """Parse the text of /proc/<pid>/mountinfo; lines that do not fit the format are skipped.

    Format: ``id parent maj:min root mount_point options [optional fields...] - type source
    super_options``. The optional fields vary in number, so the ``-`` separator is searched.
    """
    entries: list[MountEntry] = []
    for line in text.splitlines():
        fields = line.split()
        try:
            separator = fields.index("-", 6)
            major, minor = fields[2].split(":")
            entries.append(
                MountEntry(
                    mount_id=int(fields[0]),
                    parent_id=int(fields[1]),
                    major=int(major),
                    minor=int(minor),
                    root=decode_mount_field(fields[3]),
                    mount_point=decode_mount_field(fields[4]),
                    options=fields[5],
                    fs_type=fields[separator + 1],
                    source=decode_mount_field(fields[separator + 2]),
                    super_options=fields[separator + 3] if len(fields) > separator + 3 else "",
                )
            )
        except (ValueError, IndexError):
            continue
    return entries


def _is_under(path: str, mount_point: str) -> bool:
    return mount_point == "/" or path == mount_point or path.startswith(mount_point + "/")


def find_mount(
    entries: list[MountEntry], path: str, device: tuple[int, int] | None = None
) -> MountEntry | None:
    """The mount that holds ``path`` (already a realpath): the longest mount-point prefix.

    Several mounts can stack on one mount point; the one whose device matches ``st_dev``
    wins, else the last one (a later mount hides the earlier ones).
    """
    candidates = [entry for entry in entries if _is_under(path, entry.mount_point)]
    if not candidates:
        return None
    longest = max(len(entry.mount_point) for entry in candidates)
    candidates = [entry for entry in candidates if len(entry.mount_point) == longest]
    if device is not None:
        same_device = [entry for entry in candidates if (entry.major, entry.minor) == device]
        if same_device:
            return same_device[-1]
    return candidates[-1]


def classify_fs(fs_type: str) -> tuple[bool, bool]:
    """(is_network, is_fuse) for a mountinfo filesystem type."""
    is_fuse = fs_type in ("fuse", "fuseblk") or fs_type.startswith("fuse.")
    if is_fuse:
        return fs_type not in LOCAL_FUSE_TYPES, True
    return fs_type in NETWORK_FS_TYPES or fs_type.split(".")[0] in NETWORK_FS_TYPES, False


# --- block devices -----------------------------------------------------------------------------


def read_text(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except (OSError, ValueError):
        return None


def read_int(path: str | Path) -> int | None:
    text = read_text(path)
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_scheduler(text: str | None) -> str | None:
    """The active I/O scheduler from ``none [mq-deadline] kyber`` (the bracketed one)."""
    if not text:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text.split()[0]


def _transport(device_path: str) -> str | None:
    # The sysfs device path walks the bus hierarchy: .../virtio1/block/vda, .../nvme/nvme0/...
    for marker, name in (
        ("/virtio", "virtio"),
        ("/nvme", "nvme"),
        ("/usb", "usb"),
        ("/mmc", "mmc"),
        ("/ata", "sata"),
        ("/virtual/", "virtual"),
        ("/host", "scsi"),
    ):
        if marker in device_path:
            return name
    return None


def _block_device(major: int, minor: int) -> tuple[str | None, str | None, str | None]:
    """(disk, partition, transport) for a device number; Nones when it is no block device."""
    link = Path(SYS_DEV_BLOCK) / f"{major}:{minor}"
    if major == 0 or not link.exists():
        return None, None, None
    device_dir = Path(os.path.realpath(link))
    transport = _transport(str(device_dir))
    # A partition's sysfs dir holds a "partition" file and sits inside its disk's dir.
    if (device_dir / "partition").exists():
        return device_dir.parent.name, device_dir.name, transport
    return device_dir.name, None, transport


def _source_device(source: str) -> tuple[int, int] | None:
    # btrfs (and anything else with anonymous st_dev) still names its block device as source.
    try:
        status = os.stat(source) if source.startswith("/dev/") else None
    except OSError:
        return None
    if status is None or not stat.S_ISBLK(status.st_mode):
        return None
    return os.major(status.st_rdev), os.minor(status.st_rdev)


def _describe(facts: StorageFacts) -> str:
    """The one human sentence of ``facts`` (its ``description`` is not read)."""
    fs_type, source, disk = facts.fs_type, facts.source, facts.block_device
    read_ahead_kb = facts.read_ahead_kb
    if disk is not None:
        details = [facts.transport] if facts.transport else []
        if facts.rotational is not None:
            details.append("rotational" if facts.rotational else "non-rotational")
        if read_ahead_kb is not None:
            details.append(f"readahead {read_ahead_kb} KiB")
        if facts.scheduler is not None:
            details.append(f"scheduler {facts.scheduler}")
        where = f"{facts.partition} of {disk}" if facts.partition else disk
        extra = f" ({', '.join(details)})" if details else ""
        return f"{fs_type} on {where}{extra}"
    readahead = f", readahead {read_ahead_kb} KiB" if read_ahead_kb is not None else ""
    if facts.is_fuse:
        kind = "FUSE, possibly network" if facts.is_network else "FUSE, local"
        return f"{fs_type} from {source} ({kind}{readahead})"
    if facts.is_network:
        return f"{fs_type} from {source} (network filesystem{readahead})"
    if fs_type in RAM_FS_TYPES:
        return f"{fs_type} (in RAM, no block device)"
    if fs_type == "overlay":
        return "overlay (container filesystem, no single block device)"
    origin = f" from {source}" if source and source != fs_type else ""
    return f"{fs_type}{origin} (no block device)"


def storage_facts(path: str | os.PathLike[str]) -> StorageFacts:
    """Where ``path`` lives. Raises only what ``os.stat`` raises (missing file...)."""
    resolved = os.path.realpath(path)
    status = os.stat(resolved)
    device = (os.major(status.st_dev), os.minor(status.st_dev))
    mount = find_mount(parse_mountinfo(read_text(MOUNTINFO) or ""), resolved, device)
    mount_point = mount.mount_point if mount else "/"
    fs_type = mount.fs_type if mount else "unknown"
    source = mount.source if mount else ""
    is_network, is_fuse = classify_fs(fs_type)

    disk, partition, transport = _block_device(*device)
    if disk is None and not is_network and not is_fuse:
        source_device = _source_device(source)
        if source_device is not None:
            disk, partition, transport = _block_device(*source_device)

    rotational: bool | None = None
    read_ahead_kb: int | None = None
    scheduler: str | None = None
    if disk is not None:
        # Partitions have no queue of their own; dm-N and md devices do (they are disks here).
        queue = Path(SYS_BLOCK) / disk / "queue"
        rotational_flag = read_int(queue / "rotational")
        rotational = bool(rotational_flag) if rotational_flag is not None else None
        read_ahead_kb = read_int(queue / "read_ahead_kb")
        scheduler = parse_scheduler(read_text(queue / "scheduler"))
    else:
        # NFS and FUSE have a backing-dev-info named by st_dev that carries their readahead.
        read_ahead_kb = read_int(Path(SYS_BDI) / f"{device[0]}:{device[1]}" / "read_ahead_kb")

    facts = StorageFacts(
        path=resolved,
        mount_point=mount_point,
        fs_type=fs_type,
        source=source,
        block_device=disk,
        partition=partition,
        transport=transport,
        rotational=rotational,
        read_ahead_kb=read_ahead_kb,
        scheduler=scheduler,
        is_network=is_network,
        is_fuse=is_fuse,
        description="",
    )
    return replace(facts, description=_describe(facts))


def storage_by_folder(paths: Iterable[str | os.PathLike[str]]) -> tuple[StorageFacts, ...]:
    """Storage facts for each folder holding one of ``paths`` (a model's files), in order.

    A sharded model may spread over folders on different disks; files in one folder share
    their storage, so each folder is asked once, through its first file.
    """
    first_in_folder: dict[str, str | os.PathLike[str]] = {}
    for path in paths:
        first_in_folder.setdefault(os.path.dirname(os.fspath(path)), path)
    return tuple(storage_facts(first) for first in first_in_folder.values())
