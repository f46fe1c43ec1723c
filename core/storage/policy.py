"""How long a request may wait, and how a failed one is retried: backoff with full jitter.

Every wait of a read has a bound and a way out: a connection gets ``connect_s``, each
socket read ``read_s``, and a backoff sleeps on the caller's cancel event. Throttling (503
SlowDown, 429), a server error (500, 502, 504) and a dropped connection are retried; a body
that stopped part-way is asked for again from the byte where it stopped, and bytes that
arrived count as progress, so a connection that keeps dropping after progress keeps going
while one that fails without a byte gives up after ``attempts``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 10.0  # to open a connection
    read_s: float = 30.0  # for each socket read: the first byte of an answer, or the next


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts``: tries of one request in a row that bring no byte before it fails.
    The n-th retry waits a uniformly random time in [0, min(cap_s, base_s * 2**n)]
    (AWS's "full jitter": many readers throttled at once do not come back at once)."""

    attempts: int = 8
    unreachable_attempts: int = 3  # an endpoint that refuses connections is down, not busy
    base_s: float = 0.1
    cap_s: float = 20.0

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """The wait before the retry that follows ``failures`` failures in a row (≥ 1)."""
        ceiling = min(self.cap_s, self.base_s * 2 ** min(failures - 1, 30))
        return (rng or random).uniform(0.0, ceiling)
