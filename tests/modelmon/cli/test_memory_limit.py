"""``--memory-limit`` on the command line: the run happens in a memory cgroup of that size,
reported in the JSON, and the cgroup is gone afterwards however modelmon ends (a SIGKILLed
one's by its guardian, at once). Root and cgroup v1 here; skipped with the reason elsewhere."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from modelmon.core.system import evict, residency_of

from ...core.loading.sparse import sparse_model
from ...core.system.test_memory_cgroup import REAL
from ...memory_cgroup import run_cgroups_of

MiB = 1 << 20
MODELMON = [sys.executable, "-m", "modelmon"]
LIMIT_KEYS = {
    "limit_bytes",
    "peak_bytes",
    "anon_peak_bytes",
    "cache_peak_bytes",
    "reread_bytes",
    "oom_killed",
    "cgroup",
}
# A load slow enough to be caught reading: one reader of 4 KiB without readahead.
SLOW_LOAD = ("-s", "pread", "-w", "1", "-t", "1", "--fadvise", "random", "--discard")
SLOW_CHUNK = ("--chunk-mib", "0.00390625")


def modelmon(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MODELMON, *args], capture_output=True, text=True, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """256 MiB to stream under 128 MiB: the 2.2 GB model under 1 GiB, made small."""
    return sparse_model(tmp_path_factory.mktemp("streamed"), tensors=8, tensor_bytes=32 * MiB)


@REAL
def test_load_json_carries_the_cgroups_peak_under_its_limit(streamed: Path) -> None:
    done = modelmon("load", str(streamed), "--discard", "--memory-limit", "128Mi", "--json")
    assert done.returncode == 0, done.stderr
    limited = json.loads(done.stdout)["memory_limit"]
    assert set(limited) >= LIMIT_KEYS
    assert limited["limit_bytes"] == 128 * MiB
    assert 0 < limited["peak_bytes"] <= 128 * MiB
    assert limited["oom_killed"] is False
    assert not Path(limited["cgroup"]).exists()


@REAL
def test_load_text_says_the_limit_and_a_copy_too_large_is_refused_in_one_line(
    streamed: Path,
) -> None:
    done = modelmon("load", str(streamed), "--discard", "--memory-limit", "128Mi")
    assert done.returncode == 0, done.stderr
    assert "limit     memory limit 128 MiB" in done.stdout
    refused = modelmon("load", str(streamed), "--memory-limit", "128Mi")
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines() == [
        "modelmon: loading 0.2 GiB would not fit in the memory limit of 128 MiB; turn discard "
        "on to measure it streaming through bounded buffers, keeping nothing"
    ]


def test_a_limit_below_a_mib_is_a_usage_error(streamed: Path) -> None:
    done = modelmon("load", str(streamed), "--memory-limit", "512")
    assert done.returncode == 2 and "--memory-limit" in done.stderr


def _members(cgroup: Path) -> list[int]:
    """The processes in ``cgroup``; none once it is removed (between a walk and this read)."""
    try:
        return [int(pid) for pid in cgroup.joinpath("cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


class Loading:
    """``modelmon load --memory-limit`` caught reading: its workers in its cgroup and the model
    arriving in the page cache (states, not times)."""

    def __init__(self, model: Path) -> None:
        evict([str(model)])
        self.model = str(model)
        args = [*MODELMON, "load", self.model, *SLOW_LOAD, *SLOW_CHUNK, "--memory-limit", "64Mi"]
        self.process = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.workers: list[psutil.Process] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The CLI first makes and removes a cgroup to learn that one can be made: the run's
            # own is the one with processes in it.
            for cgroup in run_cgroups_of(self.process.pid):
                pids = _members(cgroup)
                if pids and residency_of([self.model]) > 0.01:
                    self.cgroup = cgroup
                    self.workers = [psutil.Process(pid) for pid in pids]
                    return
            assert self.process.poll() is None, self.process.communicate()
            time.sleep(0.02)
        raise AssertionError("the load never ran in its cgroup")


@REAL
@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_cgroup_goes_when_the_load_is_stopped(
    streamed: Path, number: signal.Signals, code: int
) -> None:
    loading = Loading(streamed)
    loading.process.send_signal(number)
    _, err = loading.process.communicate(timeout=60)
    assert loading.process.returncode == code, err
    assert not loading.cgroup.exists()


@REAL
def test_a_sigkilled_runs_cgroup_goes_at_once_and_nothing_is_left(streamed: Path) -> None:
    """SIGKILL leaves the run no way out: its guardian, whose pipe from the run the kernel
    closes, removes the cgroup once the workers that die with the run are gone, then ends."""
    loading = Loading(streamed)
    guardians = [
        p
        for p in psutil.process_iter(["cmdline"])
        if str(loading.cgroup) in (p.info["cmdline"] or ())
    ]
    assert len(guardians) == 1, guardians  # started with the cgroup, before the workers
    loading.process.kill()
    loading.process.communicate(timeout=60)
    _, alive = psutil.wait_procs(loading.workers, timeout=30)  # they end with their parent
    assert not alive, f"orphaned workers: {alive}"
    deadline = time.monotonic() + 30
    while loading.cgroup.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # the guardian's work, in another process: polled
    assert not loading.cgroup.exists()
    _, alive = psutil.wait_procs(guardians, timeout=15)
    assert not alive, f"a guardian outlived its work: {alive}"
    assert run_cgroups_of(loading.process.pid) == []


# --- watch --memory-limit -------------------------------------------------------------------

# Keeps the shard a moment, as a server does (the split is sampled; the kernel keeps the peak).
KEEP = (
    "import sys, time\nwith open(sys.argv[1], 'rb') as f:\n    data = f.read()\n"
    "time.sleep(0.5)\nprint(len(data))\n"
)
SLEEP_HOLDING = (
    "import pathlib, sys, time\nwith open(sys.argv[1], 'rb') as f:\n    data = f.read()\n"
    "pathlib.Path(sys.argv[2]).touch()\ntime.sleep(60)\n"
)


@pytest.fixture(scope="module")
def shard(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 64 MiB shard: the 1.1 GB one under 1500 MiB, made small (and kept whole under 32)."""
    return sparse_model(tmp_path_factory.mktemp("shard"), tensors=4, tensor_bytes=16 * MiB)


