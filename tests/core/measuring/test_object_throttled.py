"""The bucket's curve of plain GETs on a bucket that throttles: a plain client waits a
throttle out, a setting throttled long enough stops with what it read, the curve leaves out
the settings that would ask for more requests and tries larger parts; a bucket that
throttles every request ends the ceiling in one line."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from modelmon.core import open_model
from modelmon.core.errors import StorageThrottledError
from modelmon.core.measuring.object_bounds import ObjectCurve, ObjectReading, plain_get
from modelmon.core.options import MiB

from ...object_store import BUCKET

LARGE = f"s3://{BUCKET}/large/"


def _facts(url: str) -> list[Any]:
    return [f.remote for f in open_model(url).files if f.remote is not None]


def test_a_throttled_plain_read_waits_throttles_out_and_stops_with_what_it_read(
    faulty_s3: SimpleNamespace,
) -> None:
    """116 GETs of 64 KiB at 10 a second would take 12 s: the read stops 2 s after its
    first throttle, its rate what it read by then."""
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.rate, faulty_s3.proxy.faults.burst = 10.0, 2.0
    reading = plain_get(facts, 1, 64 << 10)
    assert reading.throttles > 0 and reading.stopped and reading.mbps > 0
    assert "throttled" in reading.label and "stopped after 2 s" in reading.label


def test_plain_reads_of_a_bucket_that_throttles_every_request_fail_counting_them(
    faulty_s3: SimpleNamespace,
) -> None:
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.throttle = 100_000
    with pytest.raises(StorageThrottledError) as caught:
        plain_get(facts, 2, 1 << 20)
    line = str(caught.value)
    thrown = sum(1 for seen in faulty_s3.proxy.seen if seen.fault == "throttle")
    assert line.startswith(f"{LARGE}model.safetensors: throttled by the endpoint (503 ")
    assert line.endswith(f"; {thrown} of {thrown} requests throttled, nothing arrived")


class _RatedBucket(ObjectCurve):
    """A curve over a bucket that takes 4 GETs a second and serves a connection 400 MB/s:
    a setting asking more GETs is throttled and gets the bucket's rate × its part size."""

    def __init__(self, total: int) -> None:
        self.objects = [SimpleNamespace(size=total)]  # type: ignore[list-item]
        self.cancel = None
        self.readings = {}
        self.asked: list[tuple[int, int]] = []

    def read(self, connections: int, part: int) -> ObjectReading:
        self.asked.append((connections, part))
        wanted = connections * 400e6 / part  # GETs a second it would ask
        throttled = wanted > 4
        mbps = 4 * part / 1e6 if throttled else connections * 400.0
        seconds = 1.5
        read = int(mbps * 1e6 * seconds)
        reading = ObjectReading(
            connections,
            part,
            mbps,
            read,
            seconds,
            throttles=9 if throttled else 0,
            stopped=throttled,
        )
        self.readings.setdefault((connections, part), []).append(reading)
        return reading


def test_the_curve_of_a_throttling_bucket_tries_larger_parts_not_more_connections() -> None:
    curve = _RatedBucket(4 << 30)
    best = curve.sweep()
    assert curve.asked == [(1, 16 * MiB), (1, 64 * MiB), (1, 256 * MiB), (2, 256 * MiB)]
    assert best == (2, 256 * MiB)


class _PerRequestBucket(ObjectCurve):
    """A curve over a bucket that never throttles, whose connections each read
    ``part / (part + cost)`` of 100 MB/s (a fixed cost per request), 8 of them at most."""

    def __init__(self, total: int, cost: int) -> None:
        self.objects = [SimpleNamespace(size=total)]  # type: ignore[list-item]
        self.cancel, self.cost = None, cost
        self.readings = {}
        self.asked: list[tuple[int, int]] = []

    def read(self, connections: int, part: int) -> ObjectReading:
        self.asked.append((connections, part))
        mbps = min(connections, 8) * 100.0 * part / (part + self.cost)
        reading = ObjectReading(connections, part, mbps, int(mbps * 1.5e6), 1.5)
        self.readings.setdefault((connections, part), []).append(reading)
        return reading


def test_the_curve_goes_on_up_the_part_sizes_while_the_largest_reads_best() -> None:
    """64 MiB parts read best of 4…64 MiB: the curve has not turned, so 256 MiB parts are
    measured too, with as many connections as the model has such parts (4 of a 1 GiB one)."""
    curve = _PerRequestBucket(1 << 30, cost=256 * MiB)
    best = curve.sweep()
    assert (4, 256 * MiB) in curve.asked
    assert best == (4, 256 * MiB)  # 4 × 0.5 of 100 MB/s against 8 × 0.2 of it


