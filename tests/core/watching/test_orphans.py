"""The orphans module on its own: the subreaper a watch holds, the processes it may adopt and
reap, and the parent-death signal of a started command."""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from modelmon.core.watching.orphans import (
    PR_SET_CHILD_SUBREAPER,
    end_with_parent,
    hold_subreaper,
    is_subreaper,
    own_children,
    reap,
    release_subreaper,
)

from ...leaks import process_state

LIBC = ctypes.CDLL(None, use_errno=True)


def _set_subreaper(on: bool) -> None:
    assert LIBC.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def test_holds_nest_and_the_last_release_puts_the_process_back() -> None:
    assert not is_subreaper()
    assert hold_subreaper() and hold_subreaper()
    release_subreaper()
    assert is_subreaper(), "released while another watch still holds it"
    release_subreaper()
    assert not is_subreaper()


def test_a_process_that_was_a_subreaper_stays_one() -> None:
    """A supervisor embedding modelmon (a subreaper of its own) keeps being one after a watch."""
    _set_subreaper(True)
    try:
        assert hold_subreaper()
        release_subreaper()
        assert is_subreaper()
    finally:
        _set_subreaper(False)


# Forks a grandchild that outlives its parent, prints the grandchild's pid and exits.
ORPHAN_MAKER = """
import os, sys, time
child = os.fork()
if child == 0:
    time.sleep(float(sys.argv[1]))
    os._exit(0)
print(child, flush=True)
"""


def test_an_orphan_comes_to_the_holder_and_is_reaped_once_it_ends() -> None:
    assert hold_subreaper()
    try:
        done = subprocess.run(
            [sys.executable, "-c", ORPHAN_MAKER, "0.2"], capture_output=True, text=True, check=True
        )
        orphan = int(done.stdout)
        with open(f"/proc/{orphan}/stat") as f:
            parent = int(f.read().rpartition(")")[2].split()[1])
        assert parent == os.getpid(), "the orphan went elsewhere than the subreaper"
        assert orphan not in own_children()
        deadline = time.monotonic() + 30
        while not reap([orphan]):
            assert time.monotonic() < deadline, "the orphan never ended"
            time.sleep(0.02)
        assert not Path(f"/proc/{orphan}").exists()
    finally:
        release_subreaper()


def _sleep() -> None:
    time.sleep(60)


def test_own_children_are_the_multiprocessing_ones() -> None:
    process = multiprocessing.get_context("spawn").Process(target=_sleep)
    process.start()
    try:
        assert process.pid in own_children()
    finally:
        process.kill()
        process.join()


def test_reap_leaves_children_that_still_run() -> None:
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        assert reap([sleeper.pid]) == []
    finally:
        sleeper.kill()
        sleeper.wait()


# Starts `sleep` with end_with_parent(its own pid), prints sleep's pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
from modelmon.core.watching.orphans import end_with_parent
import os
child = subprocess.Popen(["sleep", "60"], preexec_fn=end_with_parent(os.getpid()))
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_started_command_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.stdout.close()
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while process_state(child) not in ("Z", "gone"):  # ended: reaped, or waiting for init
        assert time.monotonic() < deadline, "the command outlived its killed parent"
        time.sleep(0.02)


def test_a_command_whose_parent_is_gone_before_the_prctl_exits() -> None:
    """The check after the prctl: started for a parent that is not its parent (one that died
    and left it to init), it ends instead of running on with no one to stop it."""
    done = subprocess.run(["sleep", "30"], preexec_fn=end_with_parent(1), timeout=30)
    assert done.returncode == 1
