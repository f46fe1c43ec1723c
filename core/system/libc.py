"""The C library calls modelmon makes through ctypes, declared once.

One handle of our own (``ctypes.CDLL(None)`` gives each caller a separate one, so these
prototypes touch no one else's): ``mmap`` returns a pointer and takes a 64-bit offset, and the
others take sizes, which ctypes would otherwise pass as C ints.
"""

from __future__ import annotations

import ctypes

LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
LIBC.mmap.restype = ctypes.c_void_p
LIBC.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int64,  # off_t on 64-bit Linux
]
LIBC.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
LIBC.fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
MAP_FAILED = ctypes.c_void_p(-1).value
