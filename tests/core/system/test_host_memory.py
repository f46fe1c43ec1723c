"""Free page reporting found in sysfs, and priming free memory before a measured load."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from modelmon.core.output.text import render_result
from modelmon.core.system import cache, host_memory, memory
from modelmon.core.system.proc_status import own_status_bytes

MIB = 1 << 20


@pytest.fixture
def reporting(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a VM whose host takes free pages back, without the wait and for small files, and
    no task stalled on memory (the suite's other worker may be loading gigabytes beside)."""
    monkeypatch.setattr(host_memory, "reports_free_pages", lambda *_: True)
    monkeypatch.setattr(host_memory, "REPORT_DELAY_S", 0.0)
    monkeypatch.setattr(host_memory, "PRIME_MIN", 0)
    monkeypatch.setattr(host_memory, "memory_pressure", lambda *_: 0.0)


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The sleeps ``host_memory`` takes on the test's own thread (the wait is the caller's),
    each still slept."""
    seconds_slept: list[float] = []
    real_sleep, here = time.sleep, threading.get_ident()

    def sleep(seconds: float) -> None:
        if threading.get_ident() == here:
            seconds_slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(host_memory.time, "sleep", sleep)
    return seconds_slept


def balloon(root: Path, name: str, features: str) -> Path:
    device = root / name
    device.mkdir(parents=True)
    (device / "features").write_text(features + "\n")
    return root


@pytest.mark.parametrize(
    ("features", "reports"),
    [
        ("0110010" + "0" * 57, True),  # this project's VMs: stats, deflate on OOM, reporting
        ("0110000" + "0" * 57, False),  # a balloon without free page reporting
        ("0110", False),  # too short to hold the bit
    ],
)
def test_reporting_is_read_from_the_balloons_feature_bits(
    tmp_path: Path, features: str, reports: bool
) -> None:
    assert host_memory.reports_free_pages(balloon(tmp_path, "virtio0", features)) is reports


def test_no_balloon_reports_nothing(tmp_path: Path) -> None:
    assert host_memory.reports_free_pages(tmp_path / "absent") is False


def test_prime_touches_the_bytes_asked_for_and_gives_them_back() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS: this process, no race
    before = own_status_bytes("VmRSS:") or 0
    primed = host_memory.prime(64 * MIB, force=True, settle_s=0)
    assert primed.bytes == 64 * MIB
    assert primed.seconds > 0
    assert (own_status_bytes("VmHWM:") or 0) >= before + 56 * MIB  # really faulted in
    assert (own_status_bytes("VmRSS:") or 0) <= before + 8 * MIB  # and unmapped again


def test_prime_stops_between_steps() -> None:
    stop = threading.Event()
    stop.set()
    assert host_memory.prime(host_memory.PRIME_STEP * 2, stop, force=True, settle_s=10).bytes == 0


def test_nothing_is_primed_where_the_host_takes_nothing_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(host_memory, "reports_free_pages", lambda *_: False)
    assert host_memory.prime(64 * MIB) == host_memory.Primed()


def test_prepare_primes_the_arrays_a_load_holds_not_its_page_cache(
    tmp_path: Path, reporting: None
) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    cold = cache.prepare([path], "cold")
    assert cold.primed.bytes == 4 * MIB and cold.primed.seconds > 0  # its arrays alone
    assert (cold.primed.wanted, cold.primed.why) == (4 * MIB, "the load's arrays")
    warm = cache.prepare([path], "warm")  # its pages are in the cache already
    assert (warm.primed.bytes, warm.primed.why) == (4 * MIB, "the load's arrays")
    assert cache.prepare([path], "cold", arrays=3 * MIB).primed.bytes == 3 * MIB
    past = cache.prepare([path], "cold", arrays=3 * MIB, page_cache=False)  # O_DIRECT reads
    assert (past.primed.bytes, past.primed.why) == (3 * MIB, "the load's arrays")
    bound = cache.prepare([path], "cold", arrays=0, prime_page_cache=True)  # a storage bound
    assert (bound.primed.bytes, bound.primed.why) == (4 * MIB, "the page cache the load fills")


def test_a_load_that_holds_no_arrays_primes_nothing(tmp_path: Path, reporting: None) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    discard = cache.prepare([path], "cold", arrays=0)  # its page cache is reclaimable
    assert (discard.primed.bytes, discard.primed.wanted) == (0, 0)
    assert discard.primed.why.startswith("not primed: the load keeps no arrays")
    for mode, page_cache in (("warm", True), ("cold", False)):
        primed = cache.prepare([path], mode, arrays=0, page_cache=page_cache).primed  # type: ignore[arg-type]
        assert primed.bytes == 0 and primed.why.startswith("nothing to prime"), (mode, primed)


def test_a_load_that_primes_nothing_still_lets_the_report_pass_run_first(
    tmp_path: Path, reporting: None, monkeypatch: pytest.MonkeyPatch, slept: list[float]
) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    monkeypatch.setattr(host_memory, "REPORT_DELAY_S", 0.3)
    monkeypatch.setattr(host_memory, "PRIME_MIN", 4 * MIB)  # its page cache is worth a wait
    monkeypatch.setattr(host_memory, "memory_pressure", lambda *_: 5.0)  # so none is primed
    freed = time.monotonic()
    monkeypatch.setattr(host_memory, "_last_free", freed)  # a large free just now
    assert cache.prepare([path], "cold", arrays=0).primed.bytes == 0
    # The wait runs to REPORT_DELAY_S after the free (a clock read after it ran short of 0.3 s
    # by the microseconds between the two).
    assert time.monotonic() - freed >= 0.3
    monkeypatch.setattr(host_memory, "_last_free", time.monotonic())
    slept.clear()  # the wait above; the run below takes none
    cache.prepare([path], "keep", arrays=0)  # takes no free memory: no wait
    assert not slept, slept


@pytest.mark.parametrize(
    ("strategy", "options", "arrays"),
    [
        ("sequential", {}, True),
        ("sequential", {"discard": True}, False),  # reads into a reused buffer
        ("mmap-view", {}, False),  # views of the page cache
        ("mmap", {}, True),  # copies out of the mapping
        ("direct", {}, True),  # O_DIRECT or buffered: its page cache is never primed
    ],
)
def test_each_run_primes_the_arrays_its_strategy_holds(
    tmp_path: Path, reporting: None, strategy: str, options: dict[str, bool], arrays: bool
) -> None:
    from modelmon.core import measure, open_model
    from modelmon.core.model.synth import write_safetensors_model

    model = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=256)
    opened = open_model(model)
    result = measure(model, strategy, workers=1, threads=1, cache="cold", **options)
    assert result.status == "ok"
    assert result.cache.primed.bytes == opened.total_bytes * arrays, result.cache.primed


def test_small_loads_are_not_primed(tmp_path: Path, reporting: None) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    host_memory.PRIME_MIN = 8 * MIB + 1  # restored by monkeypatch
    assert cache.prepare([path], "cold").primed.bytes == 0


def test_prime_first_waits_for_the_report_pass_recent_frees_started() -> None:
    started = time.monotonic()
    host_memory.prime(MIB, force=True, settle_s=0.3)
    assert time.monotonic() - started >= 0.3


def test_prepare_never_primes_beyond_free_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reporting: None
) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    facts = memory.memory_facts()
    tight = memory.MemoryFacts(
        total=facts.total,
        available=facts.available,
        page_cache=facts.page_cache,
        cgroup_limit=None,
        cgroup_used=None,
        usable=facts.usable,
        free=host_memory.PRIME_RESERVE + MIB,
    )
    monkeypatch.setattr(cache, "memory_facts", lambda: tight)
    assert cache.prepare([path], "cold").primed.bytes == MIB


def test_a_primed_run_says_so_in_its_cache_line(tmp_path: Path, reporting: None) -> None:
    from modelmon.core import measure
    from modelmon.core.model.synth import write_safetensors_model

    model = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=256)
    result = measure(model, "sequential", workers=1, threads=1, cache="cold")
    assert result.cache.primed.bytes > 0
    assert "of free memory in" in render_result(result)


def test_the_primed_text_names_bytes_seconds_and_why() -> None:
    assert host_memory.primed_text(host_memory.NOT_PRIMED) == ""
    text = host_memory.primed_text(host_memory.Primed(5_000_000_000, 0.42))
    assert text == "primed 5.0 GB of free memory in 0.42 s"
    whole = host_memory.Primed(5_000_000_000, 0.42, 5_000_000_000, "the load's arrays")
    assert host_memory.primed_text(whole).endswith("in 0.42 s (the load's arrays)")
    capped = host_memory.Primed(2_000_000_000, 0.2, 5_000_000_000, "capped at half of …")
    assert host_memory.primed_text(capped).endswith("(capped at half of …; the load takes 5.0 GB)")
    declined = host_memory.Primed(0, 0.0, 5_000_000_000, "not primed: priming is off")
    assert host_memory.primed_text(declined) == "not primed: priming is off"


GIB = 1 << 30
ROOMY = {"free": 20 * GIB, "available": 22 * GIB}


def test_priming_is_the_arrays_the_load_holds_when_there_is_room() -> None:
    plan = host_memory.plan_priming(3 * GIB, **ROOMY)
    assert (plan.bytes, plan.wanted, plan.why) == (3 * GIB, 3 * GIB, "the load's arrays")
    cold = host_memory.plan_priming(3 * GIB, page_cache=2 * GIB, **ROOMY)
    assert (cold.bytes, cold.wanted, cold.why) == (3 * GIB, 3 * GIB, "the load's arrays")
    # A storage bound asks for its page cache too: it stands for loads whose page cache lands
    # on their primed arrays' memory.
    bound = host_memory.plan_priming(0, page_cache=2 * GIB, prime_page_cache=True, **ROOMY)
    assert (bound.bytes, bound.why) == (2 * GIB, "the page cache the load fills")
    both = host_memory.plan_priming(3 * GIB, page_cache=2 * GIB, prime_page_cache=True, **ROOMY)
    assert (both.bytes, both.why) == (5 * GIB, "the load's arrays and page cache")


GB = 1_000_000_000


@pytest.mark.parametrize(
    ("arrays", "page_cache", "facts", "primed"),
    [
        (0, 4 * GIB, ROOMY, 0),  # a cold discard load of 4 GiB: it keeps nothing
        (0, 4 * GIB, {**ROOMY, "cgroup_free": 2 * GIB}, 0),  # the same in a pod
        (2.2 * GB, 2.2 * GB, ROOMY, 2.2 * GB),  # a cold load of 2.2 GB to RAM: its arrays
        (2.2 * GB, 0, ROOMY, 2.2 * GB),  # the same, warm or past the page cache
        # A load to RAM in a memory cgroup with 1 GiB left: the cgroup's room, less the reserve.
        (2.2 * GB, 2.2 * GB, {**ROOMY, "cgroup_free": GIB}, GIB - host_memory.PRIME_RESERVE),
        (2.2 * GB, 2.2 * GB, {**ROOMY, "cgroup_free": 600 * MIB}, 0),  # too little room
    ],
)
def test_priming_never_holds_more_than_the_load_keeps(
    arrays: float, page_cache: float, facts: dict[str, int], primed: float
) -> None:
    """What priming holds is anonymous memory no one can take back while it runs: at most the
    arrays the load will hold itself, never the page cache it fills (which the kernel can
    reclaim), so that the run's peak is the load's own."""
    plan = host_memory.plan_priming(int(arrays), page_cache=int(page_cache), **facts)
    assert plan.bytes == int(primed), plan
    assert plan.bytes <= arrays and plan.wanted == int(arrays)


@pytest.mark.parametrize(
    ("facts", "primed", "why"),
    [
        (
            {"free": 20 * GIB, "available": 4 * GIB},
            2 * GIB,
            "capped at half of the 4.0 GiB available",
        ),
        (
            {"free": 2 * GIB, "available": 22 * GIB},
            1.5 * GIB,
            "capped at all but 512 MiB of the 2.0 GiB free",
        ),
        (
            {**ROOMY, "cgroup_free": GIB},
            0.5 * GIB,
            "capped at all but 512 MiB of the 1.0 GiB its memory cgroup has left",
        ),
        ({"free": 700 * MIB, "available": 22 * GIB}, 0, "not primed: all but 512 MiB of"),
        (
            {**ROOMY, "pressure": 2.5},
            0,
            "not primed: tasks stalled on memory 2.5% of the last 10 s",
        ),
        # A stall now and then is not pressure: capped as without it.
        ({**ROOMY, "pressure": 0.2}, 11 * GIB, "capped at half of the 22.0 GiB available"),
    ],
)
def test_priming_is_bounded_by_free_memory_its_cgroup_and_pressure(
    facts: dict[str, float], primed: float, why: str
) -> None:
    plan = host_memory.plan_priming(12 * GIB, **facts)  # type: ignore[arg-type]
    assert plan.bytes == int(primed) and plan.why.startswith(why)
    assert plan.wanted == 12 * GIB


def test_nothing_is_primed_for_a_load_without_fresh_memory_or_with_little() -> None:
    assert host_memory.plan_priming(0, **ROOMY).why.startswith("nothing to prime")
    small = host_memory.plan_priming(host_memory.PRIME_MIN // 2, page_cache=MIB, **ROOMY)
    assert small.bytes == 0 and small.why == "not primed: under 256 MiB"


def test_memory_pressure_is_read_from_psi(tmp_path: Path) -> None:
    psi = tmp_path / "memory"
    psi.write_text(
        "some avg10=3.25 avg60=1.00 avg300=0.10 total=123\n"
        "full avg10=1.00 avg60=0.50 avg300=0.00 total=45\n"
    )
    assert host_memory.memory_pressure(psi) == 3.25
    assert host_memory.memory_pressure(tmp_path / "absent") is None
    psi.write_text("garbage\n")
    assert host_memory.memory_pressure(psi) is None


@pytest.fixture
def mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's priming mode, restored after the test."""
    monkeypatch.setattr(host_memory, "_mode", host_memory.prime_mode())


