"""mmap-view: the tensors are views of a private mapping of the file, not copies; writing one
never reaches the file; every byte is still read and tracked; truncation is a LoadError."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

import modelmon.core
from modelmon.core.errors import LoadCancelled, LoadError
from modelmon.core.loading.runner import run_load
from modelmon.core.loading.strategies import mapped_view
from modelmon.core.loading.strategies.mapped_view import FileMapping, touch_every_byte
from modelmon.core.loading.worker import build_context
from modelmon.core.model.formats import open_model
from modelmon.core.model.synth import write_safetensors_model
from modelmon.core.options import LoadOptions

SMALL_CHUNK = 64 << 10  # several populate steps per tensor


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model of its own: these tests write to and truncate what they map."""
    return write_safetensors_model(tmp_path, layers=2, hidden=256, vocab=1024)


def test_arrays_equal_the_reference_read(sharded_model: Path) -> None:
    expected = modelmon.core.load(sharded_model, "pread")
    got = modelmon.core.load(sharded_model, "mmap-view", threads=3, chunk=SMALL_CHUNK)
    assert list(got) == list(expected)
    for name, array in expected.items():
        assert got[name].dtype == array.dtype and got[name].shape == array.shape, name
        assert got[name].tobytes() == array.tobytes(), name


def test_tensors_of_one_file_are_views_of_one_mapping(model: Path) -> None:
    parsed = open_model(model)
    got = modelmon.core.load(model, "mmap-view", threads=1, chunk=SMALL_CHUNK)
    extents = [e for e in parsed.extents if e.length > 0]
    first = got[extents[0].name]
    assert not first.flags.owndata  # numpy owns none of it: the mapping does
    for extent in extents[1:]:
        array = got[extent.name]
        assert not array.flags.owndata
        # Laid out exactly as in the file: the same mapping, no copy.
        distance = array.ctypes.data - first.ctypes.data
        assert distance == extent.offset - extents[0].offset, extent.name


def test_writing_an_array_copies_on_write_and_leaves_the_file_alone(model: Path) -> None:
    before = model.read_bytes()
    got = modelmon.core.load(model, "mmap-view", threads=2)
    name, array = max(got.items(), key=lambda item: item[1].nbytes)
    original = array.copy()
    assert array.flags.writeable
    array.view(np.uint8)[:] ^= 0xFF
    assert model.read_bytes() == before
    again = modelmon.core.load(model, "mmap-view")
    assert again[name].tobytes() == original.tobytes()
    assert array.tobytes() != original.tobytes()


def test_discard_keeps_nothing_and_checksums_like_a_copy(model: Path) -> None:
    assert modelmon.core.load(model, "mmap-view", discard=True, chunk=SMALL_CHUNK) == {}
    options = LoadOptions(workers=2, threads=2, chunk=SMALL_CHUNK, verify=True, discard=True)
    viewed = run_load(model, "mmap-view", options)
    copied = run_load(model, "pread", options.with_(discard=False))
    assert viewed.status == copied.status == "ok"
    assert viewed.checksum is not None and viewed.checksum == copied.checksum
    assert viewed.bytes == copied.bytes


class _StopAfter:
    """A stop flag set once readers have asked it ``checks`` times (a state, not a time)."""

    def __init__(self, checks: int) -> None:
        self.left = checks
        self._lock = threading.Lock()

    def is_set(self) -> bool:
        with self._lock:
            self.left -= 1
            return self.left < 0


class _TruncateAfter:
    """A stop flag never set that truncates ``path`` to one page when readers have asked it
    ``checks`` times (from the reading thread, between two of its steps)."""

    def __init__(self, checks: int, path: Path) -> None:
        self.left = checks
        self.path = path

    def is_set(self) -> bool:
        self.left -= 1
        if self.left == 0:
            os.truncate(self.path, 4096)
        return False


def test_cancel_mid_load_raises_cancelled(model: Path) -> None:
    stop = _StopAfter(5)
    with pytest.raises(LoadCancelled):
        modelmon.core.load(model, "mmap-view", threads=2, chunk=SMALL_CHUNK, stop=stop)
    assert stop.left < 0


def test_a_file_truncated_mid_load_is_a_load_error_naming_it(model: Path) -> None:
    # One reader: the truncation happens between its steps, so its next populate is the
    # first access to the missing pages (EFAULT, not SIGBUS).
    stop = _TruncateAfter(3, model)
    with pytest.raises(LoadError, match="truncated during the load") as raised:
        modelmon.core.load(model, "mmap-view", threads=1, chunk=SMALL_CHUNK, stop=stop)
    assert stop.left <= 0 and str(model) in str(raised.value)


def test_where_the_kernel_refuses_populate_pages_are_touched_and_it_says_so(
    model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mapped_view, "MADV_POPULATE_READ", 0x7FFF)  # EINVAL, as before 5.14
    parsed = open_model(model)
    options = LoadOptions(threads=2, chunk=SMALL_CHUNK, verify=True)
    ctx = build_context(parsed, "mmap-view", options, 0, 1, None, threading.Event())
    try:
        mapped_view.MmapViewStrategy().run(ctx)
        ctx.sink.check_complete()
        expected = modelmon.core.load(model, "pread")
        for index, array in ctx.sink.arrays.items():
            assert array.tobytes() == expected[parsed.extents[index].name].tobytes()
    finally:
        ctx.close()
        ctx.sink.release()
    assert len(ctx.notes) == 1 and "refused MADV_POPULATE_READ" in ctx.notes[0]


def test_touching_folds_every_byte_whatever_the_alignment() -> None:
    data = np.arange(1, 100, dtype=np.uint8)
    for start in range(9):
        for end in (start, start + 1, start + 17, len(data)):
            piece = data[start:end]
            assert touch_every_byte(piece) == _xor_of_words(piece)


def _xor_of_words(piece: np.ndarray) -> int:
    """The fold, the slow way: aligned 8-byte words XOR-ed, then every byte outside them."""
    lead = min(len(piece), -piece.ctypes.data % 8)
    words = (len(piece) - lead) // 8
    folded = 0
    for word in range(words):
        at = lead + 8 * word
        folded ^= int.from_bytes(piece[at : at + 8].tobytes(), "little")
    for byte in (*piece[:lead], *piece[lead + 8 * words :]):
        folded ^= int(byte)
    return folded


def test_a_mapping_holds_no_descriptor_and_lives_as_long_as_a_view(model: Path) -> None:
    descriptor = os.open(model, os.O_RDONLY)
    try:
        mapping = FileMapping(descriptor, model.stat().st_size)
    finally:
        os.close(descriptor)
    view = mapping.data[100:200]
    expected = model.read_bytes()[100:200]
    del mapping
    assert view.tobytes() == expected  # still mapped: the view holds it
