"""A device's readahead put back even when modelmon is killed with SIGKILL.

A run that changes a device's readahead puts it back on every way out it can see (the block's
end, signals, atexit), and writes a restore record first, which the next run applies. SIGKILL
leaves no way out: a guardian (``system.guardian``) started beside the run applies this user's
restore records once the run is gone (``readahead.recover``: only once no run uses the device,
only if the device still has the value the dead run set), so the device has its value back at
once rather than at the next run. After a normal end the run has already put the value back
and removed its records: the guardian finds nothing to do.
"""

from __future__ import annotations

from modelmon.core.system.guardian import Guardian

# Once the run is gone: apply the records named in argv, trying for a while (a dying run's
# workers may hold its device lock for a moment).
PROGRAM = """
import sys, time
from modelmon.core.system import readahead, readahead_records as records
deadline = time.monotonic() + float(sys.argv[1])
names = set(sys.argv[2:])
while names & set(records.names()) and time.monotonic() < deadline:
    readahead.recover()
    time.sleep(0.05)
"""
TRY_FOR_S = 10.0  # how long a guardian tries to take a dead run's device lock


def readahead_guardian(names: list[str]) -> Guardian:
    """The guardian of one run's readahead changes (their restore records' ``names``)."""
    return Guardian(PROGRAM, [str(TRY_FOR_S), *names])
