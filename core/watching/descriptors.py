"""Which descriptors share one open file description: kcmp(KCMP_FILE) from outside.

``fork`` hands a child the parent's descriptors, and with them the parent's open file
descriptions: one file offset and, on FUSE, one file handle for all of them. Readers that
share one interleave their reads through it (the filesystem sees one stream jumping between
offsets). ``kcmp(pid1, pid2, KCMP_FILE, fd1, fd2)`` answers whether two descriptors are one
description; it needs ptrace read access to both processes (the same user, or root).
Threads of one process share its descriptors (they share the descriptor table).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass, field

from modelmon.core.system.libc import LIBC
from modelmon.core.watching.openings import Descriptor

KCMP_FILE = 0
# kcmp's number: the generic table (aarch64, riscv64, loongarch64) has 272.
_KCMP_NR = {"x86_64": 312, "aarch64": 272, "arm64": 272, "riscv64": 272, "loongarch64": 272}
_KCMP_NR.update({"ppc64le": 354, "ppc64": 354, "s390x": 343, "i686": 349, "armv7l": 378})


class KcmpUnavailable(Exception):
    """kcmp cannot say here; the message says why in words a user can act on."""


def kcmp_same_file(pid1: int, fd1: int, pid2: int, fd2: int) -> bool | None:
    """Whether fd1 of pid1 and fd2 of pid2 are one open file description; None when either
    descriptor is gone. Raises KcmpUnavailable when the kernel or permissions refuse."""
    number = _KCMP_NR.get(platform.machine())
    if number is None:
        raise KcmpUnavailable(f"kcmp's system call number is not known on {platform.machine()}")
    result = LIBC.syscall(
        ctypes.c_long(number),
        ctypes.c_int(pid1),
        ctypes.c_int(pid2),
        ctypes.c_int(KCMP_FILE),
        ctypes.c_ulong(fd1),
        ctypes.c_ulong(fd2),
    )
    if result >= 0:
        return bool(result == 0)
    code = ctypes.get_errno()
    if code in (errno.EBADF, errno.ESRCH):
        return None
    if code == errno.ENOSYS:
        raise KcmpUnavailable("this kernel has no kcmp (built without CONFIG_KCMP)")
    if code == errno.EPERM:
        raise KcmpUnavailable(
            "kcmp was refused: comparing another process's descriptors needs ptrace read "
            "access to it (the same user, kernel.yama.ptrace_scope ≤ 1, or root)"
        )
    raise KcmpUnavailable(f"kcmp failed: {os.strerror(code)}")


@dataclass
class DescriptionGroup:
    """One open file description on a model file, and every descriptor seen on it."""

    file: int
    members: set[tuple[int, int]] = field(default_factory=set)  # (pid, fd)
    flags: int = 0
    position: int = 0  # its offset at the latest look
    max_position: int = 0  # the furthest its offset went: bytes read through it with read()
    first_seen_ns: int = 0
    last_seen_ns: int = 0
    threads: dict[int, int] = field(default_factory=dict)  # pid -> most threads seen

    @property
    def pids(self) -> list[int]:
        return sorted({pid for pid, _ in self.members})

    @property
    def o_direct(self) -> bool:
        return bool(self.flags & getattr(os, "O_DIRECT", 0))


class DescriptorGroups:
    """The open file descriptions on model files over the whole watch.

    Each look groups the descriptors open now (kcmp against one member of each group of the
    same file) and joins each group to the one seen before that had any of its descriptors.
    """

    def __init__(self) -> None:
        self.groups: list[DescriptionGroup] = []
        self._current: dict[tuple[int, int], DescriptionGroup] = {}  # (pid, fd) open now
        self.unavailable: str | None = None  # why sharing could not be told

    def update(self, descriptors: list[Descriptor], threads: dict[int, int], now_ns: int) -> None:
        grouped: list[tuple[Descriptor, list[Descriptor]]] = []  # (first member, members)
        for descriptor in descriptors:
            home = None
            for first, members in grouped:
                if first.file == descriptor.file and self._same(first, descriptor):
                    home = members
                    break
            if home is None:
                grouped.append((descriptor, [descriptor]))
            else:
                home.append(descriptor)
        current: dict[tuple[int, int], DescriptionGroup] = {}
        for first, members in grouped:
            keys = [(d.pid, d.fd) for d in members]
            group = next((self._current[k] for k in keys if k in self._current), None)
            if group is None or group.file != first.file:
                group = DescriptionGroup(first.file, first_seen_ns=now_ns, flags=first.flags)
                self.groups.append(group)
            group.members.update(keys)
            group.flags = first.flags
            group.position = first.position
            group.max_position = max(group.max_position, first.position)
            group.last_seen_ns = now_ns
            for pid in {d.pid for d in members}:
                group.threads[pid] = max(group.threads.get(pid, 0), threads.get(pid, 1))
            current.update((key, group) for key in keys)
        self._current = current

    def _same(self, a: Descriptor, b: Descriptor) -> bool:
        """Two descriptors of one process too are one description only after dup()."""
        if self.unavailable is not None:
            return False
        try:
            return kcmp_same_file(a.pid, a.fd, b.pid, b.fd) is True
        except KcmpUnavailable as error:
            self.unavailable = str(error)
            return False

    def shared(self) -> list[DescriptionGroup]:
        """The descriptions held by more than one process."""
        return [g for g in self.groups if len(g.pids) > 1]
