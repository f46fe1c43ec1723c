"""benchmarks/knobs.py on a loop device of the test's own, throttled: the readahead pair and
stream against sequential are measured, and the device's value is the same before and after,
also when a load is killed mid-way (kill -9, after it set the value)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from benchmarks import knobs
from benchmarks.envs import throttle_unavailable
from modelmon.core import write_safetensors_model
from modelmon.core.system import locate_readahead

SET_WITHIN_S = 60.0  # the child parses, spawns its workers and sets the value within this


def test_knobs_bench_puts_the_device_back_even_after_a_kill(
    loop_disk: Path, own_state: Path
) -> None:
    reason = throttle_unavailable(loop_disk)
    if reason:
        pytest.skip(reason)
    # 1.6 MB: 0.4 s a load at the throttle's 4 MiB/s, forty polls (every 10 ms) for a load
    # to be caught with the value set; a larger model only makes every run longer.
    model = write_safetensors_model(loop_disk / "model", layers=2, hidden=128, vocab=1024)
    knob = locate_readahead(model)
    assert knob is not None
    before = knob.read_kb()
    killed: list[int] = []

    def kill_the_first_raised(child: subprocess.Popen[str]) -> None:
        if killed or "4096" not in child.args:
            return
        deadline = time.monotonic() + SET_WITHIN_S
        while knob.read_kb() != 4096:  # wait for the state: the child has set the value
            if child.poll() is not None or time.monotonic() > deadline:
                return
            time.sleep(0.01)
        child.kill()
        killed.append(child.pid)

    results = knobs.run(
        model,
        loop_disk,
        repeats=1,
        read_bps=4 << 20,
        read_iops=50,
        fuse=False,
        on_start=kill_the_first_raised,
    )
    assert killed, "no load was caught with the value set"
    section = results.readahead
    assert section.before_kb == before == section.after_kb == knob.read_kb()
    rows = {(r.strategy, r.readahead_kb): r for r in section.table}
    assert set(rows) == {(s, kb) for s in ("mmap", "sequential") for kb in (128, 4096)}
    assert sum(len(r.failed) for r in rows.values()) == 1  # the one killed
    assert all(r.runs == 1 for r in rows.values() if not r.failed)
    stream = {r.strategy: r for r in results.stream_hdd.rows}
    first_block = stream["stream"].median_first_block_s
    assert stream["stream"].runs == 1 and first_block is not None and first_block > 0
    text = knobs.markdown(results)
    assert "### Readahead 128 KiB against 4 MiB (throttled disk)" in text
    assert f"{before} KiB before the runs, {before} KiB after (the same)" in text
