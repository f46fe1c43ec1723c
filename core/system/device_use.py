"""Which modelmon runs use a storage device, machine-wide: one lock and one log per device.

Both live in a directory where every user can create files, ``/run/lock`` (``/var/lock``
without it; ``$MODELMON_LOCK_DIR`` for tests and containers), named after the device
(``modelmon-block-vda.lock``, ``modelmon-bdi-0_53.log``): so runs of different users, or of a
user and a service with another HOME, meet on the same files.

- The lock (``flock``): a run that changes the device (its readahead) holds it exclusively,
  every other run shares it, so nothing changes under a run, whoever started it.
- The log: each measuring run appends a line when it starts using the device and one when it
  ends (``Activity``). When its timed part ends, a run names the others that were using the
  device at any moment of it: those still running when it began, and those that started
  since. A line of a run that died without its end line counts while its process lives.

Another user can write both files. So they are only ever trusted with what a lock or a note
needs: the lock file's content is never read, and a log line yields at most a note in a
result (a pid and a shortened command line), never a value that is acted on. Both are opened
without following symlinks and without blocking (a FIFO planted under the name cannot hang a
run), and refused unless they are regular files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

LOCK_DIRS = ("/run/lock", "/var/lock")  # the first that exists; not /tmp: a service may
# have a private one (systemd's PrivateTmp), and then it would not meet the others
LOCK_PATIENCE_S = 0.5
LOG_READ_LIMIT = 1 << 20  # bytes of log read at once: lines of a day of runs
LOG_ROTATE_BYTES = 256 << 10  # emptied past this, when no run it names is alive
COMMAND_CHARS = 120


def lock_dir() -> Path:
    given = os.environ.get("MODELMON_LOCK_DIR")
    if given:
        return Path(given)
    return Path(next((d for d in LOCK_DIRS if os.path.isdir(d)), LOCK_DIRS[0]))


class DeviceFileError(OSError):
    """A device's lock or log cannot be used (one line, for a message)."""


def _open_shared(path: Path, write: bool) -> int:
    """A descriptor on the shared regular file at ``path``, created for every user if missing.

    Opened without O_CREAT first: where ``fs.protected_regular`` is set, O_CREAT on a file
    another user owns in a sticky directory fails even when the file would open."""
    flags = (os.O_RDWR | os.O_APPEND if write else os.O_RDONLY) | os.O_NOFOLLOW
    flags |= os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                continue  # another run created it just now: open theirs
            with contextlib.suppress(OSError):
                os.fchmod(fd, 0o666 if write else 0o444)  # whatever our umask: for every user
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise DeviceFileError(errno.EINVAL, f"{path} is not a regular file")
        except BaseException:
            os.close(fd)
            raise
        return fd
    raise DeviceFileError(errno.EEXIST, f"{path} keeps appearing and vanishing")


def open_lock(name: str) -> int:
    """The machine-wide lock file of device ``name`` (``ReadaheadKnob.lock_name``), open.
    Read-only is enough for ``flock``: the file's content is never used."""
    return _open_shared(lock_dir() / f"modelmon-{name}.lock", write=False)


def take(lock_fd: int, mode: int) -> bool:
    """``flock`` the lock in ``mode`` (LOCK_EX or LOCK_SH), or False when another run holds
    it. Retried for ``LOCK_PATIENCE_S``: another run's ``readahead.recover`` or log rotation
    holds a lock for an instant while it looks."""
    deadline = time.monotonic() + LOCK_PATIENCE_S
    while True:
        try:
            fcntl.flock(lock_fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)


# --- the log: who used the device when ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """A modelmon run in a device's log: its process (pid and start time, so that a reused pid
    is another process) and what it was started as."""

    pid: int
    since: int  # the process's start time, in clock ticks after boot (/proc/PID/stat)
    command: str = field(compare=False)

    @property
    def alive(self) -> bool:
        return process_start(self.pid) == self.since

    def text(self) -> str:
        return f"pid {self.pid} ({self.command})"


def process_start(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            return int(stat_file.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def this_command() -> str:
    """This process's command line, short: ``modelmon load model.gguf --readahead 4096``."""
    words = list(sys.argv) or ["?"]
    program = os.path.basename(words[0])
    words[0] = "modelmon" if program in ("__main__.py", "modelmon") else program
    return _printable(shlex.join(words))


