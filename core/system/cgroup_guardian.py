"""A run's memory cgroup removed when modelmon dies without removing it (SIGKILL): at once by
its guardian, else by the next run made beside it.

The run removes its cgroup on every way out it sees (``memory_cgroup``); SIGKILL leaves it
none. So when a run's cgroup is made, a guardian (``system.guardian``) is started beside the
run; once the run is gone, it removes that cgroup as soon as the processes in it are gone: a
load's workers die with their parent (PR_SET_PDEATHSIG, SIGKILL), a watched command gets
SIGTERM (and may take a moment). It tries for ``TRY_FOR_S``; a cgroup still in use then is
left to the next run that makes one beside it (``remove_stale``). It removes only
the one cgroup its run made, named by the run (and rmdir removes no cgroup that has processes
or cgroups in it). After a normal end the run has removed it: the guardian finds nothing.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from modelmon.core.system.guardian import Guardian

_NAME = re.compile(r"^modelmon-(\d+)-(\d+)-\d+$")  # modelmon-PID-START-N
# /proc/PID/stat after "(comm)": the start time in clock ticks (field 22).
STAT_START = 19
# Once the run is gone: remove the cgroup in argv once nothing runs in it, trying for a while.
PROGRAM = """
import os, sys, time
deadline = time.monotonic() + float(sys.argv[1])
while True:
    try:
        os.rmdir(sys.argv[2])
        break
    except FileNotFoundError:
        break
    except OSError:
        if time.monotonic() >= deadline:
            break
        time.sleep(0.05)
"""
# Longer than a killed load's workers take to end and give back even a large model's arrays,
# and a watched command to end on SIGTERM.
TRY_FOR_S = 30.0


def cgroup_guardian(directory: Path) -> Guardian:
    """The guardian of ``directory``, a run cgroup this process made (``modelmon-PID-...``
    with its own pid: ValueError for any other)."""
    if not directory.name.startswith(f"modelmon-{os.getpid()}-"):
        raise ValueError(f"{directory} is not a cgroup of this process's")
    return Guardian(PROGRAM, [str(TRY_FOR_S), str(directory)])


def start_ticks(pid: int) -> int | None:
    """Process ``pid``'s start time (clock ticks after boot); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        return int(data[data.rindex(b")") + 2 :].split()[STAT_START])
    except (OSError, ValueError, IndexError):
        return None


def remove_stale(base: Path) -> list[Path]:
    """Remove the cgroups in ``base`` made by modelmon processes that are gone (killed with
    SIGKILL, say) and in which nothing runs any more; the ones removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            found = _NAME.match(entry.name)
            if found is None or not entry.is_dir():
                continue
            pid, ticks = int(found.group(1)), int(found.group(2))
            now = start_ticks(pid)
            if now is not None and ticks in (now, 0):
                continue  # its owner still runs
            with contextlib.suppress(OSError):
                entry.rmdir()
                removed.append(entry)
    return removed
