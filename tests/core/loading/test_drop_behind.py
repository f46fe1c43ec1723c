"""Drop-behind: a streaming load of files larger than the memory it may fill drops the page
cache of what it has read, says so, and leaves the rest of the machine's memory alone."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from modelmon.core.loading import drop_behind
from modelmon.core.loading.drop_behind import DropBehind, drop_behind_reason
from modelmon.core.loading.runner import LoadRun
from modelmon.core.options import LoadOptions
from modelmon.core.system import cache, memory
from modelmon.core.system.residency import residency_map

from ..system.test_memory_cgroup import plan_only
from .sparse import sparse_model

MIB = 1 << 20
GIB = 1 << 30
DISCARD = LoadOptions(discard=True, cache="cold")


def facts(free: int, cgroup_free: int | None = None) -> memory.MemoryFacts:
    return memory.MemoryFacts(
        total=24 * GIB,
        available=free,
        page_cache=0,
        cgroup_limit=None,
        cgroup_used=None,
        usable=free,
        free=free,
        cgroup_free=cgroup_free,
    )


def test_only_a_streaming_load_too_large_for_its_room_drops_behind() -> None:
    roomy, tight = facts(23 * GIB), facts(2 * GIB)
    size = 28 * GIB
    assert drop_behind_reason(size, DISCARD, False, False, facts=roomy) is not None
    assert drop_behind_reason(GIB, DISCARD, False, False, facts=roomy) is None  # it fits
    why = drop_behind_reason(3 * GIB, DISCARD, False, False, facts=tight)
    assert why == (
        "the files (3.0 GiB) do not fit in the page cache it may fill without evicting other "
        "programs' pages (2.0 GiB free, less 512 MiB)"
    )
    caged = drop_behind_reason(GIB, DISCARD, False, False, facts=facts(23 * GIB, 768 * MIB))
    assert caged is not None and "(0.8 GiB left in its cgroup, less 512 MiB)" in caged
    limited = drop_behind_reason(GIB, DISCARD, False, False, memory_limit=256 * MIB, facts=roomy)
    assert limited is not None and "(a memory limit of 0.2 GiB)" in limited
    assert drop_behind_reason(size, LoadOptions(cache="cold"), False, False, facts=roomy) is None
    warm = DISCARD.with_(cache="warm")  # its pages are meant to stay
    assert drop_behind_reason(size, warm, False, False, facts=roomy) is None
    # mmap copies out of a mapping it holds: its pages cannot be dropped while mapped;
    # mmap-view releases each step from its mapping first.
    assert drop_behind_reason(size, DISCARD, True, False, facts=roomy) is None
    assert drop_behind_reason(size, DISCARD, True, True, facts=roomy) is not None


def test_spans_merge_and_say_their_gaps() -> None:
    spans = drop_behind.Spans()
    assert spans.add(10, 20) == (10, 20)
    assert spans.add(30, 40) == (30, 40)
    assert spans.gaps(0, 50) == [(0, 10), (20, 30), (40, 50)]
    assert spans.add(20, 30) == (10, 40)  # touching ranges merge
    assert spans.add(5, 12) == (5, 40) and spans.gaps(0, 50) == [(0, 5), (40, 50)]
    assert spans.add(60, 70) == (60, 70) and spans.gaps(35, 65) == [(40, 60)]


def test_what_was_read_is_dropped_in_whole_folios_once_its_neighbours_are_read(
    tmp_path: Path,
) -> None:
    align = drop_behind.DROP_ALIGN
    path = tmp_path / "data.bin"
    with open(path, "wb") as out:
        out.write(os.urandom(4 * align))
        os.fsync(out.fileno())  # DONTNEED leaves dirty pages
    cache.warm([path])
    dropper = DropBehind([str(path)])
    try:
        dropper.dropped(0, 100, align + align // 2)  # no whole folio read yet
        assert dropper.bytes == 0
        dropper.dropped(0, 100 + align + align // 2, align + align // 2)  # up to 3.5 folios
        assert dropper.bytes == 2 * align  # folios 1 and 2; 0 and 3 wait for their rest
        assert [round(float(x), 2) for x in residency_map(path, bins=4)] == [1, 0, 0, 1]
        dropper.dropped(0, 100 + 3 * align, align - 100)  # read to the end
        assert dropper.bytes == 3 * align and dropper.ns > 0
        assert [round(float(x), 2) for x in residency_map(path, bins=4)] == [1, 0, 0, 0]
    finally:
        dropper.close()


def test_a_streaming_load_past_its_memory_limit_drops_behind_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_only(monkeypatch)  # a limit of 8 MiB planned with: no worker lives under a real one
    path = sparse_model(tmp_path, tensors=8, tensor_bytes=4 * MIB)
    options = DISCARD.with_(workers=2, threads=2, chunk=MIB)
    result = LoadRun(path, "sequential", options, memory_limit=8 * MIB).run()
    assert result.status == "ok" and result.dropped_behind is not None
    # All but the folios at the seams between readers, which the parent drops at the end.
    assert result.dropped_behind.bytes >= 16 * MIB
    assert result.dropped_behind.why.endswith("(a memory limit of 0.0 GiB)")
    assert result.cache.resident_after <= 0.01  # the parent dropped what the readers left
    (note,) = [n for n in result.notes if n.startswith("drop-behind: ")]
    assert "of the readers' time (counted in the load's)" in note
    roomy = LoadRun(path, "sequential", options).run()  # fits in free memory: left cached
    assert roomy.dropped_behind is None and roomy.cache.resident_after > 0.99


@pytest.mark.parametrize("strategy", ["pread", "stream", "mmap-view", "direct"])
def test_every_strategy_that_can_drops_behind(
    tmp_path: Path, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_only(monkeypatch)  # a limit of 1 MiB, planned with
    path = sparse_model(tmp_path, tensors=4, tensor_bytes=4 * MIB)
    options = DISCARD.with_(workers=1, threads=2, chunk=MIB)
    result = LoadRun(path, strategy, options, memory_limit=MIB).run()
    assert result.status == "ok", result.error
    assert result.dropped_behind is not None and result.cache.resident_after <= 0.01
    if strategy != "direct":  # O_DIRECT fills no page cache (on a filesystem that has it)
        assert result.dropped_behind.bytes > 12 * MIB


def test_core_load_streaming_past_free_memory_drops_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelmon.core import load

    path = sparse_model(tmp_path, tensors=4, tensor_bytes=4 * MIB)
    real = memory.memory_facts()
    tight = dataclasses.replace(real, free=drop_behind.DROP_RESERVE + MIB)
    monkeypatch.setattr(drop_behind, "memory_facts", lambda: tight)
    assert load(path, "sequential", discard=True, cache="cold", chunk=MIB) == {}
    assert cache.residency_of([path]) <= 0.01
