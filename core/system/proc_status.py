"""This process's own sizes from /proc/self/status (standard library only, so a worker or a
benchmark child pays nothing in imports or RSS for it).

``VmHWM`` is the process's own peak RSS. Not ``ru_maxrss``: Linux carries that across fork
and exec, so a spawned child would report its parent's peak (measured: 560 MiB for 48).
``own_peak_watch`` resets it, so that a run says its own parent's peak, not the process's
lifetime one (the app, a recommendation search, run many loads).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator


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


CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK = "5"  # clear_refs: set VmHWM to the current VmRSS (Linux 4.0)
_watching = 0  # watches running now in this process
_watch_lock = threading.Lock()
_reset_ok = False  # the last reset, by the first of the watches running now, took effect


@contextlib.contextmanager
def own_peak_watch() -> Iterator[Callable[[], int | None]]:
    """Within the block, a function that says this process's peak RSS since the block
    started (VmHWM, reset to VmRSS on entry; None where it could not be reset: a lifetime
    peak would belong to earlier work). Watches that overlap (ranks: several runs of one
    process at once) share the reset of the first: each sees the peak since then, which
    covers its own span."""
    global _watching, _reset_ok
    with _watch_lock:
        if _watching == 0:
            try:
                with open(CLEAR_REFS, "w") as refs:
                    refs.write(_RESET_PEAK)
                _reset_ok = True
            except OSError:
                _reset_ok = False
        _watching += 1
        reset = _reset_ok
    try:
        yield lambda: own_status_bytes("VmHWM:") if reset else None
    finally:
        with _watch_lock:
            _watching -= 1