def test_the_curve_tries_no_larger_part_that_makes_the_same_gets() -> None:
    """An object of 10 MiB is one GET at 16 MiB parts and larger: 256 MiB asks nothing new."""
    curve = _PerRequestBucket(10 * MiB, cost=256 * MiB)
    curve.sweep()
    assert not [part for _, part in curve.asked if part > 64 * MiB]


def test_the_curve_stops_up_the_part_sizes_where_it_turned() -> None:
    """Where a part smaller than the largest measured reads best, no larger part is tried."""

    class Turning(_PerRequestBucket):
        def read(self, connections: int, part: int) -> ObjectReading:
            reading = super().read(connections, part)
            if part == 64 * MiB:  # the server serves large ranges slowly
                reading = ObjectReading(connections, part, 1.0, int(1.5e6), 1.5)
                self.readings[(connections, part)] = [reading]
            return reading

    curve = Turning(1 << 30, cost=1 * MiB)
    curve.sweep()
    assert not [part for _, part in curve.asked if part > 64 * MiB]


def _ranged(threads: int, *rates: float) -> Any:
    from modelmon.core.measuring.candidate import Candidate

    from .records import run as load_result

    options = dict(threads=threads, chunk=64 * MiB)
    from modelmon.core.options import LoadOptions

    return Candidate.of("ranged", LoadOptions(**options), results=[load_result(r) for r in rates])


class _OverrunRace:
    """A race without a clock whose runs cost their candidate's units: a second entrant that
    runs three times as long as planned leaves no budget for a pair."""

    def __init__(self, budget: float, rates: dict[int, float], cost: dict[int, float]) -> None:
        self.budget, self.rates, self.cost, self.spent = budget, rates, cost, 0.0
        self.evidence_overrun_s = 0.0

    def left(self) -> float:
        return self.budget - self.spent

    def pace(self, candidate: Any) -> float:
        return 1.0

    def check_cancel(self) -> None:
        pass

    def run(self, candidate: Any, **_: object) -> Any:
        from .records import run as load_result

        threads = candidate.options.threads
        self.spent += self.cost[threads]
        done = load_result(self.rates[threads])
        candidate.results.append(done)
        candidate.wall_seconds.append(self.cost[threads])
        return done


def test_a_bucket_pick_no_pair_confirmed_is_within_noise_and_has_fewer_connections() -> None:
    """The issue's loopback figures: 16 connections' entry run at 981 MB/s, 4's at 806; no
    pair fitted. One run each tells no noise of its own: 1.22x is within twice a bucket's
    usual noise, and within twice a file read's too (one rule in both searches), so both
    pick 4 connections and say it is a tie."""
    from modelmon.core.measuring.object_search import BucketSearch
    from modelmon.core.measuring.search import Search

    for searching, picked, tie in ((Search, 4, True), (BucketSearch, 4, True)):
        race = _OverrunRace(5.0, {16: 981.0, 4: 806.0}, {16: 1.0, 4: 3.0})
        grid = [_ranged(16), _ranged(4)]
        best, duel = searching(race, grid, None).run()  # type: ignore[arg-type]
        assert best is not None and duel is not None and duel.verdict is None
        assert best.options.threads == picked and duel.tie is tie


def test_entry_runs_apart_beyond_their_noise_pick_the_faster_on_a_bucket() -> None:
    """Runs not in pairs are weighed against their spread, never less than a bucket's usual
    noise: 1.22x with runs within ±1 % is no finding on a bucket (one setting's median moved
    from 1,351 to 1,004 MB/s between two searches of a walk), 1.6x is."""
    from modelmon.core.measuring.object_search import BucketSearch

    many = _ranged(16, 980.0, 985.0, 975.0)
    few = _ranged(4, 800.0, 805.0, 795.0)
    best, duel = BucketSearch(None, [], None).undecided(few, many)  # type: ignore[arg-type]
    assert best is few and duel.tie
    many = _ranged(16, 1300.0, 1305.0, 1295.0)
    best, duel = BucketSearch(None, [], None).undecided(few, many)  # type: ignore[arg-type]
    assert best is many and duel.other is few and not duel.tie
    close = _ranged(16, 830.0, 700.0, 900.0)  # 3 % ahead, its runs spread ±15 %
    best, duel = BucketSearch(None, [], None).undecided(few, close)  # type: ignore[arg-type]
    assert best is few and duel.tie