@REAL
def test_watch_names_the_oom_kill_of_a_program_keeping_more_than_the_limit(shard: Path) -> None:
    done = modelmon(
        "watch", "--json", "--memory-limit", "48Mi", "--", sys.executable, "-c", KEEP, str(shard)
    )
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "the kernel's OOM killer ended it at the memory limit of 48 MiB" in lines[-1]
    data = json.loads(done.stdout)
    limited = data["memory_limit"]
    assert set(limited) >= LIMIT_KEYS
    assert limited["oom_killed"] is True and 0 < limited["peak_bytes"] <= 48 * MiB
    assert "oom-killed" in [f["code"] for f in data["findings"]]
    assert [victim["pid"] for victim in data["oom_victims"]] == [data["pid"]]
    assert not Path(limited["cgroup"]).exists()


# Reads the model, starts a child that takes far more than the limit, and exits 3 itself.
HOGGING_LAUNCHER = (
    "import subprocess, sys; open(sys.argv[1], 'rb').read(); "
    "subprocess.run([sys.executable, '-c', 'x = bytearray(300 << 20); x[::4096] = b\"1\" * "
    "len(x[::4096])']); sys.exit(3)"
)


@REAL
def test_watch_names_the_process_the_oom_killer_ended_not_the_command(shard: Path) -> None:
    """The OOM killer ends a child, and the command exits on its own: its exit is its own,
    and the child is the one named (the kernel's log says which it killed)."""
    done = modelmon(
        "watch",
        "--json",
        "--memory-limit",
        "128Mi",
        "--",
        sys.executable,
        "-c",
        HOGGING_LAUNCHER,
        str(shard),
    )
    assert done.returncode == 5, done.stderr
    data = json.loads(done.stdout)
    victims = [victim["pid"] for victim in data["oom_victims"]]
    assert victims and data["pid"] not in victims, data["oom_victims"]
    last = done.stderr.strip().splitlines()[-1]
    assert " exited with 3; the kernel's OOM killer ended pid " in last, last
    assert "of its tree at the memory limit of 128 MiB" in last


@REAL
def test_watch_reports_the_peak_and_split_of_a_program_that_fits(shard: Path) -> None:
    done = modelmon(
        "watch", "--json", "--memory-limit", "256Mi", "--", sys.executable, "-c", KEEP, str(shard)
    )
    assert done.returncode == 0, done.stderr
    limited = json.loads(done.stdout)["memory_limit"]
    assert limited["oom_killed"] is False
    assert limited["anon_peak_bytes"] >= 64 * MiB  # the shard it kept
    assert limited["peak_bytes"] <= 256 * MiB
    assert not Path(limited["cgroup"]).exists()
    words = modelmon(
        "watch", "--memory-limit", "256Mi", "--", sys.executable, "-c", KEEP, str(shard)
    )
    assert "limit:    memory limit 256 MiB" in words.stdout


@REAL
def test_watch_memory_limit_is_for_a_command_not_an_attached_pid() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        done = modelmon("watch", "--pid", str(sleeper.pid), "--memory-limit", "1Gi")
    finally:
        sleeper.kill()
        sleeper.wait()
    assert done.returncode == 2
    assert "--memory-limit applies to a command modelmon starts" in done.stderr


