"""The storage bound of a file, judged on medians: no plain reader measured for it in the same
rounds reads faster than the bound. The plain reads are faked with set rates: nothing is
timed here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from modelmon.core.measuring import ceilings as ceilings_module
from modelmon.core.measuring.bounds import Reading
from modelmon.core.measuring.ceilings import measure_ceilings
from modelmon.core.model.formats import open_model
from modelmon.core.options import MiB
from modelmon.core.output.ceiling_words import measured_sentence

# MB/s of each setting's runs, in the order they are read: (readers, MiB requests, O_DIRECT).
# 8 readers lead the first runs (2139 against 4 readers' 1839) and 4 readers the medians
# (2504 against 2300), as the walk's 2.3 GB model gave.
WALK_RATES = {
    (1, 16, False): [2091.0, 2050.0, 2100.0],
    (4, 16, False): [1839.0, 2504.0, 2600.0],
    (8, 16, False): [2139.0, 2422.0, 2300.0],
    (4, 16, True): [1500.0, 1600.0, 1550.0],
}


@pytest.fixture
def rates(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[int, ...], list[float]]:
    """Plain reads that give the rates put in the returned table, from a cache always found
    cold, on a file system that takes O_DIRECT and no throttle."""
    table: dict[tuple[int, ...], list[float]] = {}  # a keeping read's key ends in -1
    given: dict[tuple[int, ...], int] = {}

    def fake_read(
        paths: Sequence[str], readers: int, request: int, direct: bool = False, keep: bool = False
    ) -> Reading:
        key = (readers, request // MiB, direct) + ((-1,) if keep else ())
        count = given.get(key, 0)
        given[key] = count + 1
        return Reading(readers, request, direct, table[key][count])

    monkeypatch.setattr(ceilings_module, "plain_read", fake_read)
    monkeypatch.setattr(ceilings_module, "_cold_or_warm", lambda *args, **kwargs: True)
    monkeypatch.setattr(ceilings_module, "direct_supported", lambda path: True)
    monkeypatch.setattr(ceilings_module, "read_throttle", lambda path: None)
    return table


NAMES = ("sequential_read", "parallel_read", "storage")


def test_the_storage_bound_is_the_best_median_not_the_best_first_run(
    sharded_model: Path, rates: dict[tuple[int, ...], list[float]]
) -> None:
    rates.update(WALK_RATES)
    measured = measure_ceilings(open_model(sharded_model), NAMES, repeats=3, workers=4)
    storage, parallel = measured.get("storage"), measured.get("parallel_read")
    assert storage is not None and parallel is not None
    assert parallel.mbps == 2504.0 and storage.mbps >= parallel.mbps
    # The bound is the 4 readers' own runs, the same ones the parallel-read ceiling is of.
    assert storage.mbps == 2504.0 and storage.runs == parallel.runs == (1839.0, 2504.0, 2600.0)
    assert storage.spec.startswith(
        "plain reader, best of a sweep: 4 reader(s), 16 MiB requests, buffered (swept, the "
        "median of each setting's 3 runs: 1 reader(s), 16 MiB requests, buffered: 2091 MB/s; "
        "4 reader(s), 16 MiB requests, buffered: 2504 MB/s; 8 reader(s), 16 MiB requests, "
        "buffered: 2300 MB/s; 4 reader(s), 16 MiB requests, O_DIRECT: 1550 MB/s), cold, discard"
    )
    assert storage.spec_setting == "2504 MB/s at 4 reader(s), 16 MiB requests, buffered"
    sentence = measured_sentence(measured)
    assert sentence is not None and sentence.endswith(
        "4 with their own descriptors reach 2504 MB/s; the best of a sweep of plain readers, "
        "4 readers, 16 MiB requests, buffered, reads at 2504 MB/s: the storage bound."
    )


def test_a_parallel_read_of_another_request_size_is_swept_with_the_rest(
    sharded_model: Path, rates: dict[tuple[int, ...], list[float]]
) -> None:
    rates.update(WALK_RATES)
    rates[(1, 8, False)] = [1900.0, 1950.0, 1920.0]
    rates[(4, 8, False)] = [2700.0, 2650.0, 2750.0]
    model = open_model(sharded_model)
    measured = measure_ceilings(model, NAMES, repeats=3, workers=4, chunk=8 * MiB)
    storage, parallel = measured.get("storage"), measured.get("parallel_read")
    assert storage is not None and parallel is not None and parallel.mbps == 2700.0
    assert storage.mbps == 2700.0 and storage.runs == parallel.runs
    assert storage.spec.startswith("plain reader, best of a sweep: 4 reader(s), 8 MiB requests")


def test_one_run_each_then_the_best_read_to_three_whose_median_is_the_bound(
    sharded_model: Path, rates: dict[tuple[int, ...], list[float]]
) -> None:
    """Run once each, 8 readers lead (2139 MB/s); the bound is their median of three (2300),
    not the highest of four single runs."""
    rates.update(WALK_RATES)
    measured = measure_ceilings(open_model(sharded_model), ("storage",), repeats=1, workers=4)
    storage = measured.get("storage")
    assert storage is not None and storage.mbps == 2300.0
    assert storage.runs == (2139.0, 2422.0, 2300.0)
    assert "(swept, one run of each setting, the best's of 3: 1 reader(s)" in storage.spec


def test_a_best_whose_median_falls_under_another_setting_hands_the_bound_on(
    sharded_model: Path, rates: dict[tuple[int, ...], list[float]]
) -> None:
    """8 readers' first run leads, their median of three (1600) falls under 1 reader's one
    run (2091): 1 reader is read to three too, and its median (2091) is the bound: no plain
    setting measured with it has a higher median."""
    rates.update(WALK_RATES)
    rates[(8, 16, False)] = [2139.0, 1500.0, 1600.0]
    measured = measure_ceilings(open_model(sharded_model), ("storage",), repeats=1, workers=4)
    storage = measured.get("storage")
    assert storage is not None and storage.mbps == 2091.0
    assert storage.runs == (2091.0, 2050.0, 2100.0)
    assert storage.spec.startswith("plain reader, best of a sweep: 1 reader(s)")


def test_plain_readers_keeping_their_bytes_read_as_the_bound_s_best_setting(
    sharded_model: Path, rates: dict[tuple[int, ...], list[float]]
) -> None:
    """The keeping read is the sweep's best setting again, its bytes kept: no bound, the
    figure that says what keeping costs here."""
    rates.update(WALK_RATES)
    rates[(8, 16, False, -1)] = [1700.0]
    measured = measure_ceilings(
        open_model(sharded_model), ("storage", "keeping_read"), repeats=1, workers=4
    )
    storage, keeping = measured.get("storage"), measured.get("keeping_read")
    assert storage is not None and storage.mbps == 2300.0  # 8 readers' median of three
    assert keeping is not None and keeping.runs == (1700.0,)
    assert keeping.spec == (
        "plain reader, 8 reader(s), 16 MiB requests, buffered, own descriptors, bytes kept "
        "in fresh memory, cold"
    )
