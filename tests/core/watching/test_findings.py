"""Each finding's rule on a given result: it fires on its evidence, with its figures and the
fix in the detected loader's terms, and stays quiet just short of its threshold."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np

from modelmon.core.output.json import dumps
from modelmon.core.system.cache import CacheState
from modelmon.core.watching import findings as rules
from modelmon.core.watching.loaders import Loader
from modelmon.core.watching.result import (
    DescriptionReport,
    FileReport,
    OtherReader,
    WatchResult,
    WatchSamples,
)

GB = 1_000_000_000
COLD = CacheState("cold", 0.0, math.nan, True, False, "cachestat")
LLAMA = Loader("llama.cpp", "llama.cpp", ("command line: llama-server -m m.gguf",))


def a_file(**changes: object) -> FileReport:
    base = FileReport(
        index=0,
        path="/mnt/fuse/m.gguf",
        size=GB,
        named=True,
        resident_before=0.0,
        resident_after=1.0,
        arrived_bytes=GB,
        unique_arrived_bytes=GB,
        evicted_bytes=0,
        mapped=True,
        opened=True,
        mapped_rss_peak=GB,
        read_position_peak=0,
        bytes_read=GB,
        storage="fuse.rclone from :http: (FUSE, possibly network, readahead 128 KiB)",
        fs_type="fuse.rclone",
        slow_storage="FUSE",
        read_ahead_kb=128,
        runs=3,
        jumps=0,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def a_result(files: tuple[FileReport, ...] = (), **changes: object) -> WatchResult:
    files = files or (a_file(),)
    base = WatchResult(
        command=("llama-server", "-m", "/mnt/fuse/m.gguf"),
        pid=100,
        attached=False,
        status="exited",
        exit_code=0,
        signal=None,
        ended_by="exit",
        wall_seconds=30.0,
        interval_s=0.1,
        seconds=25.0,
        first_byte_s=1.0,
        last_byte_s=26.0,
        quiet_s=None,
        bytes_read=sum(f.bytes_read for f in files),
        arrived_bytes=sum(f.arrived_bytes for f in files),
        process_bytes=0,
        model_bytes=sum(f.size for f in files),
        files=files,
        processes=(),
        descriptions=(),
        major_faults=0,
        minor_faults=0,
        cpu_seconds=1.0,
        read_bytes=GB,
        read_chars=GB,
        peak_rss=GB,
        peak_anon_rss=GB // 10,
        swap_in_bytes=0,
        swap_out_bytes=0,
        cache=COLD,
        loader=LLAMA,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def samples(series: dict[str, tuple[np.ndarray, np.ndarray]], interval_s: float) -> WatchSamples:
    """A watch's samples: ``series`` taken every ``interval_s``, nothing else."""
    return WatchSamples(interval_s, {}, series, {}, {}, 0.0, 0.0)


def codes(result: WatchResult) -> list[str]:
    return [f.code for f in rules.findings(result)]


def test_a_clean_cold_sequential_load_has_no_finding() -> None:
    assert codes(a_result()) == []


def test_shared_descriptor_names_the_pids() -> None:
    shared = DescriptionReport(
        0,
        "/mnt/fuse/m.gguf",
        (11, 12, 13),
        ((11, 3), (12, 3), (13, 3)),
        {},
        "0o100000",
        False,
        0,
        0,
    )
    alone = dataclasses.replace(shared, pids=(14,), descriptors=((14, 5),))
    found = rules.shared_descriptor(a_result(descriptions=(shared, alone)))
    assert found is not None and found.evidence["pids"] == [11, 12, 13]
    assert "pids 11, 12, 13" in found.text and "FUSE" in found.text
    assert rules.shared_descriptor(a_result(descriptions=(alone,))) is None


