"""Runs in worker processes: honest cache state, results, cancel, crashed workers."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from modelmon.core.errors import LoadError
from modelmon.core.loading.messages import ReadBatch, WorkerReady
from modelmon.core.loading.runner import LoadRun, run_load
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions

from ..system.test_memory_cgroup import plan_only

KCMP_FILE = 0
SYS_KCMP = 312  # x86_64


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~120 MB: cold 4 KiB reads take over a second to get through."""
    folder = tmp_path_factory.mktemp("big")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096, dtype="F16")


def test_cold_run_starts_verified_cold(sharded_model: Path) -> None:
    result = run_load(sharded_model, "sequential", LoadOptions(workers=2, cache="cold"))
    assert result.status == "ok"
    assert result.cache.requested == "cold" and result.cache.cold
    assert result.cache.resident_before <= 0.01
    assert result.cache.resident_after >= 0.99  # the load itself brought it all in
    model = open_model(sharded_model)
    assert result.bytes == model.total_bytes and result.seconds > 0 and result.mbps > 0
    assert {b.name for b in result.blocks} == set(model.blocks())
    assert sum(b.bytes for b in result.blocks) == model.total_bytes
    assert all(0 <= b.start <= b.end <= result.seconds + 1e-3 for b in result.blocks)
    assert sorted(w.id for w in result.workers) == [0, 1]
    assert sum(w.bytes for w in result.workers) == model.total_bytes


def test_warm_run_starts_verified_warm(sharded_model: Path) -> None:
    result = run_load(sharded_model, "mmap", LoadOptions(cache="warm"))
    assert result.cache.warm and result.cache.resident_before >= 0.99 and not result.cache.cold


def test_result_json_has_the_documented_fields(sharded_model: Path) -> None:
    data = run_load(sharded_model, "pread", LoadOptions(verify=True)).to_dict()
    for key in (
        "strategy",
        "options",
        "files",
        "bytes",
        "seconds",
        "mbps",
        "cache",
        "checksum",
        "blocks",
        "workers",
    ):
        assert key in data
    assert set(data["cache"]) >= {"requested", "resident_before", "resident_after"}
    assert set(data["blocks"][0]) >= {"name", "bytes", "seconds"}
    assert set(data["workers"][0]) >= {"id", "bytes", "seconds"}


