"""Which processes opened and closed given files, from the kernel (fanotify).

A process that opens a shard, reads it and closes it between two looks at /proc leaves no
descriptor to be seen; the kernel's events name it whenever it happens. Opens and closes
only: an access event would be made (and merged) on every read call of the loader watched,
a cost on its own reading of the model that an open's is not. The group
reports files by handle (``FAN_REPORT_FID``): the kernel opens nothing on the listener's
behalf, which on FUSE or NFS would be one more open sent to the mount's server per event.

It needs CAP_SYS_ADMIN (an unprivileged group is not told the pids of other users'
processes, nor of its own children reliably): without it, or on a filesystem that cannot
give a file handle, ``FileAccess.open`` gives None and a file is not marked, and the watch
sees readers by its looks alone.
"""

from __future__ import annotations

import ctypes
import os
import struct

from modelmon.core.system.libc import LIBC

FAN_CLASS_NOTIF = 0x0
FAN_CLOEXEC = 0x1
FAN_NONBLOCK = 0x2
FAN_REPORT_FID = 0x200
FAN_CLOSE_NOWRITE = 0x10
FAN_OPEN = 0x20
FAN_Q_OVERFLOW = 0x4000
FAN_MARK_ADD = 0x1
FAN_EVENT_INFO_TYPE_FID = 1
AT_FDCWD = -100
MAX_HANDLE_SZ = 128
METADATA = struct.Struct("=IBBHQii")  # struct fanotify_event_metadata
INFO_HEADER = struct.Struct("=BBH")  # struct fanotify_event_info_header
FSID = 8  # __kernel_fsid_t
HANDLE_HEADER = struct.Struct("=Ii")  # struct file_handle: handle_bytes, handle_type
READ_BYTES = 64 << 10

LIBC.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
LIBC.fanotify_mark.argtypes = [
    ctypes.c_int,
    ctypes.c_uint,
    ctypes.c_uint64,
    ctypes.c_int,
    ctypes.c_char_p,
]
LIBC.name_to_handle_at.argtypes = [
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_int,
]


class _FileHandle(ctypes.Structure):
    _fields_ = [
        ("handle_bytes", ctypes.c_uint),
        ("handle_type", ctypes.c_int),
        ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ),
    ]


def file_handle(path: str) -> bytes | None:
    """The file's handle as the kernel names it in an event (type and bytes); None where
    its filesystem has none."""
    handle = _FileHandle(handle_bytes=MAX_HANDLE_SZ)
    mount_id = ctypes.c_int()
    if LIBC.name_to_handle_at(AT_FDCWD, os.fsencode(path), ctypes.byref(handle), mount_id, 0):
        return None
    size = handle.handle_bytes
    return HANDLE_HEADER.pack(size, handle.handle_type) + bytes(handle.f_handle[:size])


class FileAccess:
    """A fanotify group with files marked; ``take`` says who opened and closed which since."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._by_handle: dict[bytes, int] = {}
        self.overflowed = False  # the kernel's queue filled: some events were lost

    @classmethod
    def open(cls) -> FileAccess | None:
        fd = LIBC.fanotify_init(
            FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_NONBLOCK | FAN_REPORT_FID, os.O_RDONLY
        )
        return cls(fd) if fd >= 0 else None

    def mark(self, path: str, key: int) -> bool:
        """Hear about ``path`` (events on it are told as ``key``); False where it cannot be."""
        handle = file_handle(path)
        if handle is None or self.fd < 0:
            return False
        if LIBC.fanotify_mark(
            self.fd, FAN_MARK_ADD, FAN_OPEN | FAN_CLOSE_NOWRITE, AT_FDCWD, os.fsencode(path)
        ):
            return False
        self._by_handle[handle] = key
        return True

    def take(self) -> dict[int, dict[int, int]]:
        """{pid: {the key of a file: FAN_OPEN and/or FAN_CLOSE_NOWRITE}} since the last call
        (both: the kernel folds a process's events on one file while none was read)."""
        found: dict[int, dict[int, int]] = {}
        while self.fd >= 0:
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError:
                break
            if not data:
                break
            self._parse(data, found)
        return found

    def _parse(self, data: bytes, found: dict[int, dict[int, int]]) -> None:
        offset = 0
        while offset + METADATA.size <= len(data):
            length, _version, _, metadata_length, mask, _fd, pid = METADATA.unpack_from(
                data, offset
            )
            if length < METADATA.size:
                return
            if mask & FAN_Q_OVERFLOW:
                self.overflowed = True
            key = self._key(data[offset + metadata_length : offset + length])
            if key is not None and pid > 0:
                files = found.setdefault(pid, {})
                files[key] = files.get(key, 0) | (mask & (FAN_OPEN | FAN_CLOSE_NOWRITE))
            offset += length

    def _key(self, info: bytes) -> int | None:
        offset = 0
        while offset + INFO_HEADER.size <= len(info):
            kind, _, length = INFO_HEADER.unpack_from(info, offset)
            if length < INFO_HEADER.size:
                return None
            if kind == FAN_EVENT_INFO_TYPE_FID:
                start = offset + INFO_HEADER.size + FSID
                size, _type = HANDLE_HEADER.unpack_from(info, start)
                handle = info[start : start + HANDLE_HEADER.size + size]
                return self._by_handle.get(handle)
            offset += length
        return None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
