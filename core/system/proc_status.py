"""This process's own sizes from /proc/self/status (standard library only, so a worker or a
benchmark child pays nothing in imports or RSS for it).

``VmHWM`` is the process's own peak RSS. Not ``ru_maxrss``: Linux carries that across fork
and exec, so a spawned child would report its parent's peak (measured: 560 MiB for 48).
"""

from __future__ import annotations


def own_status_bytes(field: str) -> int | None:
    """A size line of /proc/self/status (``"VmHWM:"``, ``"VmRSS:"``) in bytes; None when the
    file or the line is not there or cannot be read."""
    key = field.encode()
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