def test_priming_off_primes_nothing_and_says_so_where_it_would(
    tmp_path: Path, reporting: None, mode: None
) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    host_memory.set_prime_mode("off")
    primed = cache.prepare([path], "cold").primed
    assert primed.bytes == 0 and primed.why == "not primed: priming is off"


def test_priming_auto_applies_only_where_the_host_takes_memory_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: None
) -> None:
    monkeypatch.setattr(host_memory, "PRIME_MIN", 0)
    monkeypatch.setattr(host_memory, "REPORT_DELAY_S", 0.0)
    monkeypatch.setattr(host_memory, "reports_free_pages", lambda *_: False)
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    host_memory.set_prime_mode("auto")
    # Its arrays: wanted, not primed.
    assert cache.prepare([path], "cold").primed == host_memory.Primed(wanted=4 * MIB)
    host_memory.set_prime_mode("on")  # a host this process cannot see
    assert cache.prepare([path], "cold").primed.bytes == 4 * MIB  # the same bound: its arrays
    discard = cache.prepare([path], "cold", arrays=0).primed
    assert discard.bytes == 0 and discard.why.startswith("not primed: the load keeps no arrays")


def test_an_unknown_priming_mode_is_refused(mode: None) -> None:
    from modelmon.core.errors import OptionsError

    with pytest.raises(OptionsError, match="prime-memory must be one of off, auto, on"):
        host_memory.set_prime_mode("always")


