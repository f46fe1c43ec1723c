"""This process's own sizes from /proc/self/status (standard library only, so a worker or a
benchmark child pays nothing in imports or RSS for it).

``VmHWM`` is the process's own peak RSS. Not ``ru_maxrss``: Linux carries that across fork
and exec, so a spawned child would report its parent's peak (measured: 560 MiB for 48).
``own_peak_watch`` resets it, so that a run says its own parent's peak, not the process's
lifetime one (the app, a recommendation search, run many loads). ``left_out_of_peak`` keeps
memory touched and given back inside it (priming free memory before a load) out of that
peak: the result says what was primed on its own line, and the peak is what the run held.
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
OOM_SCORE_ADJ = "/proc/self/oom_score_adj"


def raise_oom_score(adj: int) -> None:
    """Offer this process to the OOM killer before others of its cgroup (``adj`` of 1000 in
    ``oom_score_adj``'s units: a share of the memory it may use, added to its own); raising
    needs no privilege. Where /proc refuses it, nothing changes."""
    with contextlib.suppress(OSError), open(OOM_SCORE_ADJ, "w") as score:
        score.write(str(adj))


_RESET_PEAK = "5"  # clear_refs: set VmHWM to the current VmRSS (Linux 4.0)
_watching = 0  # watches running now in this process
_watch_lock = threading.Lock()
_reset_ok = False  # the last reset, by the first of the watches running now, took effect
# The peak before the last span left out of it (``left_out_of_peak``), since that reset.
_carried = 0
_resets = 0  # first watches' resets so far: a span a reset fell inside carries nothing


def _reset_peak() -> bool:
    try:
        with open(CLEAR_REFS, "w") as refs:
            refs.write(_RESET_PEAK)
    except OSError:
        return False
    return True


def _peak() -> int | None:
    """The running watches' peak: VmHWM since their reset, or what was carried past a span
    left out of it; None where a reset failed (a lifetime peak, or one with the span in it,
    would not be theirs)."""
    with _watch_lock:
        if not _reset_ok:
            return None
        carried = _carried
    now = own_status_bytes("VmHWM:")
    return None if now is None else max(now, carried)


@contextlib.contextmanager
def own_peak_watch() -> Iterator[Callable[[], int | None]]:
    """Within the block, a function that says this process's peak RSS since the block
    started (VmHWM, reset to VmRSS on entry; None where it could not be reset: a lifetime
    peak would belong to earlier work). Watches that overlap (ranks: several runs of one
    process at once) share the reset of the first: each sees the peak since then, which
    covers its own span."""
    global _watching, _reset_ok, _carried, _resets
    with _watch_lock:
        if _watching == 0:
            _reset_ok = _reset_peak()
            _carried, _resets = 0, _resets + 1
        _watching += 1
    try:
        yield _peak
    finally:
        with _watch_lock:
            _watching -= 1


@contextlib.contextmanager
def left_out_of_peak() -> Iterator[None]:
    """Memory this process touches and gives back within the block is left out of the
    running watches' peak: the peak so far is carried, and VmHWM is reset to VmRSS after the
    block. What another thread touched and gave back during the block is left out with it
    (the block is priming: nothing else of the run's runs then). Nothing to do where no
    watch runs."""
    global _reset_ok, _carried
    with _watch_lock:
        before, resets = own_status_bytes("VmHWM:"), _resets
    try:
        yield
    finally:
        with _watch_lock:
            if _watching and _reset_ok:
                if resets == _resets:  # else the watches began inside: nothing before is theirs
                    _carried = max(_carried, before or 0)
                _reset_ok = before is not None and _reset_peak()