def test_refuses_a_load_that_does_not_fit(
    sharded_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(LoadError, match="discard"):
        LoadRun(sharded_model, "sequential", LoadOptions(), memory_limit=1000).run()

    # Streaming needs no room for the model, as planned (a real cgroup of 1000 bytes would
    # hold no worker at all: tests/core/loading/test_memory_limit.py runs under real ones).
    plan_only(monkeypatch)
    run = LoadRun(sharded_model, "sequential", LoadOptions(discard=True), memory_limit=1000)
    assert run.run().status == "ok"


def freeze(pids: Iterable[int]) -> None:
    """Stop ``pids`` (SIGSTOP) where they are: a load whose workers are frozen never ends by
    itself, so a run that ends has taken the way out under test."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)


def test_cancel_mid_load_stops_every_worker_fast(big_model: Path) -> None:
    """Fast: on the cancel, not when the load ends. Both workers are frozen as it is asked:
    a run that waited for them never ends (the suite's timeout fails it)."""
    cancelled: list[bool] = []

    def on_message(message: object) -> None:
        if isinstance(message, ReadBatch) and not cancelled:
            cancelled.append(True)
            freeze(run.worker_pids().values())
            run.cancel()

    options = LoadOptions(workers=2, chunk=4096, discard=True, cache="cold")
    run = LoadRun(big_model, "pread", options, on_message=on_message)
    result = run.run()
    assert result.status == "cancelled" and result.error == "cancelled"
    # The leak fixture proves no worker process is left, frozen ones included.


def test_killed_worker_fails_the_run_naming_it(big_model: Path) -> None:
    """On the death, not when the load ends: worker 0 is frozen as worker 1 is killed."""
    killed: list[bool] = []

    def on_message(message: object) -> None:
        if isinstance(message, ReadBatch) and not killed:
            killed.append(True)
            freeze([run.ready[0].pid])
            os.kill(run.ready[1].pid, signal.SIGKILL)

    options = LoadOptions(workers=2, chunk=4096, discard=True, cache="cold")
    run = LoadRun(big_model, "sequential", options, on_message=on_message)
    result = run.run()
    assert result.status == "failed"
    assert "worker 1" in (result.error or "") and "SIGKILL" in (result.error or "")


def _fds_of(pid: int, path: str) -> list[int]:
    found = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == path:
                found.append(int(name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="kcmp syscall number is x86_64's")
@pytest.mark.parametrize(("strategy", "shared"), [("mmap-shared-fd", True), ("mmap", False)])
def test_shared_fd_workers_share_one_open_file_description(
    big_model: Path, strategy: str, shared: bool
) -> None:
    """kcmp(KCMP_FILE) says whether two processes' descriptors are the same open file."""
    libc = ctypes.CDLL(None, use_errno=True)
    path = os.path.realpath(open_model(big_model).files[0].path)
    verdicts: list[bool] = []

    def on_message(message: object) -> None:
        if isinstance(message, ReadBatch) and not verdicts:
            first, second = run.ready[0].pid, run.ready[1].pid
            pairs = [(a, b) for a in _fds_of(first, path) for b in _fds_of(second, path)]
            verdicts.append(
                any(libc.syscall(SYS_KCMP, first, second, KCMP_FILE, a, b) == 0 for a, b in pairs)
            )

    # madvise random on a cold file: 4 KiB page faults, seconds of work, so both workers are
    # still mid-load (descriptors open) when the first batch of reads arrives.
    options = LoadOptions(workers=2, chunk=64 << 10, madvise="random", discard=True, cache="cold")
    run = LoadRun(big_model, strategy, options, on_message=on_message, time_limit_s=5)
    run.run()
    assert verdicts == [shared]


def test_workers_import_no_qt(sharded_model: Path) -> None:
    readies: list[WorkerReady] = []
    run = LoadRun(
        sharded_model,
        "sequential",
        LoadOptions(workers=2),
        on_message=lambda m: readies.append(m) if isinstance(m, WorkerReady) else None,
    )
    run.run()
    assert len(readies) == 2 and all(r.qt_free for r in readies)


def test_changed_file_is_refused_by_workers(tmp_path: Path) -> None:
    path = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=64)
    run = LoadRun(path, "pread", LoadOptions())
    write_safetensors_model(tmp_path, layers=2, hidden=64, vocab=64)  # replaced after planning
    result = run.run()
    assert result.status == "failed" and "changed" in (result.error or "")


def test_file_truncated_during_an_mmap_load_fails_clearly(tmp_path: Path) -> None:
    """SIGBUS in a worker (mapped page gone) ends the run as failed; the parent lives on."""
    path = write_safetensors_model(tmp_path, layers=4, hidden=1024, vocab=4096)
    truncated: list[bool] = []

    def on_message(message: object) -> None:
        if isinstance(message, ReadBatch) and not truncated:
            truncated.append(True)
            os.truncate(path, 4096)

    options = LoadOptions(workers=2, chunk=64 << 10, discard=True, cache="cold")
    for strategy in ("mmap", "pread"):
        truncated.clear()
        write_safetensors_model(tmp_path, layers=4, hidden=1024, vocab=4096)
        result = LoadRun(path, strategy, options, on_message=on_message).run()
        assert result.status == "failed", strategy
        assert ("SIGBUS" in (result.error or "")) or ("truncated" in (result.error or ""))


def test_workers_never_rerun_the_parents_main_script(sharded_model: Path, tmp_path: Path) -> None:
    """A script that imports Qt at its top must not drag Qt into the workers."""
    script = tmp_path / "app_like.py"
    script.write_text(
        "import sys\n"
        "import PySide6.QtCore  # noqa: F401  (a GUI app's top-level import)\n"
        "from modelmon.core.options import LoadOptions\n"
        "from modelmon.core.loading.messages import WorkerReady\n"
        "from modelmon.core.loading.runner import LoadRun\n"
        "readies = []\n"
        "if __name__ == '__main__':\n"
        "    run = LoadRun(sys.argv[1], 'sequential', LoadOptions(workers=2),\n"
        "                  on_message=lambda m: readies.append(m)\n"
        "                  if isinstance(m, WorkerReady) else None)\n"
        "    print(run.run().status, all(r.qt_free for r in readies), len(readies))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script), str(sharded_model)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.split() == ["ok", "True", "2"], done.stderr[-1500:]


def test_worker_peak_rss_is_its_own_not_the_parents(sharded_model: Path) -> None:
    """ru_maxrss survives fork+exec; a worker must report its own peak (VmHWM)."""
    ballast = bytearray(600 << 20)  # make the parent's peak far larger than a worker's
    ballast[::4096] = b"x" * len(ballast[::4096])
    result = run_load(sharded_model, "sequential", LoadOptions(workers=2, discard=True))
    del ballast
    assert result.status == "ok"
    assert all(0 < w.peak_rss < 300 << 20 for w in result.workers), [
        w.peak_rss for w in result.workers
    ]


def test_time_limit_stops_a_slow_load(big_model: Path) -> None:
    """Its workers frozen at their first reads, the load can only end by its limit: the run
    ends (the suite's timeout fails one that waits), timed out, and says so."""
    frozen: list[bool] = []

    def on_message(message: object) -> None:
        if isinstance(message, ReadBatch) and not frozen:
            frozen.append(True)
            freeze(run.worker_pids().values())

    options = LoadOptions(workers=2, chunk=4096, fadvise="random", discard=True, cache="cold")
    run = LoadRun(big_model, "pread", options, time_limit_s=0.3, on_message=on_message)
    result = run.run()
    assert frozen and run.timed_out and result.status == "cancelled"
    assert "time limit" in (result.error or "")