def test_mmap_faults_on_fuse_in_the_loaders_terms() -> None:
    faulted = a_result(major_faults=80, minor_faults=8000, read_chars=10_000_000)
    found = rules.mmap_faults(faulted)
    assert found is not None and found.evidence["bytes_by_faults"] == GB - 10_000_000
    assert "--load-mode none" in found.fix and "read_ahead_kb" in found.fix
    assert "990.00 MB of it arrived through page faults" in found.text
    assert "128 KiB" in found.text and "8,080 faults" in found.text
    local = a_result((a_file(slow_storage=None),), read_chars=0)
    assert rules.mmap_faults(local) is None
    # Read with read() (the reads returned what arrived): no finding, mapped or not.
    assert rules.mmap_faults(a_result(read_chars=GB)) is None
    half = a_result(read_chars=GB // 2 + 1)
    assert rules.mmap_faults(half) is None


def test_partial_read_gives_the_fraction_only_from_a_cold_start() -> None:
    lazy = a_file(arrived_bytes=GB // 20, bytes_read=GB // 20, unique_arrived_bytes=GB // 20)
    found = rules.partial_read(a_result((lazy,)))
    assert found is not None and found.evidence["fraction"] == 0.05
    assert "5.0%" in found.text
    just_enough = a_file(bytes_read=int(GB * rules.PARTIAL_BELOW))
    assert rules.partial_read(a_result((just_enough,))) is None
    warm = dataclasses.replace(lazy, resident_before=0.5)  # the arrivals do not tell all
    assert rules.partial_read(a_result((warm,))) is None


def test_random_order_from_many_small_jumps() -> None:
    scattered = a_file(runs=4000, jumps=4000)  # 250 kB between jumps
    found = rules.random_order(a_result((scattered,)))
    assert found is not None and found.evidence["jumps"] == 4000
    streams = a_file(runs=40, jumps=4)
    assert rules.random_order(a_result((streams,))) is None


def test_evicted_double_copy_swap_and_not_cold() -> None:
    dropped = a_file(evicted_bytes=GB // 10)
    assert codes(a_result((dropped,))) == ["evicted"]
    assert codes(a_result((a_file(evicted_bytes=GB // 100),))) == []
    assert codes(a_result(peak_anon_rss=2 * GB)) == ["double-copy"]
    assert codes(a_result(peak_anon_rss=2 * GB - 1)) == []
    assert codes(a_result(swap_out_bytes=1 << 20)) == ["swap"]
    warm = a_file(resident_before=0.4)
    found = rules.not_cold(a_result((warm,)))
    assert found is not None and "40.0%" in found.text
    unnamed = a_result((a_file(named=False),), cache=None)
    assert codes(unnamed) == ["not-cold"]


def test_another_reader_is_named_instead_of_memory_or_a_warm_cache() -> None:
    """The pages another process reads come and go too: what was dropped, or cached before
    the program read it, is not said as the program's (memory too short, not cold)."""
    cat = OtherReader(4242, "cat", ("/mnt/fuse/m.gguf",), False)
    server = OtherReader(77, "llama-server", ("/mnt/fuse/m.gguf", "/mnt/fuse/n.gguf"), True)
    dropped = a_file(evicted_bytes=GB // 10)
    warm = a_file(resident_before=0.4)
    assert codes(a_result((dropped,), other_readers=(cat,))) == ["other-reader"]
    assert codes(a_result((warm,), other_readers=(cat, server))) == ["other-reader"]
    found = rules.other_readers(a_result((dropped,), other_readers=(cat, server)))
    assert found is not None
    assert found.text.startswith(
        "Another process was reading the model's files during the watch: pid 4242 (cat) had "
        "m.gguf open; pid 77 (llama-server) mapped 2 model files."
    )
    assert "memory was too short" in found.text and "this does not say that" in found.text
    assert [reader["pid"] for reader in found.evidence["readers"]] == [4242, 77]
    warm_said = rules.other_readers(a_result((warm,), other_readers=(cat,)))
    assert warm_said is not None
    # Said of the moment the program read them, beside the start's figure of the cache line.
    assert (
        "40.0% of the files it read were in the page cache when the program first read them "
        "(at the start 0.0% was: the other reader brought the rest in between)"
    ) in warm_said.text
    # The model not named before the run is still said: no other reader explains that.
    unnamed = a_result((a_file(named=False),), cache=None, other_readers=(cat,))
    assert codes(unnamed) == ["other-reader", "not-cold"]
    data = json.loads(dumps(a_result(other_readers=(server,)).to_dict()))
    assert data["other_readers"] == [
        {"pid": 77, "name": "llama-server", "files": list(server.files), "mapped": True}
    ]


def test_pages_another_reader_evicts_unseen_are_blamed_on_it_not_on_a_lazy_load() -> None:
    """A load of which only part was seen arriving while another process held its file (and
    dropped its pages between two looks): not "a lazy load", but the other reader."""
    evictor = OtherReader(4242, "vmtouch", ("/mnt/fuse/m.gguf",), False)
    unseen = a_file(bytes_read=GB // 5, arrived_bytes=GB // 5, unique_arrived_bytes=GB // 5)
    assert rules.partial_read(a_result((unseen,))) is not None  # alone: a lazy load
    assert codes(a_result((unseen,), other_readers=(evictor,))) == ["other-reader"]
    found = rules.other_readers(a_result((unseen,), other_readers=(evictor,)))
    assert found is not None and "lazy" not in found.text.replace("not say the load was lazy", "")
    assert (
        "Only 20.0% of the 1.00 GB the program read of them was seen arriving: pages the other "
        "reader dropped between two looks arrive unseen, so this does not say the load was lazy."
    ) in found.text


def test_the_json_is_strict_and_has_the_documented_keys() -> None:
    result = a_result(findings=rules.findings(a_result(read_chars=0)))
    assert [f.code for f in result.findings] == ["mmap-faults"]
    data = json.loads(dumps(result.to_dict()))
    assert {
        "command",
        "pid",
        "exit_code",
        "wall_seconds",
        "seconds",
        "bytes_read",
        "mbps",
        "files",
        "processes",
        "descriptors",
        "major_faults",
        "findings",
    } <= set(data)
    assert data["mbps"] == 40.0  # 1 GB in 25 s
    assert set(data["files"][0]) >= {"path", "size", "resident_before", "resident_after"}
    assert set(data["findings"][0]) == {"code", "text", "evidence", "fix"}
