"""Processes outside the watched tree that have the model's files open or mapped.

Such a reader moves the model's pages too: what arrives, what was cached before the program
read it and what is dropped again are then not the watched program's doing alone, nor a sign
that memory was short. A scan lists /proc once and reads every other process's descriptor
links (matched by the model files' names, then by identity) and, where a model file's inode
appears in them, its maps. It runs at the first look and the last, and in between no more
than once per sampling interval, spaced further so it stays within OTHERS_CPU_SHARE of one
core on a machine with many processes. Processes of another user are not readable (unless
modelmon runs as root): a reader among them is not seen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from modelmon.core.watching.files import Identity, ModelFile
from modelmon.core.watching.openings import parse_maps
from modelmon.core.watching.result import OtherReader

# Of one core: every process's descriptors and maps (seconds apart on a busy machine).
OTHERS_CPU_SHARE = 0.0025


@dataclass
class _Seen:
    name: str
    files: set[int] = field(default_factory=set)  # ModelFile.index
    mapped: bool = False


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", "rb") as comm:
            return comm.read().decode(errors="replace").strip() or "?"
    except OSError:
        return "?"


class OtherReaders:
    """What the scans found: each outside process seen with a model file open or mapped."""

    def __init__(self) -> None:
        self.seen: dict[int, _Seen] = {}
        self.scans = 0

    def scan(self, files: Sequence[ModelFile], belongs: Callable[[int], bool]) -> int:
        """One look at every process but this one and those ``belongs`` to the watched tree;
        its CPU cost in ns."""
        started = time.thread_time_ns()
        if files:
            own = os.getpid()
            try:
                pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
            except OSError:
                pids = []
            for pid in pids:
                if pid == own:
                    continue
                found, mapped = _openings(pid, files)
                if found and not belongs(pid):
                    seen = self.seen.setdefault(pid, _Seen(_name(pid)))
                    seen.files |= found
                    seen.mapped = seen.mapped or mapped
            self.scans += 1
        return time.thread_time_ns() - started

    def report(self, files: Sequence[ModelFile]) -> tuple[OtherReader, ...]:
        paths = {f.index: f.path for f in files}
        return tuple(
            OtherReader(pid, seen.name, tuple(paths[i] for i in sorted(seen.files)), seen.mapped)
            for pid, seen in sorted(self.seen.items())
        )


def _openings(pid: int, files: Sequence[ModelFile]) -> tuple[set[int], bool]:
    """The model files (their indexes) ``pid`` has open or mapped, and whether it maps one;
    nothing for a process that is gone or not readable."""
    identities: dict[Identity, int] = {f.identity: f.index for f in files}
    names = {os.path.basename(f.path) for f in files}
    found: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found, False
    for fd in fds:
        link = f"/proc/{pid}/fd/{fd}"
        try:
            target = os.readlink(link)
            if os.path.basename(target.removesuffix(" (deleted)")) not in names:
                continue
            status = os.stat(link)
        except OSError:
            continue
        index = identities.get((status.st_dev, status.st_ino))
        if index is not None:
            found.add(index)
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            data = maps.read()
    except OSError:
        return found, False
    if not any(b" %d " % identity[1] in data for identity in identities):
        return found, False
    mapped = {identities[m[0]] for m in parse_maps(data)[0] if m[0] in identities}
    return found | mapped, bool(mapped)
