"""How a headless run stops: a worker killed mid-load, a closed terminal (SIGHUP), a kill -9
of the command itself. The run says what happened in one line, no process is left, and a
readahead it changed is put back (after a kill -9, by the next run)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from modelmon.core import write_gguf_model, write_safetensors_model
from modelmon.core.system import locate_readahead

from .test_hostile import LOAD_FAILED, MODELMON, SLOW_LOAD, Running

HANGUP = 129
ONE_CHUNK = ("--chunk-mib", "0.00390625")  # 4 KiB reads: a load that lasts


def _until(condition: object, process: subprocess.Popen[str], timeout_s: float = 120) -> None:
    """Poll for a state another process brings about, failing if that process ends first."""
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.01)


def test_a_worker_killed_mid_load_fails_the_command_at_once(tmp_path: Path) -> None:
    """At once: on the death itself, not when the load ends. The other workers are frozen
    (SIGSTOP) before one is killed, so the load can never end by itself: a command that
    waited for it, or for the dead worker's result, would never end (``finish`` gives it
    60 s), and one that ends has seen the death, which it names."""
    model = write_safetensors_model(tmp_path, layers=2, hidden=1024, vocab=4096, dtype="F16")
    flags = ("-s", "sequential", "-w", "4", "--fadvise", "random", "--discard", *ONE_CHUNK)
    running = Running(model, "load", str(model), *flags, "--json")
    running.wait_until_reading()
    workers = sorted(running.workers, key=lambda p: p.pid)
    assert len(workers) == 4  # the command's workers, none other
    worker = workers[1]
    others = [p for p in workers if p is not worker]
    for other in others:
        other.send_signal(signal.SIGSTOP)
    worker.send_signal(signal.SIGKILL)
    out = running.finish(LOAD_FAILED, f"(pid {worker.pid}) was killed by SIGKILL")
    result = json.loads(out)
    assert result["status"] == "failed" and "SIGKILL" in result["error"]


@pytest.fixture
def slow_disk_model(loop_disk: Path) -> Path:
    return write_safetensors_model(loop_disk, layers=1, hidden=768, vocab=4096, dtype="F16")


def test_sighup_during_load_puts_the_readahead_back(slow_disk_model: Path) -> None:
    knob = locate_readahead(slow_disk_model)
    assert knob is not None
    before = knob.read_kb()
    target = before + 1024
    flags = ("--readahead", str(target), *SLOW_LOAD, *ONE_CHUNK)
    running = Running(slow_disk_model, "load", str(slow_disk_model), *flags)
    running.wait_until_reading()
    assert knob.read_kb() == target
    running.process.send_signal(signal.SIGHUP)  # the terminal closed
    running.finish(HANGUP, "cancelled")
    assert knob.read_kb() == before


def test_kill_9_puts_the_value_back_at_once_and_warns_of_nothing(slow_disk_model: Path) -> None:
    """SIGKILL leaves the run no way out: its guardian, whose pipe from the run the kernel
    closes, puts the device's value back without waiting for the next run."""
    knob = locate_readahead(slow_disk_model)
    assert knob is not None
    before = knob.read_kb()
    target = before + 2048
    flags = ("--readahead", str(target), *SLOW_LOAD, *ONE_CHUNK)
    running = Running(slow_disk_model, "load", str(slow_disk_model), *flags)
    running.wait_until_reading()
    assert knob.read_kb() == target
    # This run's guardians: another run's on this machine (another test's) is not one.
    guardians = [
        p for p in running.parent.children() if "modelmon.core.system" in " ".join(p.cmdline())
    ]
    assert guardians, "the run changed the readahead with no guardian"
    running.process.kill()
    _, err = running.process.communicate(timeout=60)  # stderr ends with its last holder
    # No resource tracker left to warn of semaphores a killed run leaked: it had none.
    assert "leaked" not in err and "resource_tracker" not in err, err
    _, alive = psutil.wait_procs(running.workers, timeout=5)
    assert not alive, f"orphaned workers: {alive}"
    deadline = time.monotonic() + 30
    while knob.read_kb() != before and time.monotonic() < deadline:
        time.sleep(0.05)  # the guardian's work, in another process: polled
    assert knob.read_kb() == before
    _, alive = psutil.wait_procs(guardians, timeout=15)
    assert not alive, f"a guardian outlived its work: {alive}"
    done = subprocess.run(
        [*MODELMON, "load", str(slow_disk_model), "--cache", "keep", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    notes = json.loads(done.stdout)["notes"]
    assert not any("restored readahead" in note for note in notes), notes


def test_sighup_during_recommends_readahead_round_puts_it_back(
    loop_disk: Path, tmp_path: Path
) -> None:
    """The search tries readahead values once the grid's first ways of loading have run: with
    a budget no busy machine exhausts before it gets there (the signal ends it at once). A
    GGUF model has no peer loaders to measure before them, so they come a few seconds in."""
    model = write_gguf_model(loop_disk / "m.gguf", layers=1, hidden=768, vocab=4096)
    knob = locate_readahead(model)
    assert knob is not None
    before = knob.read_kb()
    search = subprocess.Popen(
        [*MODELMON, "recommend", str(model), "--budget", "600"],
        cwd=tmp_path,  # where a search that ends before the signal writes its modelmon.toml
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # A readahead candidate runs (or the search ends without one, failing here).
        _until(lambda: knob.read_kb() != before, search, timeout_s=400)
        search.send_signal(signal.SIGHUP)
        _, err = search.communicate(timeout=30)
    finally:
        if search.poll() is None:
            search.kill()
            search.communicate()
    assert search.returncode == HANGUP, err
    assert err.strip().splitlines()[-1] == "modelmon: cancelled", err
    assert knob.read_kb() == before
