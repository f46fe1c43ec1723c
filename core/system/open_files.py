"""The open-files limit (``RLIMIT_NOFILE``, ``ulimit -n``) a load needs.

A load of a model in thousands of shards keeps a descriptor per file and reader open at once:
more than a soft limit of 256 or 1024 allows. ``enough_open_files`` raises the soft limit to
the hard one for the load (worker processes inherit it), and puts it back when the last load
that needed it ends; where even the hard limit is too low, it refuses in one line with the
number needed, before anything starts.
"""

from __future__ import annotations

import ctypes
import resource
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from modelmon.core.errors import LoadError
from modelmon.core.system.libc import LIBC  # loaded here, not in a forked child

# What a process keeps open besides the model's files: the interpreter and its libraries,
# the pipes to and from the workers, the /proc and /sys files the samplers hold.
BASE_DESCRIPTORS = 64

_lock = threading.Lock()
_raised_by = 0  # loads running that needed the raised limit
_saved_soft: int | None = None  # the soft limit to put back when the last of them ends


def open_files_limit() -> tuple[int, int]:
    """(soft, hard) limit on open files; ``resource.RLIM_INFINITY`` for no limit."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


@contextmanager
def enough_open_files(needed: int, what: str) -> Iterator[None]:
    """Hold a soft open-files limit of at least ``needed`` while the block runs; LoadError
    (saying ``what`` needs it) when the hard limit does not allow that many."""
    global _raised_by, _saved_soft
    with _lock:
        soft, hard = open_files_limit()
        usual = soft if _saved_soft is None else _saved_soft  # the limit once no load runs
        if needed <= usual or usual == resource.RLIM_INFINITY:
            raising = False
        elif hard != resource.RLIM_INFINITY and needed > hard:
            raise LoadError(
                f"{what} keeps up to {needed} files open at once, past the open-files limit "
                f"({usual}, hard limit {hard}): raise it (ulimit -n {needed}) or use fewer threads"
            )
        else:
            raising = True
            if soft < needed:
                target = hard if hard != resource.RLIM_INFINITY else needed
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                except (OSError, ValueError) as exc:
                    raise LoadError(
                        f"{what} keeps up to {needed} files open at once, past the open-files "
                        f"limit ({soft}), which cannot be raised here ({exc}): "
                        f"ulimit -n {needed}"
                    ) from None
            if _raised_by == 0:
                _saved_soft = usual
            _raised_by += 1
    try:
        yield
    finally:
        if raising:
            with _lock:
                _raised_by -= 1
                if _raised_by == 0 and _saved_soft is not None:
                    _, hard_now = open_files_limit()
                    resource.setrlimit(resource.RLIMIT_NOFILE, (_saved_soft, hard_now))
                    _saved_soft = None


# A watch learns of model files as its program opens them and keeps a descriptor for each:
# it cannot count them ahead, so it holds the soft limit at the hard one, as Go programs do.
WATCH_OPEN_FILES_CAP = 1 << 20  # where the hard limit is unlimited: the kernel's default nr_open


@contextmanager
def watch_open_files() -> Iterator[None]:
    """The soft open-files limit at the hard one while a watch runs (its command keeps the
    limit it would have had: ``usual_open_files_in_child``)."""
    soft, hard = open_files_limit()
    if soft == resource.RLIM_INFINITY:
        yield
        return
    # Held through enough_open_files even where a load has raised it already: the limit is
    # put back only when the last of them ends.
    target = hard if hard != resource.RLIM_INFINITY else max(soft, WATCH_OPEN_FILES_CAP)
    with enough_open_files(target, "the watch"):
        yield


class _Rlimit(ctypes.Structure):
    _fields_ = [("soft", ctypes.c_ulong), ("hard", ctypes.c_ulong)]


_RLIMIT_NOFILE = int(resource.RLIMIT_NOFILE)


def usual_open_files_in_child(then: Callable[[], None]) -> Callable[[], None]:
    """A started command's ``preexec_fn``: the soft open-files limit the process had before
    any load or watch raised it, then ``then``. The structure and its pointer are made here,
    before the fork: the child only makes the system call."""
    with _lock:
        usual = _saved_soft
    if usual is None:
        return then
    limit = _Rlimit(usual, open_files_limit()[1])
    pointer = ctypes.pointer(limit)

    def in_child() -> None:
        LIBC.setrlimit(_RLIMIT_NOFILE, pointer)
        then()

    return in_child