def test_the_wait_before_priming_counts_from_the_last_noted_free(
    monkeypatch: pytest.MonkeyPatch, slept: list[float]
) -> None:
    monkeypatch.setattr(host_memory, "_last_free", None)
    assert host_memory.settle_left() == host_memory.REPORT_DELAY_S  # unknown: assume just now
    host_memory.note_free()
    assert 0 < host_memory.settle_left() <= host_memory.REPORT_DELAY_S
    monkeypatch.setattr(host_memory, "_last_free", time.monotonic() - 60)
    assert host_memory.settle_left() == 0.0  # that pass has long run
    host_memory.prime(MIB, force=True)
    assert not any(slept), slept  # no wait: the wait not taken, not a clock read


def test_primings_own_unmap_is_a_noted_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_memory, "_last_free", None)
    host_memory.prime(MIB, force=True, settle_s=0)
    assert host_memory.settle_left() > 0


def test_evicting_resident_pages_is_a_noted_free_and_evicting_none_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_memory, "FREE_WORTH_NOTING", MIB)
    path = tmp_path / "model.bin"
    path.write_bytes(os.urandom(4 * MIB))
    cache.warm([path])
    monkeypatch.setattr(host_memory, "_last_free", None)
    cache.evict([path])
    assert host_memory._last_free is not None
    monkeypatch.setattr(host_memory, "_last_free", None)
    cache.evict([path])  # nothing left to drop
    assert host_memory._last_free is None


