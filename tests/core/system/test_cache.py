"""Page-cache measurement and control on a real disk file (tmp_path is on ext4 here)."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import math
import mmap
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from modelmon.core.errors import OptionsError
from modelmon.core.system import cache, residency
from modelmon.core.system.storage import storage_facts

PAGE = residency.PAGE_SIZE
MIB = 1 << 20
FILE_BYTES = 64 * MIB
METHODS = ("cachestat", "mincore")


@pytest.fixture(scope="module")
def fadvise_works(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Skip when the test filesystem cannot drop pages (tmpfs, FUSE, network, odd overlay)."""
    directory = tmp_path_factory.mktemp("probe")
    facts = storage_facts(directory)
    if facts.fs_type in ("tmpfs", "ramfs") or facts.is_fuse or facts.is_network:
        pytest.skip(f"fadvise(DONTNEED) has no effect on {facts.fs_type}")
    probe = directory / "probe.bin"
    probe.write_bytes(os.urandom(MIB))
    fd = os.open(probe, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if residency.residency(probe).fraction > cache.COLD_THRESHOLD:
        pytest.skip(f"fadvise(DONTNEED) does not drop pages on {facts.fs_type} here")


def write_file(path: Path, size: int) -> Path:
    block = os.urandom(MIB)
    with open(path, "wb") as out:
        for offset in range(0, size, MIB):
            out.write(block[: min(MIB, size - offset)])
    return path


@pytest.fixture
def model_file(tmp_path: Path, fadvise_works: None) -> Path:
    path = write_file(tmp_path / "model.bin", FILE_BYTES)
    assert cache.evict([path]) <= cache.COLD_THRESHOLD
    return path


def read_range(path: Path, start: int, length: int) -> None:
    """Read exactly these bytes: FADV_RANDOM stops readahead from caching the pages beyond."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        position = start
        while position < start + length:
            chunk = os.pread(fd, min(MIB, start + length - position), position)
            assert chunk
            position += len(chunk)
    finally:
        os.close(fd)


@contextlib.contextmanager
def mapped(path: Path, length: int) -> Iterator[None]:
    """The first ``length`` bytes mapped and each page touched while the block runs: this
    machine's proactive reclaim (a DAMON pageout scheme) takes idle *unmapped* file pages,
    and may take some just read before they are measured. MADV_RANDOM: a page it took
    before the touch comes back alone, with no readahead past it."""
    with (
        open(path, "rb") as handle,
        mmap.mmap(handle.fileno(), length, prot=mmap.PROT_READ) as view,
    ):
        view.madvise(mmap.MADV_RANDOM)
        for offset in range(0, length, PAGE):
            view[offset]
        yield


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# --- measuring ---------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_a_read_file_is_resident(model_file: Path, method: residency.Method) -> None:
    read_range(model_file, 0, FILE_BYTES)
    found = residency.residency(model_file, method)
    assert found.method == method
    assert found.total_pages == FILE_BYTES // PAGE
    assert found.fraction >= 0.99


@pytest.mark.parametrize("method", METHODS)
def test_an_evicted_file_is_cold(model_file: Path, method: residency.Method) -> None:
    read_range(model_file, 0, FILE_BYTES)
    assert cache.evict([model_file]) <= cache.COLD_THRESHOLD
    assert residency.residency(model_file, method).fraction <= cache.COLD_THRESHOLD


def test_both_methods_agree_on_a_patchy_file(model_file: Path) -> None:
    for start in range(0, FILE_BYTES, 4 * MIB):  # one MiB in four
        read_range(model_file, start, MIB)
    by_cachestat = residency.residency(model_file, "cachestat")
    by_mincore = residency.residency(model_file, "mincore")
    assert abs(by_cachestat.cached_pages - by_mincore.cached_pages) <= 2
    assert 0.2 <= by_mincore.fraction <= 0.3


def test_mincore_windows_give_the_same_count(model_file: Path) -> None:
    # Several window sizes, one not a page multiple, so every window edge case runs.
    windows = (MIB, 7 * PAGE + 123, 5 * MIB)
    for _ in range(5):
        read_range(model_file, 3 * MIB, 10 * MIB + 5 * PAGE)
        whole = residency.residency(model_file, "mincore").cached_pages
        counts = [
            residency.residency(model_file, "mincore", window_bytes=w).cached_pages for w in windows
        ]
        # The kernel may reclaim pages between measurements (this VM runs DAMON reclaim):
        # compare only a snapshot that stayed still while it was taken.
        if residency.residency(model_file, "mincore").cached_pages == whole:
            break
    assert counts == [whole] * len(windows)
    assert abs(whole - (10 * MIB + 5 * PAGE) // PAGE) <= 2


@pytest.mark.parametrize("method", METHODS)
def test_residency_map_shows_the_read_half(model_file: Path, method: residency.Method) -> None:
    read_range(model_file, 0, FILE_BYTES // 2)
    with mapped(model_file, FILE_BYTES // 2):
        strip = residency.residency_map(model_file, 64, method, window_bytes=3 * MIB)
    assert strip.dtype == np.float32 and strip.shape == (64,)
    assert strip[:32].min() >= 0.99
    assert strip[32:].max() <= 0.01


def test_residency_map_methods_agree_with_more_bins_than_pages(tmp_path: Path) -> None:
    path = write_file(tmp_path / "small.bin", 3 * PAGE + 10)  # 4 pages, in cache after writing
    for method in METHODS:
        strip = residency.residency_map(path, 16, method)
        assert strip.shape == (16,) and strip.min() == 1.0


def test_residency_of_weights_by_pages(tmp_path: Path, fadvise_works: None) -> None:
    big = write_file(tmp_path / "big.bin", 12 * MIB)
    small = write_file(tmp_path / "small.bin", 4 * MIB)
    cache.evict([big])
    read_range(small, 0, 4 * MIB)
    assert residency.residency_of([big, small]) == pytest.approx(0.25, abs=0.01)
    assert residency.measure([big, small]) == pytest.approx(0.25, abs=0.01)


def test_an_empty_file_has_no_pages(tmp_path: Path) -> None:
    path = tmp_path / "empty.bin"
    path.touch()
    for method in METHODS:
        found = residency.residency(path, method)
        assert (found.cached_pages, found.total_pages, found.fraction) == (0, 0, 0.0)
    assert residency.residency_map(path, 8).tolist() == [0.0] * 8
    assert residency.residency_of([path]) == 0.0


def test_missing_files_and_directories_raise(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        residency.residency(tmp_path / "nope.bin")
    with pytest.raises(FileNotFoundError):
        cache.evict([tmp_path / "nope.bin"])
    with pytest.raises(IsADirectoryError):
        residency.residency(tmp_path)
    with pytest.raises(OptionsError):
        residency.residency(tmp_path, "psychic")  # type: ignore[arg-type]
    with pytest.raises(OptionsError):
        residency.residency_map(tmp_path, 0)


def test_falls_back_to_mincore_without_cachestat(
    model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_such_syscall(*_: object) -> int:
        ctypes.set_errno(errno.ENOSYS)
        return -1

    monkeypatch.setattr(residency, "_cachestat_missing", False)
    monkeypatch.setattr(residency.LIBC, "syscall", no_such_syscall)
    read_range(model_file, 0, MIB)
    found = residency.residency(model_file)
    assert found.method == "mincore" and found.cached_pages == MIB // PAGE
    assert residency._cachestat_missing  # remembered: no second failed syscall per file
    with pytest.raises(OSError):
        residency.residency(model_file, "cachestat")
    assert cache.prepare([model_file], "keep").method == "mincore"


def test_falls_back_per_call_on_eperm(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_: object) -> int:  # what a seccomp filter answers
        ctypes.set_errno(errno.EPERM)
        return -1

    monkeypatch.setattr(residency, "_cachestat_missing", False)
    monkeypatch.setattr(residency.LIBC, "syscall", refused)
    read_range(model_file, 0, FILE_BYTES // 4)
    assert residency.residency(model_file).method == "mincore"
    assert cache.prepare([model_file], "keep").method == "mincore"
    strip = residency.residency_map(model_file, 4)
    assert strip[0] >= 0.99 and strip[1:].max() <= 0.01
    assert not residency._cachestat_missing
    with pytest.raises(OSError):
        residency.residency_map(model_file, 4, "cachestat")


# --- controlling -------------------------------------------------------------------------------


def test_warm_reads_everything(model_file: Path) -> None:
    assert cache.warm([model_file], chunk=3 * MIB + 1) >= cache.WARM_THRESHOLD
    for method in METHODS:
        assert residency.residency(model_file, method).fraction >= cache.WARM_THRESHOLD


def test_warm_obeys_stop(model_file: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert cache.warm([model_file], stop) <= cache.COLD_THRESHOLD
    state = cache.prepare([model_file], "warm", stop)
    assert not state.warm and "stopped" in state.note


def test_prepare_reaches_each_state(model_file: Path) -> None:
    warm = cache.prepare([model_file], "warm")
    assert (warm.requested, warm.warm, warm.cold, warm.note) == ("warm", True, False, "")
    kept = cache.prepare([model_file], "keep")
    assert kept.warm and kept.resident_before >= cache.WARM_THRESHOLD
    cold = cache.prepare([model_file], "cold")
    assert (cold.cold, cold.warm, cold.note) == (True, False, "")
    assert cold.resident_before <= cache.COLD_THRESHOLD
    assert cold.method in METHODS
    assert all(math.isnan(s.resident_after) for s in (warm, kept, cold))  # no load yet
    with pytest.raises(OptionsError):
        cache.prepare([model_file], "lukewarm")  # type: ignore[arg-type]


def test_mapped_pages_survive_eviction(model_file: Path) -> None:
    with (
        open(model_file, "rb") as handle,
        mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as mapping,
    ):
        touched = sum(mapping[offset] for offset in range(0, FILE_BYTES, PAGE))
        assert touched >= 0
        assert cache.evict([model_file]) >= 0.99
        state = cache.prepare([model_file], "cold")
        assert not state.cold
        assert state.resident_before > cache.COLD_THRESHOLD
        assert "mapped" in state.note and "this process" in state.note
    assert cache.evict([model_file]) <= cache.COLD_THRESHOLD  # unmapped: now it drops


def test_unverifiable_files_are_never_called_cold_or_warm_nor_given_a_fraction(
    model_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel hides a file's page cache (another user's file), what mincore or
    cachestat say is not its cache: the state is one statement, that it is not known."""
    cache.warm([model_file])  # all of it resident, as a running loader leaves it
    monkeypatch.setattr(cache, "hidden_reason", lambda path: f"cannot see {path}")
    for mode, done in (
        ("cold", "evicted, not verified cold: "),
        ("warm", "read in, not verified warm: "),
        ("keep", "not known: "),
    ):
        state = cache.prepare([model_file], mode)
        assert state.unseen and not state.cold and not state.warm, mode
        assert math.isnan(state.resident_before) and math.isnan(state.resident_after), mode
        assert state.note.startswith(done) and "cannot verify" in state.note, state.note


def test_tmpfs_cannot_be_made_cold() -> None:
    if not os.path.isdir("/dev/shm") or storage_facts("/dev/shm").fs_type != "tmpfs":
        pytest.skip("no tmpfs at /dev/shm")
    path = Path("/dev/shm") / f"modelmon-test-{os.getpid()}.bin"
    try:
        write_file(path, 4 * MIB)
        state = cache.prepare([path], "cold")
        assert not state.cold and "RAM" in state.note
    finally:
        path.unlink(missing_ok=True)


def test_nothing_leaks_an_fd(model_file: Path) -> None:
    before = open_fds()
    cache.prepare([model_file], "warm")
    residency.residency_map(model_file, 32, "mincore", window_bytes=MIB)
    residency.residency_map(model_file, 32, "cachestat")
    cache.prepare([model_file], "cold")
    with pytest.raises(FileNotFoundError):
        cache.prepare([model_file, model_file.with_name("gone.bin")], "cold")
    assert open_fds() == before
