"""Storage environments made by the benchmarks (and a few tests) themselves, torn down after.

- ``fuse_mount``: a real network FUSE mount — ``rclone serve http`` on loopback and
  ``rclone mount`` of it with no VFS cache: the closest thing here to GCSFuse.
- ``held_in_memory``: files locked in the page cache, for a server that serves them from
  memory (``fuse_mount(hold=True)``).
- ``throttled_disk``: a blkio cgroup (v1) that throttles reads of the disk holding a folder
  like a hard disk (bytes/s and IOPS); loads run inside it via ``cgroup_procs``.
Everything started is ended by pid; nothing else is touched.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelmon.core.runs import stop_child

BLKIO = Path("/sys/fs/cgroup/blkio")


class EnvUnavailable(RuntimeError):
    """This environment can't be made here; the message says why (a skip reason)."""


def free_port() -> int:
    """A loopback port free now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fuse_unavailable() -> str | None:
    if shutil.which("rclone") is None:
        return "rclone is not installed (apt-get install rclone fuse3)"
    if shutil.which("fusermount3") is None and shutil.which("fusermount") is None:
        return "fusermount is not installed (apt-get install fuse3)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing: this machine cannot mount FUSE filesystems"
    return None


def serving(port: int) -> bool:
    """A server on loopback ``port`` accepts connections (before that, a mount of it answers
    EIO)."""
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def came_up(child: subprocess.Popen[bytes], port: int, deadline: float) -> bool:
    """Wait for the state, not for time: whether ``child`` listens on loopback ``port``
    before it ends or ``deadline`` (``time.monotonic()``) passes."""
    while not serving(port):
        if child.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _answers(mount_point: Path) -> bool:
    """The mount lists its root: rclone has reached the server through it."""
    try:
        os.listdir(mount_point)
    except OSError:
        return False
    return True


def _mounted(mount_point: Path) -> bool:
    target = str(mount_point.resolve())
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts if len(line.split()) > 1)


@contextlib.contextmanager
def fuse_mount(
    source: Path,
    mount_point: Path,
    timeout_s: float = 15.0,
    mount_flags: Sequence[str] = (),
    *,
    hold: bool = False,
    via: Callable[[int], AbstractContextManager[str]] | None = None,
) -> Iterator[Path]:
    """Serve ``source`` over HTTP on loopback and mount it at ``mount_point`` (read-only).
    ``mount_flags`` go to ``rclone mount``: ``("--bwlimit", "1M")`` makes a slow network.
    ``via``: given the server's port, a context whose URL the mount reads through instead
    (a test's proxy in front of the server, which can hold its answers); it ends after the
    mount.

    The server reads ``source`` from the local disk, and rclone drops from the page cache
    what it has served (a 1 GB file fully cached before a run through the mount held 11 %
    after it), so each run also reads the local disk, whose speed varies from run to run.
    ``hold``: the server serves ``source``'s files from memory (``held_in_memory``) and the
    mount alone sets the pace: one loader's cold runs through it varied 701–821 MB/s held,
    490–802 not."""
    reason = fuse_unavailable()
    if reason:
        raise EnvUnavailable(reason)
    with contextlib.ExitStack() as stack:
        if hold:
            stack.enter_context(held_in_memory(source))
        yield stack.enter_context(_served(source, mount_point, timeout_s, mount_flags, via))


@contextlib.contextmanager
def held_in_memory(folder: Path) -> Iterator[None]:
    """The regular files in ``folder`` read into the page cache and locked there (mapped and
    ``mlock``-ed by this process, as ``vmtouch -l`` does) until the block ends; the lock goes
    with this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mlock.argtypes = libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    held: list[tuple[int, int]] = []
    try:
        for path in sorted(p for p in folder.iterdir() if p.is_file()):
            size = path.stat().st_size
            if size == 0:
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            finally:
                os.close(fd)  # the mapping keeps the file
            if address in (None, ctypes.c_void_p(-1).value):
                raise EnvUnavailable(f"cannot map {path}: {os.strerror(ctypes.get_errno())}")
            held.append((address, size))
            if libc.mlock(address, size) != 0:
                why = os.strerror(ctypes.get_errno())
                raise EnvUnavailable(f"cannot hold {path} in memory (mlock: {why})")
        yield
    finally:
        for address, size in held:
            libc.munmap(address, size)  # unlocks too


@contextlib.contextmanager
def _served(
    source: Path,
    mount_point: Path,
    timeout_s: float,
    mount_flags: Sequence[str],
    via: Callable[[int], AbstractContextManager[str]] | None,
) -> Iterator[Path]:
    mount_point.mkdir(parents=True, exist_ok=True)
    port = free_port()
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    server = subprocess.Popen(
        [
            "rclone",
            "serve",
            "http",
            str(source),
            "--addr",
            f"127.0.0.1:{port}",
            "--dir-cache-time",
            "1s",
        ],
        **quiet,
    )
    mounter: subprocess.Popen[bytes] | None = None
    deadline = time.monotonic() + timeout_s
    front = contextlib.ExitStack()  # the proxy ``via`` puts in front: ended after the mount
    try:
        # Wait for each state in turn, not for time: the server listens, the mount is there,
        # the mount answers. A file opened before that fails with EIO.
        if not came_up(server, port, deadline):
            raise EnvUnavailable("rclone serve http did not start listening")
        url = f"http://127.0.0.1:{port}" if via is None else front.enter_context(via(port))
        mounter = subprocess.Popen(
            [
                "rclone",
                "mount",
                ":http:",
                str(mount_point),
                "--http-url",
                url,
                "--vfs-cache-mode",
                "off",
                "--read-only",
                "--dir-cache-time",
                "1s",
                *mount_flags,
            ],
            **quiet,
        )
        while not (os.path.ismount(mount_point) and _answers(mount_point)):
            if mounter.poll() is not None or time.monotonic() > deadline:
                raise EnvUnavailable("rclone mount did not come up (is FUSE permitted here?)")
            time.sleep(0.05)
        yield mount_point
    finally:
        if mounter is not None:
            stop_child(mounter)
        if _mounted(mount_point):  # not os.path.ismount: a dead rclone leaves an endpoint
            fusermount = shutil.which("fusermount3") or "fusermount"  # that stat cannot reach
            subprocess.run([fusermount, "-u", "-z", str(mount_point)], check=False, **quiet)
        front.close()
        stop_child(server)


@dataclass(frozen=True)
class Throttle:
    cgroup: Path
    device: str  # "MAJ:MIN" of the disk

    def add(self, pid: int) -> None:
        (self.cgroup / "cgroup.procs").write_text(str(pid))

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the cgroup from its first instruction (its children too): a
        shell moves itself in, then execs the command, so nothing runs unthrottled first."""
        procs = self.cgroup / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *argv]


def disk_of(folder: Path) -> str:
    """MAJ:MIN of the whole disk holding ``folder`` (throttles apply to disks, not partitions)."""
    dev = os.stat(folder).st_dev
    sys_dev = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}").resolve()
    if (sys_dev / "partition").exists():
        sys_dev = sys_dev.parent
    return (sys_dev / "dev").read_text().strip()


def throttle_unavailable(folder: Path) -> str | None:
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return "no blkio cgroup v1 with throttling at /sys/fs/cgroup/blkio"
    if not os.access(BLKIO, os.W_OK):
        return "cannot create blkio cgroups (needs root)"
    try:
        disk_of(folder)
    except OSError:
        return f"{folder} is not on a block device"
    return None


@contextlib.contextmanager
def throttled_disk(
    folder: Path, read_bps: int = 150 << 20, read_iops: int = 200
) -> Iterator[Throttle]:
    """A cgroup throttling reads of ``folder``'s disk like a hard disk; removed afterwards.

    Processes added with ``Throttle.add`` (and their children, e.g. spawned workers) are
    throttled. They must have exited before the context ends, or the cgroup can't be removed.
    """
    reason = throttle_unavailable(folder)
    if reason:
        raise EnvUnavailable(reason)
    device = disk_of(folder)
    cgroup = BLKIO / f"modelmon-hdd-{os.getpid()}"
    cgroup.mkdir()
    try:
        (cgroup / "blkio.throttle.read_bps_device").write_text(f"{device} {read_bps}")
        (cgroup / "blkio.throttle.read_iops_device").write_text(f"{device} {read_iops}")
        yield Throttle(cgroup, device)
    finally:
        for pid in (cgroup / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # move stragglers back to the root group
                (BLKIO / "cgroup.procs").write_text(pid)
        cgroup.rmdir()
