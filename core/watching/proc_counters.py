"""A process's counters as the watched tree sums them, parsed from its /proc files (stat,
io, statm): faults, CPU time and reads, its reaped children's included."""

from __future__ import annotations

from typing import NamedTuple

from modelmon.core.metrics.procfs import CLOCK_TICKS, PAGE_SIZE


class Counters(NamedTuple):
    """A process's cumulative counters, its reaped children's included."""

    major_faults: int
    minor_faults: int
    cpu_seconds: float  # user + system
    read_bytes: int  # /proc/PID/io read_bytes: what it made the block layer read
    read_chars: int  # rchar: bytes its read calls returned, cached or not
    system_seconds: float = 0.0  # of cpu_seconds, in the kernel (its reads, page faults)

    def minus(self, other: Counters) -> Counters:
        return self.plus(other, sign=-1)

    def plus(self, other: Counters, sign: int = 1) -> Counters:
        return Counters(
            self.major_faults + sign * other.major_faults,
            self.minor_faults + sign * other.minor_faults,
            self.cpu_seconds + sign * other.cpu_seconds,
            self.read_bytes + sign * other.read_bytes,
            self.read_chars + sign * other.read_chars,
            self.system_seconds + sign * other.system_seconds,
        )


ZERO = Counters(0, 0, 0.0, 0, 0, 0.0)


class StatLine(NamedTuple):
    state: str
    ppid: int
    start_ticks: int  # since boot: with the pid, names one process for good
    threads: int
    counters: Counters  # read_bytes and read_chars are 0: they come from /proc/PID/io


def parse_stat(data: bytes) -> StatLine:
    """The fields of /proc/PID/stat the tree uses; fields count after the last ')'."""
    fields = data[data.rindex(b")") + 2 :].split()
    # After ')': state(0) ppid(1) ... minflt(7) cminflt(8) majflt(9) cmajflt(10) utime(11)
    # stime(12) cutime(13) cstime(14) ... num_threads(17) ... starttime(19)
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    system_ticks = int(fields[12]) + int(fields[14])
    counters = Counters(
        major_faults=int(fields[9]) + int(fields[10]),
        minor_faults=int(fields[7]) + int(fields[8]),
        cpu_seconds=ticks / CLOCK_TICKS,
        read_bytes=0,
        read_chars=0,
        system_seconds=system_ticks / CLOCK_TICKS,
    )
    return StatLine(fields[0].decode(), int(fields[1]), int(fields[19]), int(fields[17]), counters)


def parse_io(data: bytes) -> tuple[int, int]:
    """(read_bytes, rchar) of /proc/PID/io."""
    found: dict[bytes, int] = {}
    for line in data.splitlines():
        key, _, value = line.partition(b":")
        found[key] = int(value)
    return found[b"read_bytes"], found[b"rchar"]


def parse_statm(data: bytes) -> tuple[int, int]:
    """(resident, anonymous resident) bytes from /proc/PID/statm: anonymous is resident
    less its file-backed and shared pages (the model pages it maps are page cache)."""
    fields = data.split()
    resident, shared = int(fields[1]), int(fields[2])
    return resident * PAGE_SIZE, max(0, resident - shared) * PAGE_SIZE
