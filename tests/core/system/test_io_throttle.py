"""The read throttle a cgroup puts on a model's disk: this process's own cgroup's on v1
(blkio's groups are flat), the lowest along its cgroups on v2 (io.max); and a storage bound
measured through one says so, as does a load above it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from modelmon.core.measuring.ceiling_records import Ceiling, Ceilings
from modelmon.core.system.io_throttle import (
    THROTTLE_AHEAD_S,
    ReadThrottle,
    read_throttle,
    v1_limit,
    v2_limits,
)

MiB = 1 << 20


def _mountinfo(mount_point: Path, fs_type: str, options: str) -> str:
    return f"40 1 0:40 / {mount_point} rw,nosuid - {fs_type} cgroup {options}\n"


def test_a_devices_line_names_only_its_own_disk() -> None:
    text = "8:0 1000\n254:0 157286400\n254:16 0"
    assert v1_limit(text, (254, 0)) == 157286400
    assert v1_limit(text, (254, 16)) is None and v1_limit(text, (7, 0)) is None
    io_max = "254:0 rbps=157286400 wbps=max riops=200 wiops=max\n8:0 rbps=max riops=50"
    assert v2_limits(io_max, (254, 0)) == (157286400, 200)
    assert v2_limits(io_max, (8, 0)) == (None, 50) and v2_limits(io_max, (1, 1)) == (None, None)


@pytest.mark.parametrize("version", [1, 2])
def test_the_limits_that_reach_this_process_are_its_throttle(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelmon.core.system import io_throttle

    monkeypatch.setattr(io_throttle, "disk_numbers", lambda path: [(254, 0)])
    root = tmp_path / "cgroup"
    outer, inner = root / "pod", root / "pod" / "container"
    inner.mkdir(parents=True)
    if version == 1:
        (root / "blkio.throttle.read_bps_device").write_text("")
        (outer / "blkio.throttle.read_bps_device").write_text("254:0 104857600\n")
        (inner / "blkio.throttle.read_bps_device").write_text("254:0 209715200\n")
        (inner / "blkio.throttle.read_iops_device").write_text("254:0 300\n")
        mounts, own = _mountinfo(root, "cgroup", "rw,blkio"), "7:blkio:/pod/container\n"
        # v1's groups are flat: the parent's 100 MiB/s does not reach the container's reads.
        want = ReadThrottle(200 * MiB, 300, str(inner))
    else:
        (outer / "io.max").write_text("254:0 rbps=104857600 wbps=max riops=max wiops=max\n\n")
        (inner / "io.max").write_text("254:0 rbps=max wbps=max riops=300 wiops=max\n")
        mounts, own = _mountinfo(root, "cgroup2", "rw"), "0::/pod/container\n"
        want = ReadThrottle(100 * MiB, 300, str(outer))  # every level limits its subtree
    found = read_throttle(tmp_path, mounts, own)
    assert found == want
    assert read_throttle(tmp_path, mounts, "7:blkio:/\n0::/\n") is None  # the root: no limit


def test_a_throttle_binds_a_bound_near_its_rate_and_a_missing_file_has_none(
    tmp_path: Path,
) -> None:
    throttle = ReadThrottle(150 * MiB, None, "/x")
    assert throttle.words() == "reads throttled to 150 MiB/s (157 MB/s) by the cgroup /x"
    assert throttle.binds(150.0) and not throttle.binds(100.0)  # 0.9 × 157 MB/s
    assert ReadThrottle(None, 200, "/x").binds(1.0)  # IOPS alone: its byte rate is unknown
    assert read_throttle(tmp_path / "missing") is None  # never raises


def test_a_load_above_a_bound_read_through_a_throttle_blames_the_throttle() -> None:
    throttle = "reads throttled to 150 MiB/s (157 MB/s) by the cgroup /sys/fs/cgroup/blkio/x"
    storage = Ceiling("storage", 157.0, (157.0, 157.2), "sweep", True, throttle=throttle)
    above = Ceilings("m", (storage,)).efficiency(166.0, keeps=False)
    assert above is not None and above.above
    assert above.words() == (
        f"106% of the storage bound: above it, so the throttle on this disk ({throttle}) let "
        "it through faster than the plain reads that measured the bound: a throttle counts "
        "bytes by time slice, not as a disk serves them; not an efficiency"
    )


def test_a_throttled_bound_allows_the_slices_a_load_may_run_ahead_of_its_rate() -> None:
    """blk-throttle lets a group read up to the end of its current slice and keeps the last
    slice when it trims: a 2.16-s read through 150 MiB/s may run 0.2 s ahead (9.3 %), a load
    that did is within the bound's spread, one past that is not, and a longer read allows
    less."""
    throttle = ReadThrottle(150 * MiB, 200, "/x")
    slack = throttle.slack(157.3, 340_000_000)
    assert slack == pytest.approx(THROTTLE_AHEAD_S / (340_000_000 / 157.3e6))
    assert 0.092 < slack < 0.094
    assert throttle.slack(157.3, 1 << 30) < 0.03  # a 6.8-s read
    assert ReadThrottle(None, 200, "/x").slack(157.3, 340_000_000) == 0.0  # IOPS alone
    words = throttle.words()
    storage = Ceiling("storage", 157.3, (157.2, 157.3), "sweep", True, throttle=words, slack=slack)
    assert storage.spread == slack and storage.allowed == pytest.approx(1 + slack)
    bounds = Ceilings("m", (storage,))
    within = bounds.efficiency(157.3 * 1.08, keeps=False)
    assert within is not None and not within.above
    assert within.words() == (
        "108% of the storage bound, within its spread "
        "(±9%: a throttle lets a read run up to two slices (0.2 s) ahead of its rate)"
    )
    unthrottled = Ceiling("storage", 157.3, (150.0, 157.3, 163.0), "sweep", True)
    noisy = Ceilings("m", (unthrottled,)).efficiency(157.3 * 1.03, keeps=False)
    assert (
        noisy is not None and noisy.words() == "103% of the storage bound, within its spread (±4%)"
    )
    below = bounds.efficiency(157.3 * 0.97, keeps=False)
    assert below is not None and below.words() == "97% of the storage bound"
    beyond = bounds.efficiency(157.3 * 1.10, keeps=False)
    assert beyond is not None and beyond.above


MEASURE = """
import json, sys
from modelmon.core import measure_ceilings, open_model
from modelmon.core.system.io_throttle import read_throttle
found = read_throttle(sys.argv[1])
model = open_model(sys.argv[1])
storage = measure_ceilings(model, ("storage",), repeats=1, workers=1).get("storage")
print(json.dumps({"throttle": found.words() if found else None, "ceiling": storage.throttle,
                  "spec": storage.spec, "mbps": storage.mbps, "slack": storage.slack,
                  "bytes": model.file_bytes}))
