"""Whether the kernel's OOM killer ended a process: its own record of the kill, not the
machine's count.

The machine-wide ``oom_kill`` count in /proc/vmstat rises for any process killed anywhere
(another container's, a neighbour's), so a kill -9 of a worker while anything else on the
machine ran out of memory would be called an OOM kill. The kernel logs each OOM kill with
the pid it killed ("oom-kill:...,pid=4242,..." and "Killed process 4242 (python)"), in
/dev/kmsg: that names the process. A run under a memory limit asks its own cgroup instead
(``MemoryCgroup.oom_kills``). Where the log cannot be read (not root, and
``kernel.dmesg_restrict``), the count is all there is, and the words say so.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Generator, Iterable

KMSG = "/dev/kmsg"
KMSG_MAX_RECORDS = 100_000  # the ring buffer holds far fewer: a bound on the reading
VMSTAT = "/proc/vmstat"


def oom_kills(vmstat: str = VMSTAT) -> int | None:
    """How many processes the kernel's OOM killer has killed since boot (``oom_kill`` in
    /proc/vmstat, any cgroup's included); None where the kernel does not count them."""
    try:
        with open(vmstat) as lines:
            for line in lines:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


class _Unreadable(Exception):
    """The kernel's log cannot be read (not there, not allowed, failing)."""


def _kmsg_records(kmsg: str) -> Generator[bytes, None, None]:
    """The kernel log's records from the start of its ring buffer to its end, without
    waiting; ``_Unreadable`` where it cannot be read."""
    try:
        descriptor = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        raise _Unreadable from None
    try:
        for _ in range(KMSG_MAX_RECORDS):
            try:
                record = os.read(descriptor, 8192)
            except BlockingIOError:
                return  # the end of the log
            except BrokenPipeError:
                continue  # records overwritten while read: the next one follows
            except OSError:
                raise _Unreadable from None
            if not record:
                return
            yield record
    finally:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def logged_oom_kill(pid: int, kmsg: str = KMSG) -> bool | None:
    """Whether the kernel's log records an OOM kill of ``pid``; None where the log cannot be
    read. Records are read from the start of the ring buffer to its end, without waiting."""
    wanted = re.compile(rf"(?:Killed process {pid} \(|oom-kill:.*[,:]pid={pid},)".encode())
    try:
        with contextlib.closing(_kmsg_records(kmsg)) as records:
            return any(wanted.search(record) for record in records)
    except _Unreadable:
        return None


def oom_killed(pid: int, count_before: int | None) -> bool | None:
    """Whether the OOM killer ended ``pid``: its log's record where the log can be read;
    else True where the machine's count rose since ``count_before`` (another process's kill
    counts too: ``None`` says it is not known), False where it did not."""
    logged = logged_oom_kill(pid)
    if logged is not None:
        return logged
    now = oom_kills()
    if count_before is None or now is None or now > count_before:
        return None
    return False


def oom_victims(pids: Iterable[int], kmsg: str = KMSG) -> dict[int, str]:
    """The processes among ``pids`` the kernel's log says its OOM killer killed, with the
    name it gives each ("Killed process 4242 (python)"); empty where the log cannot be read."""
    wanted = set(pids)
    found: dict[int, str] = {}
    record_of = re.compile(rb"Killed process (\d+) \(([^)]*)\)")
    with contextlib.suppress(_Unreadable), contextlib.closing(_kmsg_records(kmsg)) as records:
        for record in records:
            for pid, name in record_of.findall(record):
                if int(pid) in wanted:
                    found[int(pid)] = name.decode(errors="replace")
    return found
