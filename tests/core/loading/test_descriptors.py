"""Every concurrent reader, process or thread, reads through its own open file description
(its own readahead state); only ``mmap-shared-fd`` shares one, on purpose.

kcmp(KCMP_FILE) tells whether two descriptors (of one process or of two) are the same open
file description: two ``open`` calls never are, ``dup`` and SCM_RIGHTS always are.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import threading
from pathlib import Path

import pytest

import modelmon.core
from modelmon.core.loading.messages import ReadBatch
from modelmon.core.loading.reads import descriptor_sharing
from modelmon.core.loading.runner import LoadRun
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions

KCMP_FILE = 0
SYS_KCMP = 312  # x86_64

pytestmark = pytest.mark.skipif(
    os.uname().machine != "x86_64", reason="kcmp syscall number is x86_64's"
)
LIBC = ctypes.CDLL(None, use_errno=True)


def same_description(pid_a: int, fd_a: int, pid_b: int, fd_b: int) -> bool:
    verdict = LIBC.syscall(SYS_KCMP, pid_a, pid_b, KCMP_FILE, fd_a, fd_b)
    if verdict < 0:
        raise OSError(ctypes.get_errno(), "kcmp")
    return verdict == 0


def descriptors_of(pid: int, path: str) -> list[tuple[int, int]]:
    """(pid, fd) of every descriptor ``pid`` has open on ``path``."""
    found = []
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == path:
                found.append((pid, int(name)))
        except OSError:
            continue  # closed meanwhile
    return found


def descriptions(descriptors: list[tuple[int, int]]) -> int:
    """How many distinct open file descriptions the descriptors point to."""
    distinct: list[tuple[int, int]] = []
    for pid, fd in descriptors:
        if not any(same_description(pid, fd, p, f) for p, f in distinct):
            distinct.append((pid, fd))
    return len(distinct)


@pytest.fixture(scope="module")
def big_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~120 MB in one file: thousands of small reads, so every reader is seen mid-load."""
    folder = tmp_path_factory.mktemp("descriptors")
    return write_safetensors_model(folder, layers=4, hidden=1024, vocab=4096, dtype="F16")


class WatchingStop:
    """A stop flag that is never set, and that looks at this process's descriptors each time a
    reader asks it (strategies ask before every read, from the reading thread).

    Each reading thread's first question waits until every reader has asked once: on a warm
    cache one thread may otherwise read the whole file before another opens it, and the test
    would see fewer readers than ran. The wait has a way out (a reader that never asks breaks
    the barrier after a while, and the count then says so)."""

    def __init__(self, path: str, readers: int) -> None:
        self.path = path
        self.most_seen = 0  # most descriptors on the file open at once
        self.most_descriptions = 0  # most distinct open file descriptions among them
        self.all_readers_in = threading.Barrier(readers, timeout=30)
        self.arrived: set[int] = set()
        self.lock = threading.Lock()

    def is_set(self) -> bool:
        me = threading.get_ident()
        with self.lock:
            first = me not in self.arrived
            self.arrived.add(me)
        if first:
            with contextlib.suppress(threading.BrokenBarrierError):
                self.all_readers_in.wait()
        with self.lock:
            open_now = descriptors_of(os.getpid(), self.path)
            if len(open_now) > self.most_seen:
                self.most_seen = len(open_now)
                self.most_descriptions = max(self.most_descriptions, descriptions(open_now))
        return False


@pytest.mark.parametrize(
    ("strategy", "readers", "expected"),
    [
        ("sequential", (1, 3), 3),
        ("sequential", (3, 1), 3),  # in-process workers are threads too
        ("pread", (1, 2), 2),
        ("direct", (1, 2), 2),
        ("mmap", (1, 2), 2),
        ("mmap-view", (1, 2), 2),
        ("mmap-view", (2, 1), 2),
        ("warmup", (1, 2), 2),
        ("mmap-shared-fd", (2, 2), 1),
    ],
)
def test_each_thread_of_core_load_reads_through_its_own_description(
    big_model: Path, strategy: str, readers: tuple[int, int], expected: int
) -> None:
    path = os.path.realpath(open_model(big_model).files[0].path)
    workers, threads = readers
    stop = WatchingStop(path, workers * threads)
    modelmon.core.load(
        big_model,
        strategy,
        workers=workers,
        threads=threads,
        chunk=64 << 10,
        discard=True,
        stop=stop,
    )
    # (Python's mmap keeps a dup of the descriptor it maps: more descriptors, same description.)
    assert stop.most_descriptions == expected


@pytest.mark.parametrize(
    ("strategy", "shared"),
    [("sequential", False), ("pread", False), ("mmap-view", False), ("mmap-shared-fd", True)],
)
def test_each_thread_of_each_worker_process_reads_through_its_own_description(
    big_model: Path, strategy: str, shared: bool
) -> None:
    path = os.path.realpath(open_model(big_model).files[0].path)
    seen: list[int] = []  # distinct descriptions across both workers, once all readers run

    def on_message(message: object) -> None:
        if seen or not isinstance(message, ReadBatch):
            return
        per_worker = [descriptors_of(run.ready[w].pid, path) for w in (0, 1)]
        everyone = list(itertools.chain(*per_worker))
        if shared:
            seen.append(descriptions(everyone))  # one shared description whenever we look
        elif all(len(found) == 2 for found in per_worker):  # both threads of both workers
            seen.append(descriptions(everyone))

    # No readahead (fadvise/madvise random) and small reads from a cold cache: seconds of
    # reading, so every reader is still mid-load when read batches arrive.
    options = LoadOptions(
        workers=2,
        threads=2,
        chunk=16 << 10,
        discard=True,
        cache="cold",
        fadvise="random",
        madvise="random",
    )
    run = LoadRun(big_model, strategy, options, on_message=on_message, time_limit_s=20)
    run.run()
    assert seen == [1 if shared else 4]


@pytest.mark.parametrize(
    ("strategy", "shared"), [("mmap-shared-fd", True), ("mmap", False), ("pread", False)]
)
def test_a_result_names_the_descriptor_sharing_its_read_log_shows(
    big_model: Path, strategy: str, shared: bool
) -> None:
    options = LoadOptions(workers=2, threads=2, chunk=1 << 20, discard=True, cache="keep")
    run = LoadRun(big_model, strategy, options)
    result = run.run()
    assert result.status == "ok"
    sharing = descriptor_sharing(run.reads.columns())
    assert sharing is not None
    # A worker's threads take work from one queue: on a warm cache a fast one may take all of
    # it before the other starts, so only the readers that read are counted.
    assert 1 <= sharing.readers <= 4
    if not shared:  # each its own
        assert result.descriptor_sharing is None
        assert sharing.descriptions == sharing.readers and sharing.most_sharing == 1
    else:  # every reader that read, of both workers, read through the one
        assert sharing.readers >= 2 and sharing.descriptions == 1
        assert sharing.most_sharing == sharing.readers
        assert result.descriptor_sharing == f"{sharing.readers} readers share 1 descriptor"