@REAL
@pytest.mark.parametrize("how", ["sigterm", "sigkill"])
def test_a_watchs_cgroup_goes_with_it_however_it_ends(
    shard: Path, tmp_path: Path, how: str
) -> None:
    marker = tmp_path / "loaded"
    script = [sys.executable, "-c", SLEEP_HOLDING, str(shard), str(marker)]
    watch = subprocess.Popen(
        [*MODELMON, "watch", "--memory-limit", "256Mi", "--", *script],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        assert watch.poll() is None, watch.communicate()
        time.sleep(0.02)
    (cgroup,) = run_cgroups_of(watch.pid)
    command = [psutil.Process(int(pid)) for pid in (cgroup / "cgroup.procs").read_text().split()]
    assert command, "the command is not in the cgroup"
    if how == "sigterm":
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=60)
        assert watch.returncode == 143, err
        assert not cgroup.exists()
        return
    watch.kill()
    watch.communicate(timeout=60)
    _, alive = psutil.wait_procs(command, timeout=30)  # its parent-death signal ends it
    assert not alive
    deadline = time.monotonic() + 30
    while cgroup.exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # its guardian removes it once the command is gone: polled
    assert not cgroup.exists()


def test_inspect_says_which_ways_of_loading_fit_the_limit(shard: Path) -> None:
    done = modelmon("inspect", str(shard), "--memory-limit", "96Mi")
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if "of 96 MiB" in line]
    assert lines[0].startswith("limit     copy       does NOT fit: the arrays")
    assert "streamed   fits" in lines[-1]
    data = json.loads(modelmon("inspect", str(shard), "--memory-limit", "1Gi", "--json").stdout)
    assert data["memory_limit"]["limit_bytes"] == 1 << 30
    assert all(way["fits"] for way in data["memory_limit"]["ways"])


@REAL
def test_bench_runs_each_side_under_the_limit(shard: Path) -> None:
    done = modelmon(
        "bench",
        str(shard),
        "--a",
        "sequential --discard",
        "--b",
        "pread --discard",
        "-n",
        "1",
        "--memory-limit",
        "256Mi",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [run["side"] for run in runs] == ["A", "B"]
    for run in runs:
        limited = run["memory_limit"]
        assert limited["limit_bytes"] == 256 * MiB and 0 < limited["peak_bytes"] <= 256 * MiB
        assert not Path(limited["cgroup"]).exists()


@REAL
def test_a_program_side_oom_killed_under_the_limit_is_named_so(shard: Path, tmp_path: Path) -> None:
    keep = tmp_path / "keep.py"
    keep.write_text(KEEP)
    done = modelmon(
        "bench",
        str(shard),
        "--a",
        f"cmd: {sys.executable} {keep} {{path}}",
        "--b",
        "sequential --discard",
        "-n",
        "1",
        "--memory-limit",
        "48Mi",
    )
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()[-1:]
    assert "the kernel's OOM killer ended it at the memory limit of 48 MiB" in line


def test_inside_a_container_its_own_limit_is_the_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import modelmon.core.system
    from modelmon.cli.flags import say_memory_limit

    class Facts:
        cgroup_limit: int | None = 16 << 30

    monkeypatch.setattr(modelmon.core.system, "memory_facts", Facts)
    monkeypatch.setattr(modelmon.core.system, "memory_limit_unavailable", lambda limit: None)
    assert say_memory_limit(None) == 16 << 30  # measured under the container's own limit
    assert say_memory_limit(1 << 30) == 1 << 30
    Facts.cgroup_limit = None
    assert say_memory_limit(None) is None  # no container limit: none
    line = "cannot run under a memory limit here (not root): planning with 1 GiB only"
    monkeypatch.setattr(modelmon.core.system, "memory_limit_unavailable", lambda limit: line)
    Facts.cgroup_limit = 16 << 30
    assert say_memory_limit(None) is None  # as today: the limit applies, planned with
    assert capsys.readouterr().err == ""
    assert say_memory_limit(1 << 30) == 1 << 30
    assert capsys.readouterr().err == f"modelmon: {line}\n"  # one line


@REAL
def test_watch_samples_the_cgroups_split_beside_the_limit(shard: Path) -> None:
    args = ("--json", "--samples", "--interval-ms", "20", "--memory-limit", "256Mi")
    done = modelmon("watch", *args, "--", sys.executable, "-c", KEEP, str(shard))
    assert done.returncode == 0, done.stderr
    series = json.loads(done.stdout)["samples"]["series"]
    assert {v for v in series["limit_bytes"]["v"] if v is not None} == {256 * MiB}
    anon = [v for v in series["cgroup_anon_bytes"]["v"] if v is not None]
    assert max(anon) >= 64 * MiB  # the shard it kept, under the limit
