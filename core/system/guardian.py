"""A guardian: a small process that puts right what a run changed on the machine when the run
dies, SIGKILL included (a device's readahead, a memory cgroup).

A run puts its changes right on every way out it can see (the block's end, signals, atexit).
SIGKILL leaves it none, so beside the run a guardian is started holding the read end of a pipe
whose only write end the run holds: a signal made of what a dead process cannot hold, since the
kernel closes that end however the run ends. The guardian waits for the pipe's end, then runs
its program's repair, itself bounded in time. After a normal end the run has put things right
already and closes the pipe: the guardian finds nothing to do and ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

END_WAIT_S = 15.0  # how long a run's end waits for its guardian to find nothing to do
# The start of every guardian's program: wait for the pipe's end (stdin), whatever ends the run.
WAIT_FOR_THE_RUNS_END = """
import os
while os.read(0, 4096):
    pass
"""


class Guardian:
    """One run's guardian: ``program`` (Python, run with ``args`` as ``sys.argv[1:]``) once
    the run is gone."""

    def __init__(self, program: str, args: Sequence[str]) -> None:
        read_end, self._write_end = os.pipe()  # neither end is inherited by other children
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", WAIT_FOR_THE_RUNS_END + program, *args],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl+C of the terminal is the run's to handle
            )
        except BaseException:
            os.close(self._write_end)
            raise
        finally:
            os.close(read_end)

    @property
    def pid(self) -> int:
        return self._process.pid

    def release(self, wait_s: float = END_WAIT_S) -> None:
        """The run has put things right: the guardian finds nothing to do and ends (waited
        for ``wait_s``, then killed)."""
        os.close(self._write_end)
        try:
            self._process.wait(wait_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
