"""What ranged reads did, request by request, and summed: requests, bytes, time to first byte
(median, p99), throughput per connection, retries and throttles.

A ``RequestRecord`` is one request sent (a retry is another record), timed on
``perf_counter_ns`` (the clock of the loader's read records). Time to first byte is from
sending the request to having the answer's headers. ``ReadStats.of(records)`` sums them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

OUTCOMES = ("ok", "throttled", "server-error", "dropped", "timeout", "unreachable", "failed")


class RequestRecord(NamedTuple):
    """One ranged GET: what was asked, what came, when, and how it ended."""

    connection: int  # the reader's connection number, 0..N-1
    url: str
    first: int  # the first byte asked for
    asked: int  # bytes asked for
    received: int  # body bytes that arrived (fewer than asked when it ended early)
    status: int  # the answer's status; 0 when none came
    sent_ns: int
    first_byte_ns: int  # when the answer's headers were in; 0 when none came
    end_ns: int
    outcome: str  # one of OUTCOMES
    attempt: int  # 0 for a part's first request, n for its n-th retry
    resumed: bool  # asked from where an earlier answer's body stopped
    # The pace of its reader when it was sent (``pace.Pace``): requests allowed in flight and
    # the part size; 0 for a read not paced (a header's).
    allowed: int = 0
    part: int = 0
    reader: int = 0  # which reader (a load's worker) sent it: each has its own pace

    @property
    def ttfb_s(self) -> float:
        return (self.first_byte_ns - self.sent_ns) / 1e9 if self.first_byte_ns else math.nan


@dataclass(frozen=True, slots=True)
class PacePoint:
    """The pace of the readers from ``at_s`` (seconds since the first request) on, as their
    requests were sent: requests allowed in flight in all (the connections in use) and the
    largest part size a reader asked for."""

    at_s: float
    connections: int
    part: int


@dataclass(frozen=True, slots=True)
class ConnectionStats:
    """One connection's share: its requests, bytes, the time it spent in requests, and its
    throughput over that time (bytes per second)."""

    connection: int
    requests: int
    bytes: int
    busy_s: float
    throughput: float  # bytes / busy_s


@dataclass(frozen=True, slots=True)
class ReadStats:
    """A read of objects over N connections, summed from its request records."""

    requests: int
    bytes: int
    wall_s: float  # from the first request sent to the last body's end
    ttfb_median_s: float  # NaN when no answer came
    ttfb_p99_s: float
    retries: int  # requests sent again after a failure (throttled, dropped...)
    throttles: int  # answers that were 503 SlowDown or 429
    resumed: int  # retries that asked only for the rest of a body cut short
    connections: tuple[ConnectionStats, ...]
    # The readers' pace over time (``pace.Pace``): each change of the connections in use or
    # the part size; () for reads not paced.
    pace: tuple[PacePoint, ...] = ()

    @property
    def adapted(self) -> bool:
        """The pace changed: the bucket's throttles moved it."""
        return len(self.pace) > 1

    @property
    def throughput(self) -> float:
        """All bytes over the wall time, bytes per second."""
        return self.bytes / self.wall_s if self.wall_s > 0 else math.nan

    @classmethod
    def of(cls, records: list[RequestRecord], connections: int) -> ReadStats:
        """Summed from ``records`` over ``connections`` (of one reader or several, each
        with its own pace)."""
        ttfbs = sorted(r.ttfb_s for r in records if r.first_byte_ns)
        per: list[ConnectionStats] = []
        for number in range(connections):
            own = [r for r in records if r.connection == number]
            busy = sum(r.end_ns - r.sent_ns for r in own) / 1e9
            received = sum(r.received for r in own)
            throughput = received / busy if busy > 0 else math.nan
            per.append(ConnectionStats(number, len(own), received, busy, throughput))
        wall = (
            (max(r.end_ns for r in records) - min(r.sent_ns for r in records)) / 1e9
            if records
            else 0.0
        )
        return cls(
            requests=len(records),
            bytes=sum(r.received for r in records),
            wall_s=wall,
            ttfb_median_s=percentile(ttfbs, 50),
            ttfb_p99_s=percentile(ttfbs, 99),
            retries=sum(1 for r in records if r.attempt),
            throttles=sum(1 for r in records if r.outcome == "throttled"),
            resumed=sum(1 for r in records if r.resumed),
            connections=tuple(per),
            pace=pace_of(records),
        )


def pace_of(records: list[RequestRecord]) -> tuple[PacePoint, ...]:
    """The readers' pace as their requests were sent: a point at each change of their
    connections in use (summed) or part size (the largest), once every reader has sent one."""
    paced = sorted((r for r in records if r.allowed), key=lambda r: r.sent_ns)
    if not paced:
        return ()
    readers = len({r.reader for r in paced})
    start = min(r.sent_ns for r in records)
    latest: dict[int, tuple[int, int]] = {}
    points: list[PacePoint] = []
    for record in paced:
        latest[record.reader] = (record.allowed, record.part)
        if len(latest) < readers:
            continue
        now = (sum(a for a, _ in latest.values()), max(p for _, p in latest.values()))
        if not points or (points[-1].connections, points[-1].part) != now:
            points.append(PacePoint((record.sent_ns - start) / 1e9, *now))
    return tuple(points)


def percentile(ordered: list[float], percent: float) -> float:
    """The nearest-rank percentile of sorted values (a value that was measured, never one
    between two); NaN for none."""
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(percent / 100 * len(ordered)))
    return ordered[rank - 1]
