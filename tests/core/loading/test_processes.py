"""How a worker that ended early is described: its signal, and whether the OOM killer did it;
and how one is known to be ending before it can be reaped."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from modelmon.core.loading.processes import death_description, ending_code
from modelmon.core.system import oom
from modelmon.core.system.oom import oom_kills


def test_a_sigkill_is_put_down_to_the_oom_killer_only_when_it_killed_that_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel's own record names the process it killed: a kill -9 while another
    process anywhere ran out of memory is not called an OOM kill (the machine's count rose
    all the same)."""
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("pgfault 100\noom_kill 7\npgmajfault 3\n")
    assert oom_kills(str(vmstat)) == 7
    assert oom_kills(str(tmp_path / "none")) is None
    log = tmp_path / "kmsg"
    log.write_text(
        "6,100,5,-;oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/x,task=python,pid=4242,uid=0\n"
    )
    assert oom.logged_oom_kill(4242, str(log)) is True
    assert oom.logged_oom_kill(424, str(log)) is False
    assert oom.logged_oom_kill(4242, str(tmp_path / "unreadable")) is None
    monkeypatch.setattr(oom, "logged_oom_kill", lambda pid: pid == 4242)
    assert "OOM killer ended it" in death_description(-signal.SIGKILL, 0, 4242)
    # Another process's OOM kill on the machine: the count rose, this one was a kill -9.
    assert "not by the kernel's OOM killer" in death_description(-signal.SIGKILL, 0, 5151)
    monkeypatch.setattr(oom, "logged_oom_kill", lambda pid: None)  # the log unreadable
    monkeypatch.setattr(oom, "oom_kills", lambda: 8)
    assert "not by the kernel's OOM killer" in death_description(-signal.SIGKILL, 8, 5151)
    assert "cannot be read here" in death_description(-signal.SIGKILL, 7, 5151)
    # The run's own cgroup counted a kill: that one.
    assert "OOM killer ended it" in death_description(-signal.SIGKILL, 8, 5151, 1)
    assert death_description(-signal.SIGSEGV, 8) == "was killed by SIGSEGV"
    assert death_description(3, 8) == "exited with code 3 before finishing"


def test_how_a_process_ends_is_known_before_it_is_reaped() -> None:
    """``ending_code``: None while a child runs; once it is bound to end (killed, or exited
    and not yet waited for), how, as multiprocessing's exitcode says it."""
    sleeper = subprocess.Popen(["sleep", "60"])
    exits = subprocess.Popen(["sh", "-c", "exit 3"])
    try:
        assert ending_code(sleeper.pid) is None
        os.kill(sleeper.pid, signal.SIGKILL)
        for child, code in ((sleeper, -signal.SIGKILL), (exits, 3)):
            deadline = time.monotonic() + 10
            while ending_code(child.pid) is None and time.monotonic() < deadline:
                time.sleep(0.01)  # until the kernel has it ending
            assert ending_code(child.pid) == code
    finally:
        for child in (sleeper, exits):
            child.kill()
            child.wait()


REPORTER = """
import os

import numpy  # as a worker's modules import it, OpenBLAS with them


def report(task, conn, memory):
    threads = len(os.listdir("/proc/self/task"))
    conn.send((os.environ.get("OPENBLAS_NUM_THREADS"), threads, int(task.sum())))
    conn.close()
"""


def test_a_worker_starts_numpy_without_a_blas_thread_per_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's environment is set as it unpickles its target, before numpy is imported by
    the target's module or its arguments: no OpenBLAS threads spin beside the load."""
    import multiprocessing

    import numpy as np

    from modelmon.core.loading.processes import start_workers

    (tmp_path / "blas_reporter.py").write_text(REPORTER)
    monkeypatch.syspath_prepend(str(tmp_path))  # the spawn child gets this process's sys.path
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    from blas_reporter import report  # type: ignore[import-not-found]

    processes: list = []
    conns: dict = {}
    start_workers(
        multiprocessing.get_context("spawn"), [np.arange(4)], report, None, [], processes, conns
    )
    try:
        assert conns[0].poll(60), "the worker never reported"
        assert conns[0].recv() == ("1", 1, 6)
    finally:
        for process in processes:
            process.join(10)
        for conn in conns.values():
            conn.close()
    assert "OPENBLAS_NUM_THREADS" not in os.environ  # the parent's own is untouched
