"""Stand-ins shaped like psutil's results (same namedtuple and field names) and its Process."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field

import psutil

from modelmon.core.metrics.base import MonitorTarget

# Linux shapes, as psutil 7 returns them.
scputimes = namedtuple(
    "scputimes", "user nice system idle iowait irq softirq steal guest guest_nice"
)
pcputimes = namedtuple("pcputimes", "user system children_user children_system iowait")
pmem = namedtuple("pmem", "rss vms shared text lib data dirty")
pio = namedtuple("pio", "read_count write_count read_bytes write_bytes read_chars write_chars")
svmem = namedtuple(
    "svmem", "total available percent used free active inactive buffers cached shared slab"
)
# Other OSes: macOS has no iowait nor cached, the BSDs and macOS no read_chars.
scputimes_macos = namedtuple("scputimes", "user nice system idle")
pio_bsd = namedtuple("pio", "read_count write_count read_bytes write_bytes")
svmem_macos = namedtuple("svmem", "total available percent used free active inactive wired")


def cpu_times(user: float, idle: float, iowait: float, system: float = 0.0) -> scputimes:
    return scputimes(user, 0.0, system, idle, iowait, 0.0, 0.0, 0.0, 0.0, 0.0)


def target(
    workers: int,
    pids: dict[int, int] | None = None,
    paths: tuple[str, ...] = (),
    loaded: Callable[[], int] = lambda: 0,
) -> MonitorTarget:
    known = dict(pids or {})
    return MonitorTarget(
        paths=paths, workers=workers, pids=lambda: dict(known), loaded_bytes=loaded
    )


@dataclass
class FakeSystem:
    """What a fake ``psutil.Process(pid)`` reports, changed by the test between samples."""

    busy: dict[int, float] = field(default_factory=dict)  # pid -> user CPU seconds
    rss: dict[int, int] = field(default_factory=dict)
    io: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (bytes, chars)
    raises: dict[int, Callable[[int], BaseException]] = field(default_factory=dict)
    io_shape: type = pio
    made: list[int] = field(default_factory=list)  # pids a Process was made for
    calls: list[int] = field(default_factory=list)  # pids a reading was asked of

    def process_class(self) -> type:
        system = self

        class FakeProcess:
            def __init__(self, pid: int) -> None:
                system.made.append(pid)
                self.pid = pid

            def _check(self) -> None:
                system.calls.append(self.pid)
                if self.pid in system.raises:
                    raise system.raises[self.pid](self.pid)

            def cpu_times(self) -> pcputimes:
                self._check()
                return pcputimes(system.busy[self.pid], 0.0, 0.0, 0.0, 0.0)

            def memory_info(self) -> pmem:
                self._check()
                return pmem(system.rss[self.pid], 0, 0, 0, 0, 0, 0)

            def io_counters(self) -> tuple:
                self._check()
                read_bytes, read_chars = system.io[self.pid]
                if system.io_shape is pio:
                    return pio(0, 0, read_bytes, 0, read_chars, 0)
                return system.io_shape(0, 0, read_bytes, 0)

        return FakeProcess


def denied(pid: int) -> BaseException:
    return psutil.AccessDenied(pid)


def gone(pid: int) -> BaseException:
    return psutil.NoSuchProcess(pid)


def zombie(pid: int) -> BaseException:
    return psutil.ZombieProcess(pid)
