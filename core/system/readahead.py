"""The device's readahead as a knob of a run: found, set for the run, always put back.

A block device keeps it in ``/sys/block/<disk>/queue/read_ahead_kb``; NFS and FUSE mounts in
their backing device's ``/sys/class/bdi/<major:minor>/read_ahead_kb``. ``for_run`` sets it
for one run and restores the previous value on every way out: the end of the block (normal
end, cancel, a worker crash, Ctrl+C), SIGTERM and SIGHUP (handlers, where this is the main
thread) and interpreter exit.

One lock per device for the whole machine (``device_use``: ``/run/lock``, whoever runs, with
whatever HOME): a run that changes the value holds it exclusively, any other run shares it;
so the value never changes under another modelmon run on that device, and two runs never
both change it (each would put back what the other set).

A run that dies harder (kill -9, the OOM killer, power) cannot restore: it leaves a restore
record, written before the value changes and removed once it is back, that the next run of
the same user applies (``recover``) once no run uses the device, and only if the device
still has the value the dead run set (anything else was set since, on purpose). A record
says which file to write what into, so it is trusted only from where no one else can write:
this user's own directory, ``/run/modelmon/readahead`` for root (per boot, like the values
themselves, and the same for every HOME a root process may have), else
``$XDG_STATE_HOME/modelmon/readahead``, or ``$MODELMON_RECORD_DIR``. A record is applied only
if that directory and the record are this user's and no one else's to write, it names a
``read_ahead_kb`` file of /sys, and it was written since this boot. By hand, after a kill -9:
the record (JSON) holds the ``previous`` value and the ``sysfs`` file to write it to.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from modelmon.core.errors import ReadaheadError
from modelmon.core.system import device_use
from modelmon.core.system import readahead_records as records
from modelmon.core.system.guardian import Guardian
from modelmon.core.system.readahead_guardian import readahead_guardian
from modelmon.core.system.storage import SYS_BDI, SYS_BLOCK, read_int, storage_facts

SECTOR = 512  # blockdev --setra counts 512-byte sectors
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)  # restored before either ends the process


@dataclass(frozen=True, slots=True)
class ReadaheadKnob:
    """Where one device's readahead lives, and how to make a value permanent."""

    sysfs: str  # the file holding the value in KiB
    device: str  # "vda", or "0:53" for a backing device
    kind: Literal["block", "bdi"]
    fs_type: str
    mount_point: str

    @property
    def lock_name(self) -> str:
        return ("block-" if self.kind == "block" else "bdi-") + self.device.replace(":", "_")

    def read_kb(self) -> int:
        value = read_int(self.sysfs)
        if value is None:
            raise ReadaheadError(f"cannot read {self.sysfs}")
        return value

    def unavailable(self) -> str | None:
        """Why the value cannot be set here, or None."""
        if not os.access(self.sysfs, os.W_OK):
            return f"readahead of {self.device} cannot be set: no write access to {self.sysfs}"
        return None

    def permanent(self, kb: int) -> tuple[str, ...]:
        """Commands that keep ``kb`` beyond this boot or mount (first: for now; then: for good)."""
        if self.kind == "block":
            return (
                f"sudo blockdev --setra {kb * 1024 // SECTOR} /dev/{self.device}",
                f'echo \'ACTION=="add|change", KERNEL=="{self.device}", '
                f'ATTR{{queue/read_ahead_kb}}="{kb}"\' '
                "| sudo tee /etc/udev/rules.d/60-modelmon-readahead.rules",
            )
        write = f"echo {kb} | sudo tee {self.sysfs}"
        if self.fs_type.startswith("fuse"):
            return (
                write,
                f"mount option max_readahead={kb * 1024} (rclone mount: --max-read-ahead "
                f"{kb}Ki); the bdi value resets when {self.mount_point} is mounted again",
            )
        return (
            write,
            f"the bdi value resets when {self.mount_point} is mounted again: run the first "
            'line after mounting (e.g. a udev rule on SUBSYSTEM=="bdi")',
        )


def locate(path: str | os.PathLike[str]) -> ReadaheadKnob | None:
    """The readahead knob of the device holding ``path``; None when it has none (tmpfs...)."""
    facts = storage_facts(path)
    if facts.block_device is not None:
        sysfs = Path(SYS_BLOCK) / facts.block_device / "queue" / "read_ahead_kb"
        kind: Literal["block", "bdi"] = "block"
        device = facts.block_device
    else:
        st_dev = os.stat(facts.path).st_dev
        device = f"{os.major(st_dev)}:{os.minor(st_dev)}"
        sysfs = Path(SYS_BDI) / device / "read_ahead_kb"
        kind = "bdi"
    if read_int(sysfs) is None:
        return None
    return ReadaheadKnob(str(sysfs), device, kind, facts.fs_type, facts.mount_point)


def knobs_of(paths: Iterable[str | os.PathLike[str]]) -> list[ReadaheadKnob]:
    """The distinct knobs of ``paths`` (a sharded model may span devices), in order."""
    found: dict[str, ReadaheadKnob] = {}
    devices: set[int] = set()
    for path in paths:
        device = os.stat(path).st_dev
        if device in devices:  # shards on one filesystem: one knob, looked up once
            continue
        devices.add(device)
        knob = locate(path)
        if knob is not None:
            found.setdefault(knob.sysfs, knob)
    return list(found.values())