def _printable(text: str) -> str:
    """No control characters, at most ``COMMAND_CHARS``: a line another user wrote is shown
    as text and nothing more."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= COMMAND_CHARS else clean[: COMMAND_CHARS - 1] + "…"


def _parse(line: bytes) -> tuple[str, Run] | None:
    try:
        data = json.loads(line)
        event, pid, since, command = data["event"], data["pid"], data["since"], data["command"]
    except (ValueError, TypeError, KeyError):
        return None
    valid = event in ("start", "end") and isinstance(command, str)
    if not (valid and isinstance(pid, int) and isinstance(since, int)):
        return None
    return event, Run(pid, since, _printable(command))


# When this process's last run on each device ended (time.monotonic), by device name: what
# ``storage_rest.rest_storage`` counts a network mount's rest from.
_ended: dict[str, float] = {}


def last_ended(names: Iterable[str]) -> float | None:
    """When this process's last run on any of the devices ``names`` ended; None if none did."""
    ends = [_ended[name] for name in names if name in _ended]
    return max(ends, default=None)


class Activity:
    """This process's use of some devices, announced in their logs from ``open`` to
    ``close``; ``mark`` when the timed part begins, ``others`` when it has ended."""

    def __init__(self, names: Iterable[str]) -> None:
        since = process_start(os.getpid()) or 0
        self.me = Run(os.getpid(), since, this_command())
        self.names = list(dict.fromkeys(names))
        self._logs: dict[str, int] = {}
        self._marks: dict[str, tuple[int, set[Run]]] = {}
        for name in self.names:
            with contextlib.suppress(OSError):  # no log: this run goes unannounced
                fd = _open_shared(lock_dir() / f"modelmon-{name}.log", write=True)
                self._logs[name] = fd
                self._append(fd, "start")

    def _line(self, event: str) -> bytes:
        me = self.me
        data = {"event": event, "pid": me.pid, "since": me.since, "command": me.command}
        return json.dumps(data).encode() + b"\n"

    def _append(self, fd: int, event: str) -> None:
        with _flocked(fd, fcntl.LOCK_EX):
            full = event == "start" and os.fstat(fd).st_size > LOG_ROTATE_BYTES
            if full and not _alive_starts(_read(fd, 0)[0]):  # names no living run: none lost
                os.ftruncate(fd, 0)
            os.write(fd, self._line(event))  # O_APPEND: one whole line at the end

    def mark(self) -> None:
        """The timed part begins: remember who is using the devices now, and where each log
        ends."""
        for name, fd in self._logs.items():
            with contextlib.suppress(OSError), _flocked(fd, fcntl.LOCK_SH):
                lines, end = _read(fd, 0)
                self._marks[name] = (end, _alive_starts(lines) - {self.me})

    def others(self) -> list[Run]:
        """The other runs that used the devices at any moment since ``mark``, in order."""
        found: dict[tuple[int, int], Run] = {}
        for name, (offset, alive) in self._marks.items():
            fd = self._logs[name]
            for run in sorted(alive, key=lambda r: r.pid):
                found.setdefault((run.pid, run.since), run)
            with contextlib.suppress(OSError), _flocked(fd, fcntl.LOCK_SH):
                if os.fstat(fd).st_size < offset:
                    offset = 0  # emptied meanwhile by another user: read what is there
                for event, run in _read(fd, offset)[0]:
                    if event == "start" and run != self.me:
                        found.setdefault((run.pid, run.since), run)
        return list(found.values())

    def close(self) -> None:
        ended = time.monotonic()
        _ended.update(dict.fromkeys(self.names, ended))
        for fd in self._logs.values():
            with contextlib.suppress(OSError):
                self._append(fd, "end")
            os.close(fd)
        self._logs.clear()


@contextlib.contextmanager
def _flocked(fd: int, mode: int) -> Iterator[None]:
    fcntl.flock(fd, mode)  # held for a read or a write of a few lines; a dead holder's goes
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _read(fd: int, offset: int) -> tuple[list[tuple[str, Run]], int]:
    """The log's lines from ``offset`` (at most ``LOG_READ_LIMIT`` bytes of them, whole lines
    only), and the offset after them."""
    data = os.pread(fd, LOG_READ_LIMIT, offset)
    whole = data[: data.rfind(b"\n") + 1]
    lines = [parsed for raw in whole.splitlines() if (parsed := _parse(raw)) is not None]
    return lines, offset + len(whole)


def _alive_starts(lines: list[tuple[str, Run]]) -> set[Run]:
    """The runs whose start is in ``lines`` without their end, and whose process lives."""
    started: set[Run] = set()
    for event, run in lines:
        if event == "start":
            started.add(run)
        else:
            started.discard(run)
    return {run for run in started if run.alive}


@contextlib.contextmanager
def activity(names: Iterable[str]) -> Iterator[Activity]:
    """This process announced in the logs of devices ``names`` for the block."""
    use = Activity(names)
    try:
        yield use
    finally:
        use.close()