"""


def test_a_storage_bound_measured_in_a_throttling_cgroup_names_the_throttle(
    loop_disk: Path,
) -> None:
    from benchmarks.envs import EnvUnavailable, throttled_disk
    from modelmon.core import write_safetensors_model

    # 20 MB read through 64 MiB/s (the loop disk holds 48 MiB): the throttle sets the rate.
    write_safetensors_model(loop_disk, layers=1, hidden=1024, intermediate=2048, vocab=1024, seed=1)
    model = next(loop_disk.glob("*.safetensors"))
    try:
        throttling = throttled_disk(loop_disk, read_bps=64 * MiB, read_iops=100_000)
        with throttling as throttle:
            done = subprocess.run(
                throttle.command([sys.executable, "-c", MEASURE, str(model)]),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
    except EnvUnavailable as why:
        pytest.skip(str(why))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    words = f"reads throttled to 64 MiB/s (67 MB/s) and 100000 IOPS by the cgroup {throttle.cgroup}"
    assert found["throttle"] == words and found["ceiling"] == words
    assert found["spec"].endswith(f"; {words}")
    read_s = found["bytes"] / (found["mbps"] * 1e6)  # about 0.3 s: two thirds of it are 2 slices
    assert found["slack"] == pytest.approx(THROTTLE_AHEAD_S / read_s)
