"""What one process has open or mapped: its descriptors on model files (with their offset and
flags from fdinfo), its mappings of model files (with the pages each has resident, from
smaps), and the shared libraries it maps (which tell the loader).

All of it is read from /proc/PID/{fd,fdinfo,maps,smaps}: the same user or root, nothing is
attached to the process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from modelmon.core.watching.files import Identity, ModelFile

_SHARED_LIBRARY = re.compile(r"\.so(\.[0-9.]+)?$")


@dataclass(frozen=True, slots=True)
class Descriptor:
    """A descriptor of a process on a model file, as fdinfo shows it now."""

    pid: int
    fd: int
    file: int  # ModelFile.index
    position: int  # the open file description's offset (shared by all who share it)
    flags: int  # open flags (O_DIRECT, O_RDONLY...)


@dataclass(frozen=True, slots=True)
class Mapping:
    """A mapping of a model file in a process."""

    pid: int
    file: int
    start: int  # address
    end: int
    offset: int  # file offset of ``start``

    @property
    def length(self) -> int:
        return self.end - self.start


def parse_fdinfo(data: bytes) -> tuple[int, int]:
    """(pos, flags) of /proc/PID/fdinfo/FD (flags are octal)."""
    position = flags = 0
    for line in data.splitlines():
        key, _, value = line.partition(b":")
        if key == b"pos":
            position = int(value)
        elif key == b"flags":
            flags = int(value, 8)
    return position, flags


def parse_maps(
    data: bytes,
) -> tuple[list[tuple[Identity, int, int, int, str]], set[str]]:
    """File mappings of /proc/PID/maps as (identity, start, end, file offset, path), and the
    paths of the shared libraries mapped (``.so`` in the name)."""
    mappings: list[tuple[Identity, int, int, int, str]] = []
    libraries: set[str] = set()
    for line in data.splitlines():
        fields = line.split(None, 5)
        if len(fields) < 6 or fields[4] == b"0":
            continue  # anonymous, or a pseudo mapping ([heap], [stack]...)
        path = fields[5].decode(errors="replace")
        if _SHARED_LIBRARY.search(path):
            libraries.add(path)
            continue
        major, minor = (int(part, 16) for part in fields[3].split(b":"))
        start, end = (int(part, 16) for part in fields[0].split(b"-"))
        identity = (os.makedev(major, minor), int(fields[4]))
        mappings.append((identity, start, end, int(fields[2], 16), path))
    return mappings, libraries


def mapping_rss(smaps: bytes, starts: list[int]) -> dict[int, int]:
    """Resident bytes of the mappings starting at ``starts``, from /proc/PID/smaps: found by
    their header line, so a process with thousands of mappings is not parsed line by line."""
    found: dict[int, int] = {}
    for start in starts:
        header = b"%08x-" % start  # as maps and smaps print it
        at = smaps.find(b"\n" + header)
        at = 0 if at < 0 and smaps.startswith(header) else at + 1 if at >= 0 else -1
        if at < 0:
            continue
        rss_at = smaps.find(b"\nRss:", at)
        if rss_at < 0:
            continue
        line_end = smaps.find(b"\n", rss_at + 1)
        value = smaps[rss_at + 5 : line_end if line_end >= 0 else None].split()
        found[start] = int(value[0]) * 1024 if value else 0
    return found


@dataclass
class Openings:
    """What a process had open and mapped at its latest look."""

    descriptors: list[Descriptor]
    mappings: list[Mapping]
    libraries: set[str]
    mapped_rss: dict[int, int]  # file index -> resident bytes of its mappings here
    denied: str | None = None  # what could not be read, when something could not


def look(
    pid: int,
    consider: Callable[[str, Identity | None], ModelFile | None],
    want_rss: bool,
) -> Openings | None:
    """The model files ``pid`` has open or mapped (``consider`` says which paths are the
    model); None when the process is gone."""
    descriptors: list[Descriptor] = []
    denied = None
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return None
    except PermissionError:
        names, denied = [], "descriptors (/proc/PID/fd)"
    for name in names:
        link = f"/proc/{pid}/fd/{name}"
        try:
            target = os.readlink(link)
            if not target.startswith("/"):
                continue  # pipe:[..], socket:[..], anon_inode:...
            status = os.stat(link)
            found = consider(target.removesuffix(" (deleted)"), (status.st_dev, status.st_ino))
            if found is None:
                continue
            with open(f"/proc/{pid}/fdinfo/{name}", "rb") as info:
                position, flags = parse_fdinfo(info.read())
        except OSError:
            continue  # closed while we looked
        descriptors.append(Descriptor(pid, int(name), found.index, position, flags))
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            parsed, libraries = parse_maps(maps.read())
    except FileNotFoundError:
        return None
    except PermissionError:
        parsed, libraries = [], set()
        denied = " and ".join(filter(None, (denied, "mappings (/proc/PID/maps)")))
    mappings = []
    for identity, start, end, offset, path in parsed:
        found = consider(path.removesuffix(" (deleted)"), identity)
        if found is not None:
            mappings.append(Mapping(pid, found.index, start, end, offset))
    mapped_rss: dict[int, int] = {}
    if want_rss and mappings:
        try:
            with open(f"/proc/{pid}/smaps", "rb") as smaps:
                resident = mapping_rss(smaps.read(), [m.start for m in mappings])
        except OSError:
            resident = {}
        for mapping in mappings:
            if mapping.start in resident:
                mapped_rss[mapping.file] = mapped_rss.get(mapping.file, 0) + resident[mapping.start]
    if denied is not None:
        denied = (
            f"cannot read the {denied} of a process of another user: run modelmon as that "
            "user or as root"
        )
    return Openings(descriptors, mappings, libraries, mapped_rss, denied)


def mapped_length(pid: int, paths: list[bytes]) -> int | None:
    """Bytes of the files at ``paths`` that ``pid`` maps now: the address ranges of the
    /proc/PID/maps lines naming them, found by search (cheap enough for every tick: a
    process's other thousands of lines are not parsed); None when it is gone."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as maps:
            data = maps.read()
    except FileNotFoundError:
        return None
    except OSError:
        return 0
    total = 0
    for path in paths:
        at = data.find(path)
        while at >= 0:
            end = data.find(b"\n", at)
            tail = data[at + len(path) : end if end >= 0 else len(data)]
            if tail in (b"", b" (deleted)"):  # the whole path, not a longer one's start
                line = data.rfind(b"\n", 0, at) + 1
                low, _, high = data[line : data.index(b" ", line)].partition(b"-")
                total += int(high, 16) - int(low, 16)
            at = data.find(path, at + len(path))
    return total