def unavailable(paths: Iterable[str | os.PathLike[str]]) -> str | None:
    """Why readahead cannot be set for a model with these files here, or None (one line)."""
    listed = list(paths)
    knobs = knobs_of(listed)
    if not knobs:
        where = os.fspath(listed[0]) if listed else "the model"
        return f"{where} is on storage without a readahead setting"
    return next((reason for knob in knobs if (reason := knob.unavailable())), None)


def _write(sysfs: str, kb: int) -> None:
    with open(sysfs, "w") as handle:
        handle.write(str(kb))


# --- held locks and the restore on every way out ----------------------------------------------


@dataclass
class _Held:
    knob: ReadaheadKnob
    lock_fd: int
    previous: int | None  # None: shared, nothing changed


_held: list[_Held] = []
_held_lock = threading.RLock()  # re-entrant: a stop signal's handler may interrupt its owner
_atexit_registered = False


def _restore(held: _Held) -> None:
    if held.previous is not None:
        with contextlib.suppress(OSError):
            _write(held.knob.sysfs, held.previous)
            records.remove(held.knob.lock_name)
        held.previous = None


def _release(held: _Held) -> None:
    _restore(held)
    with contextlib.suppress(OSError):
        os.close(held.lock_fd)  # closing drops the flock


def restore_all() -> None:
    """Put back every value this process changed (safe to call twice, from a handler too)."""
    with _held_lock:
        for held in _held:
            _restore(held)


def _on_stop_signal(previous: Any) -> Any:
    def handler(signum: int, frame: FrameType | None) -> None:
        restore_all()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # end as the signal would have ended us

    return handler


def recover() -> list[str]:
    """Apply this user's restore records of runs that died with a value changed; what was
    done. A record is applied once no run uses its device (its machine-wide lock can be taken
    exclusively), and only if the device still has the value that run set."""
    done: list[str] = []
    for name in records.names():
        try:
            lock_fd = device_use.open_lock(name)
        except OSError:
            continue
        try:
            if not device_use.take(lock_fd, fcntl.LOCK_EX):
                continue  # in use: its owner may be alive, and nothing changes under a run
            record = records.read(name)
            if record is not None and read_int(record.sysfs) == record.set_kb:
                _write(record.sysfs, record.previous)
                done.append(
                    f"restored readahead {record.previous} KiB at {record.sysfs} (a run had died)"
                )
            records.remove(name)
        except OSError:
            continue
        finally:
            os.close(lock_fd)
    return done


def device_names(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The lock names of the devices holding ``paths``: what ``device_use`` knows them by."""
    return [knob.lock_name for knob in knobs_of(paths)]


@contextlib.contextmanager
def for_run(paths: Iterable[str | os.PathLike[str]], kb: int | None) -> Iterator[list[str]]:
    """Readahead ``kb`` KiB on the devices of ``paths`` for the block; None: leave it, only
    share the device locks. Yields notes (records applied, values set). Raises
    ReadaheadError (one line) before changing anything when the value can't be set."""
    global _atexit_registered
    notes = recover()
    listed = list(paths)
    knobs = knobs_of(listed)
    if kb is not None:
        reason = unavailable(listed) or records.unusable()
        if reason is not None:
            raise ReadaheadError(reason)
    acquired: list[_Held] = []
    previous_handlers: dict[signal.Signals, Any] = {}
    guardian: Guardian | None = None
    try:
        for knob in knobs:
            try:
                lock_fd = device_use.open_lock(knob.lock_name)
            except OSError as exc:
                if kb is None:
                    continue  # a plain run goes on without the shared lock
                raise ReadaheadError(
                    f"cannot open the readahead lock: {exc.strerror or exc}"
                ) from None
            held = _Held(knob, lock_fd, None)
            acquired.append(held)
            if not device_use.take(lock_fd, fcntl.LOCK_EX if kb is not None else fcntl.LOCK_SH):
                if kb is None:
                    continue  # another run changes it: this one only reads
                raise ReadaheadError(
                    f"readahead of {knob.device} not changed: another modelmon run is using it"
                )
        if kb is not None:
            if threading.current_thread() is threading.main_thread():
                for number in STOP_SIGNALS:
                    handler = _on_stop_signal(signal.getsignal(number))
                    previous_handlers[number] = signal.signal(number, handler)
            if not _atexit_registered:
                atexit.register(restore_all)
                _atexit_registered = True
            # Started before any value changes: a SIGKILL from here on is put right at once.
            guardian = readahead_guardian([held.knob.lock_name for held in acquired])
            for held in acquired:
                current = held.knob.read_kb()
                record = records.Record(held.knob.sysfs, current, kb)
                try:
                    records.write(held.knob.lock_name, record)
                except OSError as exc:
                    raise ReadaheadError(
                        f"readahead of {held.knob.device} not changed: its restore record "
                        f"could not be written ({exc.strerror or exc})"
                    ) from None
                with _held_lock:
                    held.previous = current
                    _held.append(held)
                try:
                    _write(held.knob.sysfs, kb)
                except OSError as exc:
                    raise ReadaheadError(
                        f"readahead of {held.knob.device} could not be set: {exc.strerror or exc}"
                    ) from None
                notes.append(f"readahead of {held.knob.device} set to {kb} KiB (was {current})")
        yield notes
    finally:
        with _held_lock:
            for held in acquired:
                _release(held)
                if held in _held:
                    _held.remove(held)
        if guardian is not None:
            guardian.release()
        for number, handler in previous_handlers.items():
            signal.signal(number, handler)
