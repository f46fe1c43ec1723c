"""The bounds a load is judged against: plain readers that read every byte once, fresh
memory filled, the best of a sweep, and which bound applies to which load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelmon.core.measuring.bounds import _ranges, direct_supported, fill_rate, plain_read
from modelmon.core.measuring.ceiling_records import (
    Ceiling,
    Ceilings,
    fill_beside_mbps,
    fill_ceiling,
    keeps_bytes,
)
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.options import MiB


@pytest.mark.parametrize("readers", [1, 3, 4, 7])
def test_the_readers_ranges_cover_every_byte_of_every_file_once(readers: int) -> None:
    sizes = [5, 4096 * 3 + 1, 0, 17, 1 << 20]
    covered = [bytearray(size) for size in sizes]
    plan = _ranges(sizes, readers)
    assert len(plan) == readers
    for pieces in plan:
        for index, offset, length in pieces:
            for at in range(offset, offset + length):
                covered[index][at] += 1
    assert all(set(c) <= {1} for c in covered)


def _read_bytes() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("rchar:"))


@pytest.mark.parametrize("direct", [False, True])
def test_a_plain_read_reads_every_byte_of_the_model(sharded_model: Path, direct: bool) -> None:
    paths = [f.path for f in open_model(sharded_model).files]
    if direct and not direct_supported(paths[0]):
        pytest.skip(f"the file system of {paths[0]} refuses O_DIRECT")
    size = sum(os.stat(p).st_size for p in paths)
    before = _read_bytes()
    reading = plain_read(paths, 3, MiB, direct=direct)
    assert _read_bytes() - before >= size  # every byte arrived, none skipped
    assert reading.mbps > 0 and reading.readers == 3 and reading.direct is direct


def test_filling_fresh_memory_has_a_rate() -> None:
    assert fill_rate(64 * MiB, 2) > 0


def test_the_sweep_and_the_fill_are_measured_cold_and_say_how(sharded_model: Path) -> None:
    model = open_model(sharded_model)
    names = ("sequential_read", "parallel_read", "storage", "memory_fill", "keeping_read")
    ceilings = measure_ceilings(model, names, repeats=2, workers=2)
    assert [c.name for c in ceilings.items] == list(names)
    storage = ceilings.get("storage")
    # Its best setting read to three runs: their median is the bound.
    assert storage is not None and len(storage.runs) == 3 and storage.verified
    assert storage.spec.startswith("plain reader, best of a sweep: ")
    assert "1 reader(s), 16 MiB requests, buffered: " in storage.spec  # the sweep is listed
    fill = ceilings.get("memory_fill")
    assert fill is not None and fill.verified and "fresh memory" in fill.spec
    # Alone (the bound, its runs) and beside the plain reads (which bound binds).
    assert len(fill.runs) == 2 and [name for name, _ in fill.curve] == [
        "alone",
        "beside plain cold reads",
    ]
    assert fill.curve[0][1] == fill.mbps and fill_beside_mbps(fill) == fill.curve[1][1]
    # The named reads are the sweep's own settings: their runs count, none is read again.
    assert len(ceilings.get("parallel_read").runs) in (2, 3)  # type: ignore[union-attr]
    # The bound's setting again, its bytes kept: cold, and said so.
    keeping = ceilings.get("keeping_read")
    assert keeping is not None and keeping.verified and len(keeping.runs) == 2
    assert keeping.spec.endswith("own descriptors, bytes kept in fresh memory, cold")


STORAGE = Ceiling("storage", 700.0, (690.0, 700.0, 710.0), "sweep", True)
FILL = Ceiling("memory_fill", 460.0, (450.0, 460.0, 470.0), "fill", True)
BOUNDS = Ceilings("m", (STORAGE, FILL))


def test_a_load_that_keeps_its_bytes_is_bounded_by_the_lower_of_both() -> None:
    assert keeps_bytes("sequential", discard=False) and not keeps_bytes("mmap-view", False)
    assert not keeps_bytes("sequential", discard=True)
    assert BOUNDS.bound(keeps=True) is FILL and BOUNDS.bound(keeps=False) is STORAGE
    assert BOUNDS.binding_words() == (
        "A load that keeps its bytes is limited here by filling fresh memory, not by the "
        "storage: 460 MB/s to fill against 700 MB/s to read."
    )
    kept = BOUNDS.efficiency(414.0, keeps=True)
    assert kept is not None and kept.words() == "90% of the memory-fill bound"


def test_a_rate_above_its_bound_beyond_its_spread_is_not_an_efficiency() -> None:
    within = BOUNDS.efficiency(712.0, keeps=False)  # 1.7 % over, inside the ±2 % floor
    assert within is not None and not within.above
    above = BOUNDS.efficiency(1400.0, keeps=False)
    assert above is not None and above.above
    assert "not an efficiency" in above.words() and above.words().startswith("200% of")
    assert "a cache this machine cannot drop" in above.words()  # a read bound: a host's cache


def test_a_rate_above_the_memory_fill_bound_blames_the_fill_not_a_cache() -> None:
    above = BOUNDS.efficiency(600.0, keeps=True)  # 1.30× the 460 MB/s fill
    assert above is not None and above.above
    assert above.words() == (
        "130% of the memory-fill bound: above it, so the fill that measured it (threads "
        "filling fresh memory) fell short of what the load's processes got: not an efficiency"
    )


def test_the_fill_beside_the_reads_says_when_both_together_bind() -> None:
    fill = fill_ceiling([900.0, 910.0], [520.0, 540.0], 1 << 30, 4, "plain cold reads", True)
    assert fill.mbps == 905.0 and fill.runs == (900.0, 910.0)
    assert "4 threads beside plain cold reads of the model: 530 MB/s" in fill.spec
    together = Ceilings("m", (STORAGE, fill))
    assert together.bound(keeps=True) is STORAGE  # 700 to read, 905 to fill alone
    # The fill beside the reads is no limit (walk 14: a pick at 2229 MB/s under "limited
    # ... 1970 MB/s to fill while the reads run beside it"): the storage bounds it.
    assert together.binding_words() == (
        "A load that keeps its bytes is bound here by the storage, 700 MB/s to read; filling "
        "fresh memory takes 905 MB/s alone but 530 MB/s while plain reads run beside it (they "
        "share the CPUs), so such a load may fall short of the storage bound."
    )
    roomy = Ceilings("m", (STORAGE, fill_ceiling([900.0], [800.0], 1 << 30, 4, "reads", True)))
    words = roomy.binding_words()
    assert words.startswith("A load that keeps its bytes is limited here by the storage, not by")
