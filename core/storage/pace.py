"""How many requests one reader keeps in flight and how large a part each asks for, taken
from the bucket's answers.

A throttle (503 SlowDown, 429) is the bucket's word on how many requests a second it takes,
not a fault: S3 throttles per prefix (5,500 GETs a second, fewer while it scales) and any
request over the rate is refused whole, so a client that keeps its concurrency and part
size keeps asking too many and fails where fewer, larger requests would have gone through.
So the pace works as AIMD does (TCP's congestion control): a throttle halves the requests
allowed in flight and doubles the part size (once per round trip: throttles of requests sent
before the last change are the same congestion), and every round of requests answered
without a throttle allows one more in flight, up to the connections open. A larger part
costs no memory (bodies go straight into the arrays, or through a bounded scratch buffer)
and asks for the same bytes with fewer requests, so it stays large once grown, up to
``MAX_PART`` and a part per connection of what is to read.

The throttled request's part goes back to the front of the queue (nothing of it arrived)
and its reader waits a back-off with full jitter; throttles count toward a failure only
while no byte arrives on any connection of the reader: while bytes arrive, the reader is
being paced, not failing.
"""

from __future__ import annotations

import threading
import time

MiB = 1 << 20
MAX_PART = 256 * MiB  # at 100 MB/s a connection, a request of about 2.7 s


class Pace:
    """One reader's requests in flight (``allowed``, of ``connections`` open) and part size
    (``part``), changed by the answers; thread-safe."""

    def __init__(self, connections: int, part: int, total: int) -> None:
        self.connections = connections
        self.allowed = connections
        self.part = part
        # Larger parts than a part per connection of the whole read would leave connections
        # idle; never smaller than the part asked for.
        self.max_part = max(part, min(MAX_PART, total // max(1, connections)))
        self.throttles = 0
        self.last_byte = time.monotonic()  # any connection's last byte (or the start)
        self._decreased_ns = 0  # perf_counter_ns of the last decrease
        self._answered = 0  # answers without a throttle since the last change
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)

    def arrived(self) -> None:
        """Bytes arrived on some connection (cheap: called for every slice)."""
        self.last_byte = time.monotonic()

    def throttled(self, sent_ns: int) -> None:
        """A request sent at ``sent_ns`` (``perf_counter_ns``) was throttled."""
        with self._lock:
            self.throttles += 1
            self._answered = 0
            if sent_ns < self._decreased_ns:  # sent before the last decrease: the same event
                return
            self._decreased_ns = time.perf_counter_ns()
            self.allowed = max(1, self.allowed // 2)
            self.part = min(self.max_part, self.part * 2)
            self.changed.notify_all()

    def answered(self) -> None:
        """A request was answered in full, without a throttle: after a round of those (as
        many as are allowed in flight), one more is allowed."""
        with self._lock:
            self._answered += 1
            if self._answered >= self.allowed and self.allowed < self.connections:
                self.allowed += 1
                self._answered = 0
                self.changed.notify_all()

    def now(self) -> tuple[int, int]:
        """(requests allowed in flight, part size) as they are."""
        with self._lock:
            return self.allowed, self.part
