"""Memory cgroups (v1, this machine's kind) that tests make and remove: a limit that processes
started through ``command`` live under from their first instruction, their children too; and
where modelmon's own run cgroups are, on v1 or v2."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup/memory")


@dataclass(frozen=True)
class MemoryCgroup:
    """A v1 memory cgroup: processes started with ``command`` run in it from their first
    instruction (a shell moves itself in, then execs), their children too."""

    path: Path
    limit: int

    def command(self, argv: list[str]) -> list[str]:
        procs = self.path / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]

    def read(self, name: str) -> int:
        return int((self.path / name).read_text().split()[0])

    @property
    def peak(self) -> int:
        """Bytes charged at most since it was made (memory and page cache of its members)."""
        return self.read("memory.max_usage_in_bytes")

    @property
    def met_limit(self) -> bool:
        """Whether a charge ever met the limit (then the cgroup reclaims, or OOM-kills)."""
        return self.peak >= self.limit

    @property
    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0


def run_cgroups_of(pid: int) -> list[Path]:
    """The memory cgroups modelmon's process ``pid`` made for its runs, wherever this machine's
    hierarchy holds them: under the v1 memory controller, or anywhere in v2's unified tree."""
    root = V1 if V1.is_dir() else Path("/sys/fs/cgroup")
    prefix = f"modelmon-{pid}-"
    found = []
    for folder, names, _ in os.walk(root):  # a cgroup removed mid-walk is skipped, not raised
        found += [Path(folder) / name for name in names if name.startswith(prefix)]
    return sorted(found)


def _own_v1_memory_cgroup() -> Path | None:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return V1 / path.lstrip("/")
    return None


@contextlib.contextmanager
def memory_cgroup(limit: int) -> Iterator[MemoryCgroup]:
    """A child of this process's own memory cgroup, limited to ``limit`` bytes, no swap."""
    parent = _own_v1_memory_cgroup() if (V1 / "memory.limit_in_bytes").exists() else None
    if parent is None or not parent.is_dir():
        pytest.skip("needs the cgroup v1 memory controller (this machine's kind)")
    if not os.access(parent, os.W_OK):
        pytest.skip("cannot create memory cgroups here (needs root)")
    path = parent / f"modelmon-test-{os.getpid()}-{time.monotonic_ns()}"
    path.mkdir()
    try:
        (path / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):  # no swap accounting: there is no swap to limit
            (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        yield MemoryCgroup(path, limit)
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # a straggler goes back to where we are
                (parent / "cgroup.procs").write_text(pid)
        path.rmdir()
