"""Linux /proc files kept open and re-read in place, and the few fields the sources need.

At 10 Hz the sampler reads a dozen /proc files a sample; opening, reading and closing each one
(psutil's way, and ``open()``'s) costs several times the read itself. A ``ProcFile`` opens once
and re-reads with ``pread(fd, n, 0)``: the kernel regenerates a /proc file's text on every
read from offset 0. A /proc/<pid>/ file kept open stays tied to that process, never to a later
one given the same pid: once it is gone (reaped) a read fails with ESRCH.
"""

from __future__ import annotations

import errno
import os
from typing import NamedTuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc time unit
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
GONE = (errno.ENOENT, errno.ESRCH)  # opening or reading a /proc/<pid>/ file of an exited process


def have_procfs() -> bool:
    """Whether this system has Linux's per-process /proc files."""
    return os.path.exists(f"/proc/{os.getpid()}/stat")


class ProcFile:
    """One file kept open from the first ``read()`` (which gives its whole current content)
    until ``close()``; opening at first read, so a reader made and never used holds nothing."""

    def __init__(self, path: str, size: int = 4096) -> None:
        self.path = path
        self._size = max(64, size)
        self._fd: int | None = None
        self._closed = False

    def read(self) -> bytes:
        if self._closed:
            raise ValueError(f"{self.path} is closed")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        while True:
            data = os.pread(self._fd, self._size, 0)
            if len(data) < self._size:
                return data
            self._size *= 2  # it may go on: read again with room to spare

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def pid_busy_seconds(stat: bytes) -> float:
    """utime + stime of a /proc/<pid>/stat line, in seconds (children's times left out).

    The command name, in parentheses, may hold spaces and parentheses: fields count from the
    last ')'. utime and stime are fields 14 and 15, the 12th and 13th after it.
    """
    fields = stat[stat.rindex(b")") + 2 :].split(None, 13)
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class PidMemory(NamedTuple):
    rss: float  # resident bytes, as psutil's rss
    mapped: float  # of them, file pages and shared memory mapped (page cache), as its shared


def pid_memory(statm: bytes) -> PidMemory:
    """Resident memory and its mapped file pages from /proc/<pid>/statm (its second and third
    fields, in pages: RssFile + RssShmem is the third), as psutil's rss and shared."""
    fields = statm.split(None, 3)
    return PidMemory(float(int(fields[1]) * PAGE_SIZE), float(int(fields[2]) * PAGE_SIZE))


class PidIo(NamedTuple):
    read_bytes: float
    read_chars: float


def pid_io(io: bytes) -> PidIo:
    """read_bytes and rchar of /proc/<pid>/io."""
    found: dict[bytes, float] = {}
    for line in io.splitlines():
        key, _, value = line.partition(b":")
        if key in (b"rchar", b"read_bytes"):
            found[key] = float(int(value))
    return PidIo(found[b"read_bytes"], found[b"rchar"])


class CpuLine(NamedTuple):
    total: float  # seconds of all CPUs
    idle: float
    iowait: float


def system_cpu_line(stat: bytes) -> CpuLine:
    """The aggregate "cpu" line of /proc/stat in seconds, guest time left out of the total:
    Linux already counts it in user and nice."""
    if not stat.startswith(b"cpu "):
        raise ValueError("/proc/stat does not start with the cpu line")
    values = [int(x) for x in stat[4 : stat.index(b"\n")].split()]
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal
    iowait = values[4] / CLOCK_TICKS if len(values) > 4 else float("nan")
    return CpuLine(total / CLOCK_TICKS, values[3] / CLOCK_TICKS, iowait)
