"""How long a request may wait, and how a failed one is retried: backoff with full jitter.

Every wait of a read has a bound and a way out: a connection gets ``connect_s``, each
socket read ``read_s``, and a backoff sleeps on the caller's cancel event. Throttling (503
SlowDown, 429), a server error (500, 502, 504) and a dropped connection are retried; a body
that stopped part-way is asked for again from the byte where it stopped, and bytes that
arrived count as progress, so a connection that keeps dropping after progress keeps going
while one that fails without a byte gives up after ``attempts`` tries or ``patience_s``
seconds, whichever comes first. ``patience_s`` is the storage timeout: the process's
``MODELMON_STORAGE_TIMEOUT`` (the CLI's ``--storage-timeout``, which every worker process
inherits), 30 s by default, and no socket wait is longer than it.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace

from modelmon.core.limits import (
    DEFAULT_STORAGE_TIMEOUT_S,
    MAX_STORAGE_TIMEOUT_S,
    MIN_STORAGE_TIMEOUT_S,
    STORAGE_TIMEOUT_ENV,
    check_number,
)


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect_s: float = 10.0  # to open a connection
    read_s: float = 30.0  # for each socket read: the first byte of an answer, or the next

    def within(self, seconds: float) -> Timeouts:
        """These timeouts, none longer than ``seconds``."""
        return Timeouts(min(self.connect_s, seconds), min(self.read_s, seconds))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts``: tries of one request in a row that bring no byte before it fails;
    ``patience_s``: the seconds they may take together (from the last byte that arrived).
    The n-th retry waits a uniformly random time in [0, min(cap_s, base_s * 2**n)]
    (AWS's "full jitter": many readers throttled at once do not come back at once)."""

    attempts: int = 8
    unreachable_attempts: int = 3  # an endpoint that refuses connections is down, not busy
    base_s: float = 0.1
    cap_s: float = 20.0
    patience_s: float = DEFAULT_STORAGE_TIMEOUT_S

    def delay(self, failures: int, rng: random.Random | None = None) -> float:
        """The wait before the retry that follows ``failures`` failures in a row (≥ 1)."""
        ceiling = min(self.cap_s, self.base_s * 2 ** min(failures - 1, 30))
        return (rng or random).uniform(0.0, ceiling)


def storage_timeout_s() -> float:
    """The storage timeout this process runs with: ``MODELMON_STORAGE_TIMEOUT`` (seconds),
    else the default; OptionsError for a value that is not one."""
    text = os.environ.get(STORAGE_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_STORAGE_TIMEOUT_S
    try:
        value: object = float(text)
    except ValueError:
        value = text
    return check_number(
        STORAGE_TIMEOUT_ENV, value, MIN_STORAGE_TIMEOUT_S, MAX_STORAGE_TIMEOUT_S, "s"
    )


def read_policy(policy: RetryPolicy | None = None) -> RetryPolicy:
    """``policy`` (default: the defaults) with the process's storage timeout."""
    return replace(policy or RetryPolicy(), patience_s=storage_timeout_s())


def store_timeouts() -> Timeouts:
    """The socket timeouts of a new store: the defaults, none past the storage timeout."""
    return Timeouts().within(storage_timeout_s())


@contextlib.contextmanager
def storage_timeout(seconds: float) -> Iterator[None]:
    """Within the block, every read of object storage (here and in the processes started
    meanwhile, which inherit it) waits at most ``seconds`` for an endpoint that sends
    nothing, its retries included. It sets ``MODELMON_STORAGE_TIMEOUT``, restored after."""
    value = check_number(
        "the storage timeout", seconds, MIN_STORAGE_TIMEOUT_S, MAX_STORAGE_TIMEOUT_S, "s"
    )
    before = os.environ.get(STORAGE_TIMEOUT_ENV)
    os.environ[STORAGE_TIMEOUT_ENV] = f"{value:g}"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STORAGE_TIMEOUT_ENV, None)
        else:
            os.environ[STORAGE_TIMEOUT_ENV] = before