def test_single_entry_runs_far_apart_pick_the_faster_on_a_bucket() -> None:
    """One run each tells no noise of its own: a bucket's usual noise stands for it. A plain
    download at 818 MB/s against 10 connections at 1,233 (1.5x, a new user's walk) is not
    within noise; 10 % apart is."""
    from modelmon.core.measuring.object_search import BucketSearch

    plain = _ranged(1, 818.0)
    wide = _ranged(10, 1233.0)
    best, duel = BucketSearch(None, [], None).undecided(plain, wide)  # type: ignore[arg-type]
    assert best is wide and duel.other is plain and not duel.tie
    near = _ranged(10, 900.0)
    best, duel = BucketSearch(None, [], None).undecided(plain, near)  # type: ignore[arg-type]
    assert best is plain and duel.tie


def test_a_point_of_the_curve_reads_for_a_while_not_the_whole_model(
    faulty_s3: SimpleNamespace,
) -> None:
    """116 GETs each held 0.1 s would take 12 s on one connection: a point begins none
    after its time and is rated on what it read; the bound reads the whole model."""
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.latency_s = 0.1
    faulty_s3.proxy.seen.clear()
    reading = plain_get(facts, 1, 64 << 10, limit_s=0.5)
    gets = [seen for seen in faulty_s3.proxy.seen if seen.method == "GET" and seen.range]
    assert 0 < len(gets) < -(-facts[0].size // (64 << 10))
    assert reading.mbps > 0 and not reading.throttles and not reading.stopped


def test_a_point_of_the_curve_makes_a_get_on_every_connection_however_short_its_time(
    faulty_s3: SimpleNamespace,
) -> None:
    """Its time counts from the first GET, not from making the connections (seconds on a
    busy machine): a point never reads nothing because its client was slow to start."""
    facts = _facts(LARGE)
    faulty_s3.proxy.seen.clear()
    reading = plain_get(facts, 2, 64 << 10, limit_s=0.0)
    gets = [seen for seen in faulty_s3.proxy.seen if seen.method == "GET" and seen.range]
    assert len(gets) == 2 and reading.bytes == 2 * (64 << 10) and reading.mbps > 0


def test_a_plain_get_that_failed_is_tried_again_and_its_reading_read_again(
    faulty_s3: SimpleNamespace,
) -> None:
    """Walk 22: one GET of the storage bound's plain reads, under load, ended a whole search
    ("no answer from http://127.0.0.1:9940, after 1 try"): a plain read tried nothing again
    but a throttle. A plain client's defaults retry a 5xx and a dropped connection: so does
    the plain reader, and the curve reads again a setting whose reading waited for one."""
    facts = _facts(LARGE)
    faulty_s3.proxy.faults.fail_with, faulty_s3.proxy.faults.failures = 500, 2
    reading = plain_get(facts, 1, 1 << 20)
    assert reading.retries == 2 and reading.bytes == sum(f.size for f in facts)
    faulty_s3.proxy.faults.fail_with, faulty_s3.proxy.faults.failures = 500, 1
    curve = ObjectCurve(open_model(LARGE), None)
    again = curve.read(1, 1 << 20, whole=True)
    assert again.retries == 0 and again.bytes == reading.bytes
    assert curve.whole[(1, 1 << 20)] == [again]


def test_a_plain_get_with_no_answer_names_the_step_and_the_storage_timeout(
    faulty_s3: SimpleNamespace,
) -> None:
    """An endpoint that takes a GET and never answers ends the bound's reading at the storage
    timeout, in a line that says where it was and how to wait longer."""
    from modelmon.core.errors import StorageError
    from modelmon.core.storage.policy import storage_timeout

    facts = _facts(LARGE)
    faulty_s3.proxy.faults.silent, faulty_s3.proxy.faults.after = True, 1
    with storage_timeout(2), pytest.raises(StorageError) as caught:
        plain_get(facts, 1, 1 << 20)
    line = str(caught.value)
    assert "nothing arrived within the storage timeout, 2 s" in line, line
    assert "--storage-timeout SECONDS" in line, line
    assert line.endswith(
        ", in the plain GETs that measure the storage's bound (1 connection(s), 1 MiB GETs)"
    ), line
