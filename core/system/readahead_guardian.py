"""A device's readahead put back even when modelmon is killed with SIGKILL.

A run that changes a device's readahead puts it back on every way out it can see (the block's
end, signals, atexit), and writes a restore record first, which the next run applies. SIGKILL
leaves no way out: the guardian is a small process started beside the run, holding the read
end of a pipe whose only write end the run holds. The kernel closes that end whatever ends the
run; the guardian then applies this user's restore records (``readahead.recover``: only once
no run uses the device, only if the device still has the value the dead run set), so the
device has its value back at once rather than at the next run. After a normal end the run has
already put the value back and removed its records: the guardian finds nothing to do.
"""

from __future__ import annotations

import os
import subprocess
import sys

# The guardian's program: wait for the pipe's end, then apply the records named in argv,
# trying for a while (a dying run's workers may hold its device lock for a moment).
PROGRAM = """
import os, sys, time
while os.read(0, 4096):
    pass
from modelmon.core.system import readahead, readahead_records as records
deadline = time.monotonic() + float(sys.argv[1])
names = set(sys.argv[2:])
while names & set(records.names()) and time.monotonic() < deadline:
    readahead.recover()
    time.sleep(0.05)
"""
TRY_FOR_S = 10.0  # how long a guardian tries to take a dead run's device lock
END_WAIT_S = 15.0  # how long a run's end waits for its guardian to find nothing to do


class Guardian:
    """The guardian of one run's readahead changes (their restore records' ``names``)."""

    def __init__(self, names: list[str]) -> None:
        read_end, self._write_end = os.pipe()  # neither end is inherited by other children
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", PROGRAM, str(TRY_FOR_S), *names],
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

    def release(self) -> None:
        """The run has put its values back: the guardian finds nothing and ends."""
        os.close(self._write_end)
        try:
            self._process.wait(END_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
