"""Waiting for a descriptor to become readable, whatever its number.

``select`` takes descriptors below 1024 only (FD_SETSIZE): a process that holds many files
open (a watch of a sharded model, a loader with thousands of shards) gets pidfds and pipes
above that, and ``select`` raises on them. ``poll`` has no such limit.
"""

from __future__ import annotations

import select


def wait_readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` is readable (or at its end, or failed: a read then says which) within
    ``timeout_s`` seconds."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(max(0, round(timeout_s * 1000))))