def test_a_cold_run_drops_its_pages_first_and_notes_its_workers_exit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelmon.core.loading.runner import LoadRun
    from modelmon.core.model.synth import write_safetensors_model
    from modelmon.core.options import LoadOptions

    model = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=256)
    frees: list[str] = []
    monkeypatch.setattr(host_memory, "note_free", lambda: frees.append("free"))
    early = cache.prepare_early

    def prepare_early(paths: list[str], mode: str) -> None:
        frees.append("early drop")
        early(paths, mode)  # type: ignore[arg-type]

    monkeypatch.setattr(cache, "prepare_early", prepare_early)
    run = LoadRun(model, "sequential", LoadOptions(workers=1, threads=1, cache="cold"))
    assert run.run().status == "ok"
    assert frees[0] == "early drop" and frees[-1] == "free"


def test_the_reported_counter_is_read_in_bytes_and_absent_is_none(tmp_path: Path) -> None:
    counter = tmp_path / "reported_kib"
    counter.write_text("1219990\n")
    assert host_memory.reported_bytes(counter) == 1219990 * 1024
    assert host_memory.reported_bytes(tmp_path / "missing") is None
    assert host_memory.reported_since(None, counter) is None
    assert host_memory.reported_since(5, tmp_path / "missing") is None
    assert host_memory.reported_since(1219990 * 1024 - 4096, counter) == 4096
    assert host_memory.reported_since(1 << 40, counter) == 0  # a counter never goes back: a reset
    assert host_memory.reported_notes(host_memory.FREE_WORTH_NOTING - 1) == ()
    assert host_memory.reported_notes(None) == ()
    (note,) = host_memory.reported_notes(812 << 20)
    assert note.startswith("host: 812 MiB of free memory")


def test_a_load_with_a_report_pass_inside_its_timing_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelmon.core.loading.runner import LoadRun
    from modelmon.core.model.synth import write_safetensors_model
    from modelmon.core.options import LoadOptions

    model = write_safetensors_model(tmp_path, layers=1, hidden=64, vocab=256)
    readings = iter([7 << 30, (7 << 30) + (900 << 20)])  # at go, at the end
    monkeypatch.setattr(host_memory, "reported_bytes", lambda counter=None: next(readings))
    result = LoadRun(model, "sequential", LoadOptions(workers=1, threads=1)).run()
    assert result.status == "ok" and result.host_reported == 900 << 20
    assert any(n.startswith("host: 900 MiB") for n in result.notes)
    monkeypatch.setattr(host_memory, "reported_bytes", lambda counter=None: None)  # no counter here
    quiet = LoadRun(model, "sequential", LoadOptions(workers=1, threads=1)).run()
    assert quiet.host_reported is None and not any(n.startswith("host:") for n in quiet.notes)
