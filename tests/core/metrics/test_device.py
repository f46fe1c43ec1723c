"""/proc/diskstats parsing, and which device the model's files are counted on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.metrics import device as device_module
from modelmon.core.metrics.device import (
    DeviceSource,
    DiskCounters,
    choose_devices,
    parse_diskstats,
)
from modelmon.core.system.storage import StorageFacts

from .fakes import target

# 20 fields (5.5+: discards and flushes), 18 fields (4.18+: discards), 14 fields (older),
# a pre-2.6.25 partition line (7 fields, skipped) and garbage.
DISKSTATS = """\
 254       0 vda 178782 10939 40717994 10352 6084 473 48909 2409 0 5239 3586 642 5 412 13 19 2
 259       0 nvme0n1 5000 10 900000 1200 300 0 4000 90 0 1500 1290 0 0 0 0
 259       2 nvme0n1p2 4100 7 800000 1000 200 0 3000 80 2 1400 1080 0 0 0 0
 253       0 dm-0 777 0 123456 300 10 0 80 4 0 310 304
   8       1 sda1 100 200 300 400
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 not a line at all
 254      16 vdb x 0 0 0 0 0 0 0 0 0 0
"""


def test_diskstats_gives_reads_and_sectors_for_each_line_variant():
    stats = parse_diskstats(DISKSTATS)
    assert stats["vda"] == DiskCounters(reads=178782, sectors_read=40717994)
    assert stats["nvme0n1p2"] == DiskCounters(reads=4100, sectors_read=800000)
    assert stats["dm-0"] == DiskCounters(reads=777, sectors_read=123456)
    assert "sda1" not in stats and "vdb" not in stats  # too short / not numbers
    assert set(stats) == {"vda", "nvme0n1", "nvme0n1p2", "dm-0", "loop0"}


def test_diskstats_can_be_limited_to_some_devices():
    assert set(parse_diskstats(DISKSTATS, frozenset({"dm-0", "vda"}))) == {"dm-0", "vda"}


def facts(
    path: str, fs_type: str, mount_point: str, disk: str | None = None, partition: str | None = None
) -> StorageFacts:
    fuse = fs_type.startswith("fuse")
    return StorageFacts(
        path=path,
        mount_point=mount_point,
        fs_type=fs_type,
        source="src",
        block_device=disk,
        partition=partition,
        transport=None,
        rotational=None,
        read_ahead_kb=None,
        scheduler=None,
        is_network=fuse or fs_type == "nfs4",
        is_fuse=fuse,
        description="",
    )


@pytest.fixture
def fake_storage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Files under /fake/<kind>/ live where the table below says; diskstats is a tmp file."""
    table = {
        "fuse": ("fuse.rclone", "/mnt/x", None, None),
        "nfs": ("nfs4", "/mnt/nfs", None, None),
        "nvme": ("ext4", "/data", "nvme0n1", "nvme0n1p2"),
        "lvm": ("xfs", "/srv", "dm-0", None),
        "vda": ("ext4", "/", "vda", None),
        "ghost": ("ext4", "/", "vdz", None),
    }

    def storage_facts(path: str) -> StorageFacts:
        kind = Path(path).parts[2]
        if kind == "missing":
            raise FileNotFoundError(2, "No such file or directory", path)
        return facts(path, *table[kind])

    stats = tmp_path / "diskstats"
    stats.write_text(DISKSTATS)
    monkeypatch.setattr(device_module, "storage_facts", storage_facts)
    monkeypatch.setattr(device_module, "DISKSTATS", str(stats))
    return stats


def test_fuse_has_no_block_device_and_says_where_to_look_instead(fake_storage: Path):
    choice = choose_devices(("/fake/fuse/model.safetensors",))
    assert choice.problem == "no block device: fuse.rclone on /mnt/x — see load throughput"
    source = DeviceSource(target(1, paths=("/fake/fuse/a", "/fake/nfs/b")))
    assert source.unavailable() == (
        "no block device: fuse.rclone on /mnt/x, nfs4 on /mnt/nfs — see load throughput"
    )


def test_a_filesystem_on_a_partition_counts_the_partition(fake_storage: Path):
    assert choose_devices(("/fake/nvme/a", "/fake/nvme/b")).devices == ("nvme0n1p2",)
    assert choose_devices(("/fake/lvm/a",)).devices == ("dm-0",)


def test_a_device_missing_from_diskstats_or_a_missing_file_is_unavailable(fake_storage: Path):
    assert choose_devices(("/fake/ghost/a",)).problem == "vdz not in " + str(fake_storage)
    assert "cannot find the device of /fake/missing/a" in str(
        choose_devices(("/fake/missing/a",)).problem
    )


def test_files_on_several_devices_sum_the_distinct_devices(fake_storage: Path):
    source = DeviceSource(
        target(1, paths=("/fake/nvme/a", "/fake/vda/b", "/fake/nvme/c", "/fake/fuse/d"))
    )
    assert source.unavailable() is None
    spec = {s.name: s for s in source.specs()}
    assert "nvme0n1p2 + vda" in spec["device_read_mbps"].description
    assert "fuse.rclone on /mnt/x are not counted" in spec["device_read_mbps"].description
    first = source.sample(0)
    assert np.isnan(first["device_read_mbps"]) and np.isnan(first["device_read_iops"])
    # Half a second later: nvme0n1p2 read 100 requests of 2000 sectors, vda 50 of 1000.
    fake_storage.write_text(
        DISKSTATS.replace(" 4100 7 800000 ", " 4200 7 802000 ").replace(
            " 178782 10939 40717994 ", " 178832 10939 40718994 "
        )
    )
    values = source.sample(500_000_000)  # the same file, kept open by the source, re-read
    source.close()
    assert values["device_read_iops"] == pytest.approx(300.0)  # 150 reads in 0.5 s
    assert values["device_read_mbps"] == pytest.approx(3000 * 512 / 0.5 / 1e6)


def test_a_device_that_vanishes_mid_run_gives_gaps(fake_storage: Path):
    source = DeviceSource(target(1, paths=("/fake/vda/a",)))
    source.sample(0)
    fake_storage.write_text("")
    assert source.sample(100_000_000) == {}  # the sampler records NaN for missing names
    source.close()


def test_the_real_root_disk_resolves_and_dev_shm_is_unavailable(tmp_path: Path):
    file = tmp_path / "weights.bin"
    file.write_bytes(b"x")
    here = choose_devices((str(file),))
    if here.problem and here.problem.startswith("no block device"):
        pytest.skip(f"tmp_path has no block device here: {here.problem}")
    assert here.problem is None and here.devices
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm")
    with open(os.path.join("/dev/shm", f"modelmon-test-{os.getpid()}"), "wb") as shm:
        try:
            problem = choose_devices((shm.name,)).problem
        finally:
            os.unlink(shm.name)
    assert problem == "no block device: tmpfs on /dev/shm — see load throughput"
