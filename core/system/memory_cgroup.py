"""A memory cgroup of a given size for one run: made, joined, measured and removed.

A run asked for ``--memory-limit`` happens inside a memory cgroup of that size, made beside
modelmon in its own memory cgroup (so any limit above it still applies), as a container's limit
would apply: the processes it starts are moved in (a load's workers, a watched command before
it runs), and every byte they allocate or bring into the page cache is charged to it. cgroup v1
(``memory.limit_in_bytes``, ``memory.max_usage_in_bytes``, ``memory.stat``'s rss/cache/
mapped_file, ``memory.oom_control``'s oom_kill) and v2 (``memory.max``, ``memory.peak``,
``memory.stat``'s anon/file/file_mapped, ``memory.events``' oom_kill, ``memory.pressure``).

Each cgroup is named ``modelmon-PID-START-N`` by the modelmon process that made it (its pid and
start time, so a reused pid is not taken for it): it is removed on every way out modelmon sees
(the block's end, an exception, Ctrl+C and SIGTERM, which the CLI turns into one, atexit), and
where modelmon dies without one (``kill -9``), by the run's guardian (``cgroup_guardian``) once
nothing runs in it; one its guardian could not remove, by the next run made beside it.

Where one cannot be made (not root, no delegated cgroup, no memory controller), ``create``
raises ``CgroupUnavailable`` with the reason in a few words: the limit is then planned with
only (``memory_limit.planned_only``).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from modelmon.core.system.cgroup_guardian import cgroup_guardian, remove_stale, start_ticks
from modelmon.core.system.cgroups import cgroup_dirs
from modelmon.core.system.guardian import Guardian
from modelmon.core.system.memory_limit import MemoryLimit, planned_only
from modelmon.core.system.residency import PAGE_SIZE
from modelmon.core.system.storage import MOUNTINFO, parse_mountinfo, read_int, read_text

PREFIX = "modelmon-"
SAMPLE_S = 0.02  # between samples of the split: a load fills 100 MB in that time here
REMOVE_WAIT_S = 3.0  # how long the end waits for the cgroup's last processes to be gone
# v1 keys of memory.stat (hierarchical, then the cgroup's own), v2 keys: what each is.
V1_KEYS = {"anon": "rss", "file": "cache", "mapped": "mapped_file", "shmem": "shmem"}
V2_KEYS = {"anon": "anon", "file": "file", "mapped": "file_mapped", "shmem": "shmem"}
REFAULT = "workingset_refault_file"
_sequence = itertools.count()
_live: set[MemoryCgroup] = set()  # removed at exit if a block's end did not
_live_lock = threading.Lock()


class CgroupUnavailable(Exception):
    """No memory cgroup can be made here; the message says why in a few words."""


def stat_values(text: str | None) -> dict[str, int]:
    """memory.stat (or memory.events, oom_control) as {key: value}."""
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[key] = int(value)
    return values


def pressure_total_us(text: str | None) -> int | None:
    """The 'some' total (µs) of a PSI file; None without one."""
    for line in (text or "").splitlines():
        if line.startswith("some "):
            for word in line.split():
                if word.startswith("total="):
                    return int(word[6:])
    return None


def own_parent() -> tuple[Path, int]:
    """Where this process's run cgroups go: its own memory cgroup (v1), or for v2 the
    innermost one up the tree whose children get the memory controller (``+memory`` in its
    subtree_control, enabled where it is not and can be). CgroupUnavailable otherwise."""
    mounts = parse_mountinfo(read_text(MOUNTINFO) or "")
    dirs = cgroup_dirs(mounts, read_text("/proc/self/cgroup") or "")
    if not dirs:
        raise CgroupUnavailable("no memory cgroup controller is mounted")
    leaf, version = dirs[0]
    if version == 1:
        return leaf, 1
    for directory, _ in dirs:
        if "memory" in (read_text(directory / "cgroup.subtree_control") or "").split():
            return directory, 2
    try:  # a cgroup without processes of its own (a delegated one) may enable it
        (leaf / "cgroup.subtree_control").write_text("+memory")
    except OSError as error:
        raise CgroupUnavailable(
            f"the memory controller is not delegated to {leaf} ({error.strerror})"
        ) from None
    return leaf, 2


def _write(path: Path, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


class MemoryCgroup:
    """One run's memory cgroup (``create`` makes it). ``add``/``join_in_child`` put processes
    in; ``start_sampling`` samples its split until ``record``; ``remove`` takes it away."""

    def __init__(self, directory: Path, version: int, limit: int) -> None:
        self.directory, self.version, self.limit = directory, version, limit
        self.anon_peak = self.file_peak = self.mapped_peak = self.usage_peak = 0
        # Anonymous memory and shared memory (a one-reader's copy) at once: what reclaim
        # cannot free, the least a limit must leave the run.
        self.held_peak = 0
        self.at_peak = (0, 0)  # (anon, file) at the highest charge sampled
        self.samples: list[tuple[int, int, int, int]] = []  # (ns, usage, anon, file)
        self._refaults_before = self._refaults()
        self._pressure_before = self._pressure()
        self._stop = threading.Event()
        self._sampler: threading.Thread | None = None
        self._child_fd: int | None = None  # cgroup.procs, open for a child to join by
        self._guardian: Guardian | None = None  # removes it if this process dies first
        self.removed = False

    # --- making and joining ----------------------------------------------------------------

    @classmethod
    def create(cls, limit: int, parent: tuple[Path, int] | None = None) -> MemoryCgroup:
        """A new cgroup of ``limit`` bytes (swap off for it, as in a pod); stale ones of dead
        modelmon processes in the same place are removed first."""
        base, version = parent if parent is not None else own_parent()
        remove_stale(base)
        pid = os.getpid()
        name = f"{PREFIX}{pid}-{start_ticks(pid) or 0}-{next(_sequence)}"
        directory = base / name
        try:
            directory.mkdir()
        except OSError as error:
            why = (
                "not root, and no cgroup delegated to this user"
                if error.errno
                in (
                    errno.EACCES,
                    errno.EPERM,
                    errno.EROFS,
                )
                else error.strerror
            )
            raise CgroupUnavailable(f"cannot make a cgroup in {base}: {why}") from None
        made = cls(directory, version, limit)
        try:
            made._set_limit(limit)
        except OSError as error:
            made.remove()
            raise CgroupUnavailable(f"cannot set {directory}'s limit: {error.strerror}") from None
        with _live_lock:
            _live.add(made)
        return made

    def guard(self) -> None:
        """Start the guardian that removes the cgroup at once should this process die
        without removing it (SIGKILL); before any process is moved in."""
        if self._guardian is None:
            self._guardian = cgroup_guardian(self.directory)

    def _set_limit(self, limit: int) -> None:
        if self.version == 1:
            _write(self.directory / "memory.limit_in_bytes", str(limit))
            swap = self.directory / "memory.memsw.limit_in_bytes"  # memory + swap: no swap
            if swap.exists():
                _write(swap, str(limit))
            return
        _write(self.directory / "memory.max", str(limit))
        swap = self.directory / "memory.swap.max"
        if swap.exists():
            _write(swap, "0")

    @property
    def procs(self) -> Path:
        return self.directory / "cgroup.procs"

    def add(self, pid: int) -> None:
        """Move process ``pid`` in (what it allocates from now on is charged here); one
        already gone is nothing to move."""
        with contextlib.suppress(ProcessLookupError):
            _write(self.procs, str(pid))

    def join_in_child(self) -> Callable[[], None]:
        """A ``preexec_fn`` part: the child moves itself in before it runs its program. The
        file is opened here, so the child only writes (no allocation after fork)."""
        descriptor = os.open(self.procs, os.O_WRONLY | os.O_CLOEXEC)
        self._child_fd = descriptor

        def join() -> None:
            os.write(descriptor, b"0")  # 0: the writing process

        return join

    def child_started(self) -> None:
        """The child that ``join_in_child`` prepared has started (or failed to)."""
        if self._child_fd is not None:
            os.close(self._child_fd)
            self._child_fd = None

    def pids(self) -> list[int]:
        return [int(word) for word in (read_text(self.procs) or "").split() if word.isdigit()]

    # --- measuring ---------------------------------------------------------------------------

    def _stat(self) -> dict[str, int]:
        return stat_values(read_text(self.directory / "memory.stat"))

    def _split(self, stat: dict[str, int]) -> dict[str, int]:
        if self.version == 2:
            return {what: stat.get(key, 0) for what, key in V2_KEYS.items()}
        return {what: stat.get(f"total_{key}", stat.get(key, 0)) for what, key in V1_KEYS.items()}

    def _usage(self) -> int:
        name = "memory.usage_in_bytes" if self.version == 1 else "memory.current"
        return read_int(self.directory / name) or 0

    def _refaults(self) -> int:
        stat = self._stat()
        return stat.get(f"total_{REFAULT}", stat.get(REFAULT, 0))

    def reread_bytes(self) -> int:
        """Pages read again after reclaim dropped them, since the cgroup was made (its
        refaults): a load that keeps doing it thrashes."""
        return max(0, self._refaults() - self._refaults_before) * PAGE_SIZE

    def _pressure(self) -> int | None:
        return pressure_total_us(read_text(self.directory / "memory.pressure"))

    def charge(self) -> tuple[int, int, int]:
        """(charged, anonymous, page cache) bytes now."""
        split = self._split(self._stat())
        return self._usage(), split["anon"], split["file"]

    def sample(self) -> None:
        """One look at the charge and its split; the peaks follow."""
        split, usage = self._split(self._stat()), self._usage()
        self.anon_peak = max(self.anon_peak, split["anon"])
        self.file_peak = max(self.file_peak, split["file"])
        self.mapped_peak = max(self.mapped_peak, split["mapped"])
        self.held_peak = max(self.held_peak, split["anon"] + split["shmem"])
        if usage >= self.usage_peak:
            self.usage_peak, self.at_peak = usage, (split["anon"], split["file"])
        self.samples.append((time.monotonic_ns(), usage, split["anon"], split["file"]))

    def start_sampling(self) -> None:
        def run() -> None:
            while not self._stop.wait(SAMPLE_S):
                self.sample()

        self.sample()
        self._sampler = threading.Thread(target=run, name="modelmon-cgroup-sampler", daemon=True)
        self._sampler.start()

    def stop_sampling(self) -> None:
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join()
            self._sampler = None

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        return stat_values(read_text(self.directory / name)).get("oom_kill", 0)

    def limit_hits(self) -> int | None:
        """Times the charge met the limit (v2's memory.events max); None on v1, whose
        memory.failcnt recent kernels leave at 0 even when the limit is met."""
        if self.version == 1:
            return None
        events = stat_values(read_text(self.directory / "memory.events"))
        return events.get("max")

    def kernel_peak(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        return read_int(self.directory / name)

    def record(self, arrived_beyond: int = 0) -> MemoryLimit:
        """What the run did in the cgroup so far (the sampling stopped first).
        ``arrived_beyond``: bytes of the model that arrived beyond its size, where the
        caller watched the arrivals (a re-read the refault count may miss)."""
        self.stop_sampling()
        if not self.removed:
            self.sample()
        refaults = max(0, self._refaults() - self._refaults_before) * PAGE_SIZE
        now, before = self._pressure(), self._pressure_before
        stall = (now - before) / 1e6 if now is not None and before is not None else None
        kills = self.oom_kills()
        return MemoryLimit(
            limit_bytes=self.limit,
            peak_bytes=max(self.kernel_peak() or 0, self.usage_peak),
            anon_peak_bytes=self.anon_peak,
            cache_peak_bytes=self.file_peak,
            mapped_peak_bytes=self.mapped_peak,
            held_peak_bytes=self.held_peak,
            anon_at_peak_bytes=self.at_peak[0],
            cache_at_peak_bytes=self.at_peak[1],
            reread_bytes=max(refaults, arrived_beyond),
            oom_killed=kills > 0,
            oom_kills=kills,
            limit_hits=self.limit_hits(),
            pressure_stall_s=stall,
            cgroup=str(self.directory),
            version=self.version,
        )

    # --- removing ----------------------------------------------------------------------------

    def remove(self, wait_s: float = REMOVE_WAIT_S) -> bool:
        """Take the cgroup away once its processes are gone (waiting ``wait_s`` for the last
        to exit); its page cache goes on charged to the cgroup above. False when processes
        still run in it: it is left for exit, or once this process is gone its guardian, to
        remove."""
        self.stop_sampling()
        self.child_started()
        deadline = time.monotonic() + wait_s
        while not self.removed:
            try:
                self.directory.rmdir()
                self.removed = True
            except FileNotFoundError:
                self.removed = True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
        with _live_lock:
            _live.discard(self)
        if self._guardian is not None:  # it finds nothing to remove, and ends
            self._guardian.release()
            self._guardian = None
        return True


def _remove_live() -> None:
    with _live_lock:
        live = list(_live)
    for cgroup in live:
        cgroup.remove(wait_s=0.5)


atexit.register(_remove_live)


@contextlib.contextmanager
def limited(limit: int | None) -> Iterator[MemoryCgroup | str | None]:
    """For the block: a sampled cgroup of ``limit`` bytes (removed at its end, however it
    ends), the reason one cannot be made (a string), or None without a limit."""
    if limit is None:
        yield None
        return
    reason: str | None = None
    try:
        cgroup = MemoryCgroup.create(limit)
    except CgroupUnavailable as refused:
        reason = str(refused)
    if reason is not None:  # yielded outside the except: the block's errors chain to nothing
        yield reason
        return
    try:
        cgroup.guard()
        cgroup.start_sampling()
        yield cgroup
    finally:
        cgroup.remove()


def limit_unavailable(limit: int) -> str | None:
    """The one line a front end says before a run asked for ``limit`` when no cgroup can be
    made here (the limit is then planned with only); None when it can."""
    reason = unavailable()
    return planned_only(reason, limit) if reason is not None else None


def unavailable() -> str | None:
    """Why a memory cgroup cannot be made here (a test one is made and removed); None if it
    can. The CLI says this once, before a run, when a limit is asked for."""
    try:
        MemoryCgroup.create(64 << 20).remove()
    except CgroupUnavailable as reason:
        return str(reason)
    return None
